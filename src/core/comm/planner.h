// The planner of a communicator: which algorithm, protocol and schedule an operation runs. It holds
// the tuner (made at init from the link figures, tuner_setup.h), asks it for each operation and
// logs the choice with its reason, and caches the schedules of the registry's entries
// (tuning/registry.h) per shape, built over the layout's ring and tree orders. It runs nothing:
// the op runner does, under op_mutex_, which also guards the cache.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <tuple>
#include <utility>

#include "algorithms/schedule.h"
#include "core/comm/options.h"
#include "core/comm/comm_layout.h"
#include "core/tuning/tuner.h"

namespace ccl {

class Planner {
 public:
  // `layout` is the peers' (filled when they connect); `chunk_bytes` from CCL_CHUNKSIZE.
  Planner(const CommOptions& options, const CommLayout& layout, size_t chunk_bytes);

  void set_tuner(std::unique_ptr<tune::Tuner> tuner);  // at init, by TunerSetup
  const tune::Tuner& tuner() const { return *tuner_; }
  // The chunk size of schedules without a tuned one: a multiple of 64 bytes.
  size_t chunk_bytes() const { return chunk_bytes_; }

  // The tuner's choice for one operation, logged with its cost table under TUNE (once per
  // collective and size) and with a warning when CCL_ALGO/CCL_PROTO allowed nothing. The last
  // choice of each collective is kept: a loop of one size asks the tuner once (its ~15
  // predictions were 9% of an 8-byte allreduce's samples in stream mode, 2 ranks). The caller
  // holds op_mutex_.
  tune::Choice plan(tune::Collective collective, size_t bytes);
  // The schedule of `choice` (its registry entry's build, registry.h) for `count` elements of
  // `elem_size` bytes (root: broadcast and reduce), cached per shape. The caller holds op_mutex_.
  const algo::Schedule& cached(const tune::Choice& choice, size_t count, int root,
                               size_t elem_size);
  // A builder's parameters for `count` elements of `elem_size` bytes, in chunks of `chunk_bytes`
  // (0: none), over positions in `order`
  // `order`: the layout's ring or tree order.
  algo::ScheduleParams ring_params(size_t count, size_t elem_size, size_t chunk_bytes) const {
    return schedule_params(count, elem_size, chunk_bytes, layout_.ring_order);
  }
  algo::ScheduleParams schedule_params(size_t count, size_t elem_size, size_t chunk_bytes,
                                       std::span<const int> order) const;

 private:
  const CommOptions& options_;
  const CommLayout& layout_;
  const size_t chunk_bytes_;
  std::unique_ptr<tune::Tuner> tuner_;
  struct LastChoice {
    size_t bytes = 0;
    tune::Choice choice;  // entry nullptr: none yet
  };
  std::array<LastChoice, tune::kNumCollectives> last_{};  // per collective, under op_mutex_
  std::mutex tune_log_mutex_;
  std::set<std::pair<int, size_t>> tune_logged_;  // (collective, bytes) whose choice was logged
  std::atomic<uint32_t> fallback_warned_{0};      // bit c: collective c's fallback was logged
  // (kind, algorithm, chunk bytes, count, root, element size) -> schedule
  std::map<std::tuple<int, int, size_t, size_t, int, size_t>, algo::Schedule> schedules_;
};

}  // namespace ccl
