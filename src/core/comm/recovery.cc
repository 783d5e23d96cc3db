#include "core/comm/recovery.h"

#include <algorithm>

#include "base/error.h"
#include "base/log.h"

namespace ccl {

void Recovery::open(const recovery::CommName& comm, std::vector<SocketAddress> listeners,
                    std::function<void(int by)> on_revoke) {
  comm_ = comm;
  listeners_ = std::move(listeners);
  if (listeners_[static_cast<size_t>(rank_)].port() == 0) return;  // no listener here
  endpoint_ = recovery::Listener::instance().open(comm_, rank_, std::move(on_revoke));
}

void Recovery::close() {
  if (endpoint_) recovery::Listener::instance().close(comm_.tag, rank_);
}

void Recovery::spread_revoke(std::chrono::milliseconds per_peer, Deadline deadline) {
  {
    std::lock_guard lock(failed_mutex_);
    if (revoke_spread_) return;
    revoke_spread_ = true;
  }
  const std::set<int> gone = failed();
  for (int r = 0; r < nranks_; ++r) {
    const SocketAddress& to = listeners_[static_cast<size_t>(r)];
    if (r == rank_ || gone.contains(r) || to.port() == 0) continue;
    if (deadline.expired()) {
      CCL_WARN(kInit, "rank %d: revoke told ranks below %d only: the timeout passed", rank_, r);
      return;
    }
    try {
      const Deadline by = std::min(Deadline::after(per_peer), deadline,
                                   [](Deadline a, Deadline b) { return a.at() < b.at(); });
      const Socket s = recovery::open_with_hello(
          to, recovery::make_hello(recovery::Ask::kRevoke, comm_, r, rank_, 0), by);
      if (!s.valid()) note_failed({r});
    } catch (const Error& e) {
      CCL_INFO(kInit, "rank %d: revoke not told to rank %d: %s", rank_, r, e.what());
    }
  }
}

recovery::Agreement Recovery::next_agreement(std::vector<int> participants, Deadline deadline) {
  if (!endpoint_) {
    throw_error(cclInvalidUsage, "this process has no recovery listener (see the log at init)");
  }
  for (int p : participants) {
    if (listeners_[static_cast<size_t>(p)].port() == 0) {
      throw_error(cclInvalidUsage, "rank %d has no recovery listener (see its log at init)", p);
    }
  }
  recovery::Agreement a;
  a.comm = comm_;
  a.self = rank_;
  a.listeners = listeners_;
  a.endpoint = endpoint_;
  a.seq = ++agreements_;
  a.participants = std::move(participants);
  a.deadline = deadline;
  return a;
}

std::set<int> Recovery::failed() const {
  std::lock_guard lock(failed_mutex_);
  return failed_;
}

void Recovery::note_failed(const std::vector<int32_t>& ranks) {
  std::lock_guard lock(failed_mutex_);
  for (int r : ranks) {
    if (r != rank_ && r >= 0 && r < nranks_) failed_.insert(r);
  }
}

void Recovery::probe(std::chrono::milliseconds budget) {
  const Deadline deadline = Deadline::after(budget);
  const std::set<int> known = failed();
  for (int r = 0; r < nranks_ && !deadline.expired(); ++r) {
    if (r == rank_ || known.contains(r)) continue;
    if (recovery::listener_gone(listeners_[static_cast<size_t>(r)], deadline)) note_failed({r});
  }
}

}  // namespace ccl
