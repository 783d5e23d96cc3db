// The recovery plane: how the ranks of a communicator reach each other when its transports can no
// longer be trusted (a rank died mid-operation, the communicator was revoked). Each process has
// one listener (a TCP socket on the interface the bootstrap uses, and a thread), started by its
// first communicator; every rank publishes its listener's address at the rendezvous. A connection
// to it names the communicator and the rank it is for, and presents the communicator's key
// (recovery_wire.h: a stranger who read the tag off /dev/shm cannot revoke a job); the listener
// files it with that rank's Endpoint.
//
// A process that dies closes its listener and every connection it held, so a refused connection
// or an end of stream is how a survivor learns that a rank is gone, on this host or another one,
// without waiting for a timeout (a host that vanishes whole still takes the timeout).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/bootstrap/socket.h"
#include "core/recovery/recovery_wire.h"

namespace ccl::recovery {

// What the listener filed for one rank of one communicator, and the decisions of its agreements.
// The listener thread and the rank's own calls share it under `mutex`.
struct Endpoint {
  struct Submission {
    int from = -1;
    Socket socket;  // the decision goes back on it
    Vote vote;
  };
  std::mutex mutex;
  std::map<uint64_t, Vote> decided;                     // by agreement number
  std::map<uint64_t, std::vector<Submission>> submits;  // to this rank as coordinator
  std::map<uint64_t, std::vector<Socket>> watches;      // coordinators watching this rank
  std::vector<Socket> holds;                            // survivors' liveness links
  std::function<void(int from)> on_revoke;              // null once the communicator is gone
  Secret key{};                                         // a connection must present it
  bool closed = false;

  // Records agreement `seq`'s decision (the first one recorded wins; it is returned) and sends it
  // to every coordinator that watches this rank. The caller does not hold `mutex`.
  Vote record(uint64_t seq, const Vote& decision);
};

class Listener {
 public:
  // The process's listener, started on first use. Throws SystemError where it cannot listen.
  static Listener& instance();
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  const SocketAddress& address() const { return address_; }
  // Files connections for rank `rank` of communicator `tag` with the returned endpoint from now
  // on; `on_revoke` runs (on the listener's thread, under the endpoint's mutex) when a peer says
  // it revoked the communicator.
  std::shared_ptr<Endpoint> open(const CommName& comm, int rank,
                                 std::function<void(int from)> on_revoke);
  // The communicator is gone: its held connections close and revokes are ignored, but its
  // decisions stay answerable for a while (a late coordinator may still ask for them).
  void close(const std::string& tag, int rank);

 private:
  Listener();
  void run();
  // pthread_atfork: hold every lock across fork(); in the child close every descriptor.
  void before_fork();
  void after_fork(bool in_child);
  void serve(Socket socket);

  Socket socket_;
  SocketAddress address_;
  std::mutex mutex_;
  std::map<std::pair<std::string, int>, std::shared_ptr<Endpoint>> endpoints_;
  std::vector<std::pair<std::string, int>> closed_;  // oldest first; trimmed past kKeptClosed
  bool stop_ = false;                                // under mutex_
  std::thread thread_;
};

}  // namespace ccl::recovery
