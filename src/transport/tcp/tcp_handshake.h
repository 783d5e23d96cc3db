// Setup of the tcp transport's sockets: the listener, the hello/ack exchange and the checks that
// keep strangers out.
//
// For each pair of ranks the higher connects to the lower's published address and sends a Hello;
// the lower checks it (magic, version, communicator tag, nranks, a rank above its own that it has
// not seen yet) and answers with an ack. A connection that fails the checks is logged and closed,
// and accepting goes on. A valid hello from a rank this call does not expect (it is already in a
// later connect() of ours) is acked and kept for that call, so ranks need not call connect() with
// the same peer lists in the same order.
#pragma once

#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "core/bootstrap/socket.h"
#include "transport/tcp/tcp_wire.h"
#include "transport/transport.h"

namespace ccl::transport::tcp {

struct EstablishedSocket {
  Socket socket;
  std::string address;  // the peer's address, for error messages
};

class Handshake {
 public:
  Handshake(int rank, int nranks, std::string comm_tag);

  // One connected socket per rank of `peers` (none connected before), blocking until all are
  // established, ctx.deadline (Timeout) or *ctx.abort (RemoteError).
  std::map<int, EstablishedSocket> establish(const SetupContext& ctx, std::span<const int> peers);

  // The store key under which `rank` publishes its listening address.
  static std::string address_key(const std::string& comm_tag, int rank);

  // Accepted connections whose hello has not arrived whole are kept at most this many.
  static constexpr size_t kMaxIncoming = 256;

 private:
  struct Incoming {
    Socket socket;
    std::string address;
    Hello hello{};
    size_t got = 0;
  };
  struct Outgoing {
    int peer;
    Socket socket;
    std::string address;
    Hello ack{};
    size_t got = 0;
  };

  void ensure_listening(Store& store);
  void accept_pending();
  // Reads more of an incoming hello; true when the socket is done with (kept or dropped).
  bool read_hello(Incoming& in, const std::set<int>& expected,
                  std::map<int, EstablishedSocket>& result);
  bool validate_hello(const Incoming& in, const std::map<int, EstablishedSocket>& result) const;
  // Reads more of an ack; true once it is complete and valid. Throws if the peer is wrong.
  bool read_ack(Outgoing& out);
  Hello make_hello(uint16_t kind) const;

  int rank_;
  int nranks_;
  std::string comm_tag_;
  uint64_t tag_hash_;
  Socket listener_;
  std::string listen_address_;
  std::vector<Incoming> incoming_;            // accepted, hello incomplete
  std::map<int, EstablishedSocket> stashed_;  // valid hellos for a later connect() call
  std::set<int> established_;                 // ranks already handed out
};

}  // namespace ccl::transport::tcp
