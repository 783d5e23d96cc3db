// The failure lines (shm_layout.h) of a rank's peers, as the shm transport and its window read
// them while they wait: a peer that posted a failure notice fails the waiter at once.
#pragma once

#include <utility>
#include <vector>

#include "base/error.h"
#include "transport/shm/shm_layout.h"

namespace ccl::transport::shm {

class PeerFailures {
 public:
  void add(int rank, const FailureLine* line) { lines_.emplace_back(rank, line); }

  // seq_cst loads: in a sleeper's ready() check they are S3 of doorbell.h, so a notice posted
  // (and rung) while it goes to sleep is not slept through.
  bool any() const {
    return first_failing([](int) { return true; }) != nullptr;
  }
  // Throws the first posted notice as this rank's error (failure_notice.h).
  void throw_if_any() const {
    throw_first(first_failing([](int) { return true; }));
  }

  // The same, for a wait inside an operation: a peer's failure fails it, but a peer's abort only
  // when `awaited(rank)` says the wait needs that peer. A rank that aborts a healthy idle
  // communicator must not fail a peer still finishing the last operation with others (a 4-rank
  // barrier it has left while rank 1 waits for rank 3); a peer that needs it learns of the abort
  // in the wait that needs it, an idle one in check_health.
  template <class Awaited>
  bool any(Awaited awaited) const {
    return first_failing(awaited) != nullptr;
  }
  template <class Awaited>
  void throw_if_any(Awaited awaited) const {
    throw_first(first_failing(awaited));
  }

  void collect(std::vector<std::pair<int, FailureNotice>>& out) const {
    for (const auto& [rank, line] : lines_) {
      if (line->state.load(std::memory_order_acquire) == FailureLine::kFailed) {
        out.emplace_back(rank, line->notice);
      }
    }
  }
  // A peer that destroyed (or, idle and healthy, aborted) its communicator while this rank
  // still waits for it: it will never send or take what is pending.
  [[noreturn]] static void throw_departed(int rank) {
    throw_peer_error(cclRemoteError, rank,
                     "rank %d left the communicator (destroyed or aborted it) while this rank "
                     "still waits for it",
                     rank);
  }
  bool departed(int rank) const {
    for (const auto& [r, line] : lines_) {
      if (r == rank) return line->state.load(std::memory_order_acquire) == FailureLine::kDeparted;
    }
    return false;
  }

 private:
  template <class Awaited>
  const std::pair<int, const FailureLine*>* first_failing(Awaited awaited) const {
    for (const auto& entry : lines_) {
      const FailureLine* line = entry.second;
      if (line->state.load(std::memory_order_seq_cst) != FailureLine::kFailed) continue;
      if (line->notice.kind == FailureNotice::kAborted && !awaited(entry.first)) continue;
      return &entry;
    }
    return nullptr;
  }
  static void throw_first(const std::pair<int, const FailureLine*>* entry) {
    if (entry != nullptr) throw_notice(entry->second->notice, entry->first);
  }

  std::vector<std::pair<int, const FailureLine*>> lines_;
};

}  // namespace ccl::transport::shm
