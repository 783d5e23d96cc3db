// The recovery part of a communicator (API.md "Recovering from a failed rank"): its endpoint on the
// process's recovery listener (core/recovery/), every rank's listener address, the ranks known to
// have failed, and the count of agreements, which numbers them alike on every rank. Revoke tells
// the peers through it; agree and shrink run their agreements through it (agreement.h). It works
// when the transports cannot: it never uses them.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "core/bootstrap/socket.h"
#include "core/recovery/agreement.h"
#include "core/recovery/recovery_listener.h"

namespace ccl {

class Recovery {
 public:
  Recovery(int rank, int nranks) : rank_(rank), nranks_(nranks) {}
  ~Recovery() { close(); }
  Recovery(const Recovery&) = delete;
  Recovery& operator=(const Recovery&) = delete;

  // After the peers connected: files this rank with the listener; `on_revoke(by)` runs when a
  // peer revokes the communicator.
  void open(const recovery::CommName& comm, std::vector<SocketAddress> listeners,
            std::function<void(int by)> on_revoke);
  const recovery::CommName& name() const { return comm_; }
  // Stops taking revokes and closes held connections (the communicator is going away).
  void close();

  // Tells every other rank's listener that this rank revoked the communicator (once; a peer that
  // does not answer within `per_peer` is skipped: it learns from its transports), by `deadline`.
  void spread_revoke(std::chrono::milliseconds per_peer, Deadline deadline);

  // One agreement at a time (the caller holds it while it runs one).
  std::mutex& mutex() { return mutex_; }
  // The next agreement among `participants` (increasing), under `deadline`. InvalidUsage where
  // some participant has no listener.
  recovery::Agreement next_agreement(std::vector<int> participants, Deadline deadline);
  // The ranks known to have failed, increasing.
  std::set<int> failed() const;
  void note_failed(const std::vector<int32_t>& ranks);
  // Asks the listener of every rank not known to have failed whether it is still there (a
  // refused connection: the process is gone), within `budget`; notes those that are gone.
  void probe(std::chrono::milliseconds budget);
  const std::vector<SocketAddress>& listeners() const { return listeners_; }

 private:
  const int rank_, nranks_;
  recovery::CommName comm_;
  std::vector<SocketAddress> listeners_;
  std::shared_ptr<recovery::Endpoint> endpoint_;
  mutable std::mutex mutex_;  // one agreement at a time
  mutable std::mutex failed_mutex_;
  std::set<int> failed_;
  uint64_t agreements_ = 0;
  bool revoke_spread_ = false;
};

}  // namespace ccl
