// One ZeRO unit's buffers on one rank (zero.cc runs them, checkpoint.cc saves and loads them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ccl/training/zero.hpp"

namespace ccl::training {

struct Zero::UnitState {
  std::vector<float> working;        // the whole unit (padded); stage 3: while gathered
  std::vector<uint16_t> wire;        // 16-bit precisions: the all-gather's buffer, in flight
  std::vector<float> master;         // this rank's slice, unless it is the working copy's
  std::vector<float> grad;           // the whole gradient: stage 1 always, else until reduced
  std::vector<uint16_t> grad_wire;   // 16-bit precisions: the whole gradient on the wire
  std::vector<uint16_t> shard_wire;  // ... and the reduced slice
  std::vector<float> grad_shard;     // this rank's slice of the averaged gradient
  std::vector<bool> marked;          // by parameter of the unit, this iteration
  size_t pending = 0;                // parameters not yet marked this iteration
  bool gathering = false;            // an all-gather queued, not yet waited for
  bool reducing = false;             // a reduce-scatter queued, not yet finished
  Event gathered;
  Event reduced;

  /// This rank's slice of the averaged gradient: its own vector (stage 2 and 3, where the whole
  /// gradient goes once reduced), or (stage 1) the whole gradient's slice at `offset`, which the
  /// reduce-scatter fills in place.
  float* grad_slice(size_t offset) {
    return grad_shard.empty() ? grad.data() + offset : grad_shard.data();
  }

  /// This rank's float32 master slice: its own vector, or (float32 stages 1 and 2) the working
  /// copy's slice at `offset` = rank · shard.
  float* master_slice(size_t offset) {
    return master.empty() ? working.data() + offset : master.data();
  }
  const float* master_slice(size_t offset) const {
    return master.empty() ? working.data() + offset : master.data();
  }
};

}  // namespace ccl::training
