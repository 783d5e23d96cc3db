// Setup of the tcp transport's sockets: the listener, the hello/ack exchange and the checks that
// keep strangers out.
//
// For each pair of ranks the higher connects to the lower's published address and sends a Hello;
// the lower checks it (magic, version, communicator tag, nranks, a rank above its own that it has
// not seen yet, and the listener token published with the address) and answers with an ack.
// With several sockets per pair the higher rank opens them all, each with its own hello naming
// its index; the pair is established once every index has been acked, in whatever order they
// came. Ranks that disagree on the count fail their setup with InvalidUsage (both learn it: the
// ack carries the lower rank's count). A
// connection that fails the checks is logged and closed, and accepting goes on. A valid hello from
// a rank this call does not expect (it is already in a later connect() of ours) is acked and kept
// for that call, so ranks need not call connect() with the same peer lists in the same order.
//
// Strangers on the listener cost little: a connection whose hello is not whole within
// kHelloTimeout is dropped, at most max_incoming() of them are kept (the oldest goes first), a
// flood is accepted in bounded rounds, and running out of descriptors lowers that cap instead of
// failing the setup.
#pragma once

#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "core/bootstrap/socket.h"
#include "core/bootstrap/unique_id.h"
#include "transport/tcp/tcp_wire.h"
#include "transport/transport.h"

namespace ccl::transport::tcp {

struct EstablishedPeer {
  std::vector<Socket> sockets;  // indexed by the hello's socket index
  std::string address;          // the peer's address (of socket 0), for error messages
};

// The checks of a received hello or ack that depend on nothing but the communicator, as pure
// functions (tests/fuzz feeds them arbitrary bytes). Why rank `rank` of `nranks` (communicator tag
// hash `tag_hash`) must refuse `hello` from a connecting peer; "" when it may accept it (if that
// peer is not connected already, which the Handshake checks itself).
std::string hello_problem(const Hello& hello, int rank, int nranks, uint64_t tag_hash);
// Whether `ack` is the answer of rank `peer` of that communicator.
bool ack_matches(const Hello& ack, int peer, int nranks, uint64_t tag_hash);

class Handshake {
 public:
  Handshake(int rank, int nranks, std::string comm_tag, int nsockets = 1);

  // `nsockets` connected sockets per rank of `peers` (none connected before), blocking until all
  // are established, ctx.deadline (Timeout) or *ctx.abort (RemoteError).
  std::map<int, EstablishedPeer> establish(const SetupContext& ctx, std::span<const int> peers);

  // Closes the listener once the communicator is set up: no port stays open for strangers.
  // Hellos accepted already (stashed) are kept.
  void stop_listening() {
    listener_ = Socket();
    incoming_.clear();
  }

  // The store key under which `rank` publishes its listening address and listener token, in the
  // form encode_published() writes: "host:port token-in-hex".
  static std::string address_key(const std::string& comm_tag, int rank);
  struct Published {
    std::string address;
    Secret token{};
  };
  static std::string encode_published(const std::string& address, const Secret& token);
  // Throws RemoteError for a value that is not in that form.
  static Published decode_published(const std::string& value);

  // An accepted connection must deliver its whole hello within this time.
  static constexpr auto kHelloTimeout = std::chrono::seconds(5);
  // Accepted connections whose hello has not arrived whole are kept at most this many: a share of
  // the descriptor limit, so that a flood cannot leave the rank without descriptors.
  static size_t max_incoming();

 private:
  struct Incoming {
    Socket socket;
    std::string address;
    Clock::time_point deadline;  // for the whole hello
    Hello hello{};
    size_t got = 0;
  };
  struct Outgoing {
    int peer;
    int index;  // the socket's among the pair's
    Socket socket;
    std::string address;
    Secret token{};  // the peer's, which its ack must carry
    Hello ack{};
    size_t got = 0;
  };

  void ensure_listening(Store& store);
  // Accepts what is queued; reads each hello at once (so a real rank's socket is not counted
  // against the cap on connections without a hello).
  void accept_pending(const std::set<int>& expected, std::map<int, EstablishedPeer>& result);
  void drop_expired_incoming();
  void note_stranger(const std::string& address, const std::string& reason);
  // Reads more of an incoming hello; true when the socket is done with (kept or dropped).
  bool read_hello(Incoming& in, const std::set<int>& expected,
                  std::map<int, EstablishedPeer>& result);
  bool validate_hello(const Incoming& in, const std::map<int, EstablishedPeer>& result);
  // Reads more of an ack; true once it is complete and valid. Throws if the peer is wrong.
  bool read_ack(Outgoing& out);
  Hello make_hello(uint16_t kind, const Secret& token, int socket) const;
  [[noreturn]] void throw_count_mismatch(int peer, int peer_nsockets) const;

  int rank_;
  int nranks_;
  std::string comm_tag_;
  uint64_t tag_hash_;
  int nsockets_;
  Socket listener_;
  std::string listen_address_;
  Secret token_{};                           // this listener's, see tcp_wire.h
  Clock::time_point accept_paused_until_{};  // after running out of descriptors
  size_t incoming_cap_ = 0;                  // max_incoming(), lowered when descriptors ran out
  size_t strangers_dropped_ = 0;
  std::vector<Incoming> incoming_;          // accepted, hello incomplete
  std::map<int, EstablishedPeer> partial_;  // accepted sockets of pairs not yet complete
  std::map<int, EstablishedPeer> stashed_;  // complete pairs for a later connect() call
  std::set<int> established_;               // ranks already handed out
};

}  // namespace ccl::transport::tcp
