// How a communicator fails (DESIGN.md principle 5, issue 6): the first error of an operation is
// recorded and told to every peer (transport.h, failure propagation), abort releases every wait,
// cclCommGetAsyncError asks the transports about idle peers, and a timeout is traced along the
// ranks' wait-for edges to the rank that holds everyone up.
#include <map>
#include <set>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "core/comm.h"
#include "core/stream.h"

namespace ccl {

void Communicator::abort() {
  status_.abort();
  // During a non-blocking init the transports are being built: its waits see the flag.
  if (!async_.ready()) return;
  for (auto& t : transports_) t->interrupt();
}

void Communicator::record_failure(const Error& error) {
  status_.mark_failed(error.code());
  // An abort makes the running operation fail: tell the peers it was that.
  notify_peers(status_.aborted() ? transport::abort_notice(rank_)
                                 : transport::notice_for(error, rank_));
}

void Communicator::notify_peers(const transport::FailureNotice& notice) {
  if (peers_notified_) return;
  peers_notified_ = true;
  for (auto& t : transports_) t->notify_failure(notice);
}

void Communicator::abort_and_notify(std::chrono::milliseconds grace) {
  abort();
  if (!async_.ready()) return;
  // try_lock in a loop, not a timed lock: ThreadSanitizer misreads pthread_mutex_timedlock.
  std::unique_lock lock(op_mutex_, std::defer_lock);
  const Deadline until = Deadline::after(grace);
  while (!lock.try_lock()) {
    if (until.expired()) return;  // the operation still running tells the peers itself
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  notify_peers(transport::abort_notice(rank_));
}

cclResult_t Communicator::poll_async_error() {
  if (async_.initializing()) return cclInProgress;
  cclResult_t current = status_.error();
  if (current != cclSuccess || status_.destroyed() || status_.aborted()) return current;
  if (async_.queue_busy()) return cclInProgress;
  std::unique_lock lock(op_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return current;  // an operation runs: it will see any failure itself
  try {
    for (auto& t : transports_) t->check_health();
  } catch (const Error& e) {
    CCL_WARN(kAll, "rank %d: %s", rank_, e.what());
    set_last_error(e.what());
    record_failure(e);
  }
  return status_.error();
}

void Communicator::note_pending(std::span<const int> peers) {
  pending_now_.assign(peers.begin(), peers.end());
  recorder_->set_pending(record_, peers);
}

// Every rank that times out, or learns of a timeout, posts its own wait-for edge (itself -> the
// first peer it waits for) as its notice, then collects the others' edges for a short grace.
// Following the edges from the ranks this one waits for ends at a rank that posted none: it is
// not waiting for anybody in this operation (stopped, hung, or calling something else), so it
// holds everyone up. Every rank finds the same end, so every message names the same rank.
Error Communicator::resolve_timeout(const Error& error, const std::string& label) {
  const int first_pending = !pending_now_.empty() ? pending_now_.front() : error.culprit();
  if (first_pending < 0 || nranks_ < 3) return error;  // two ranks: the peer is the culprit
  transport::FailureNotice edge;
  edge.code = cclTimeout;
  edge.origin = rank_;
  edge.culprit = first_pending;
  notify_peers(edge);
  std::map<int, int> waits_for;  // rank -> the rank it waits for
  waits_for[rank_] = first_pending;
  const auto grace = std::clamp(options_.timeout / 10, std::chrono::milliseconds(200),
                                std::chrono::milliseconds(1000));
  const Deadline until = Deadline::after(grace);
  std::vector<std::pair<int, transport::FailureNotice>> notices;
  int culprit = -1;
  for (;;) {
    notices.clear();
    for (auto& t : transports_) t->collect_notices(notices);
    for (const auto& [from, notice] : notices) {
      if (notice.code == cclTimeout && notice.origin == from && notice.culprit >= 0) {
        waits_for[from] = notice.culprit;
      }
    }
    // Follow the edges from our own; a cycle means ranks wait on each other (nobody is the end).
    std::set<int> seen{rank_};
    int at = first_pending;
    while (waits_for.count(at) && seen.insert(at).second) at = waits_for[at];
    culprit = seen.count(at) ? -1 : at;
    if (until.expired()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (culprit < 0) {
    return Error(cclTimeout,
                 label + ": timed out waiting for rank " + std::to_string(first_pending) +
                     "; the ranks wait on each other (did they call different collectives?)",
                 first_pending);
  }
  std::string chain;
  for (int at = first_pending; at != culprit; at = waits_for[at]) {
    chain += std::to_string(at) + " -> ";
  }
  std::string message = label + ": timed out waiting for rank " + std::to_string(culprit);
  if (culprit != first_pending) {
    message += " (this rank waits for " + chain + std::to_string(culprit) +
               ", which waits for no one: it holds everyone up)";
  }
  return Error(cclTimeout, message, culprit);
}

}  // namespace ccl
