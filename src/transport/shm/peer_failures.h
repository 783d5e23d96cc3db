// The failure lines (shm_layout.h) of a rank's peers, as the shm transport and its window read
// them while they wait: a peer that posted a failure notice fails the waiter at once.
#pragma once

#include <utility>
#include <vector>

#include "transport/shm/shm_layout.h"

namespace ccl::transport::shm {

class PeerFailures {
 public:
  void add(int rank, const FailureLine* line) { lines_.emplace_back(rank, line); }

  // seq_cst loads: in a sleeper's ready() check they are S3 of doorbell.h, so a notice posted
  // (and rung) while it goes to sleep is not slept through.
  bool any() const {
    for (const auto& [rank, line] : lines_) {
      if (line->state.load(std::memory_order_seq_cst) == FailureLine::kFailed) return true;
    }
    return false;
  }
  // Throws the first posted notice as this rank's error (failure_notice.h).
  void throw_if_any() const {
    for (const auto& [rank, line] : lines_) {
      if (line->state.load(std::memory_order_seq_cst) == FailureLine::kFailed) {
        throw_notice(line->notice, rank);
      }
    }
  }
  void collect(std::vector<std::pair<int, FailureNotice>>& out) const {
    for (const auto& [rank, line] : lines_) {
      if (line->state.load(std::memory_order_acquire) == FailureLine::kFailed) {
        out.emplace_back(rank, line->notice);
      }
    }
  }
  bool departed(int rank) const {
    for (const auto& [r, line] : lines_) {
      if (r == rank) return line->state.load(std::memory_order_acquire) == FailureLine::kDeparted;
    }
    return false;
  }

 private:
  std::vector<std::pair<int, const FailureLine*>> lines_;
};

}  // namespace ccl::transport::shm
