#include "core/comm/planner.h"

#include "base/log.h"
#include "core/tuning/registry.h"

namespace ccl {

Planner::Planner(const CommOptions& options, const CommLayout& layout, size_t chunk_bytes)
    : options_(options), layout_(layout), chunk_bytes_(chunk_bytes) {}

void Planner::set_tuner(std::unique_ptr<tune::Tuner> tuner) {
  tuner_ = std::move(tuner);
  last_ = {};
}

tune::Choice Planner::plan(tune::Collective collective, size_t bytes) {
  LastChoice& last = last_[static_cast<size_t>(collective)];
  if (last.choice.entry == nullptr || last.bytes != bytes) {
    last.choice = tuner_->choose(collective, bytes);
    last.bytes = bytes;
  }
  const tune::Choice& choice = last.choice;
  if (choice.fallback) {
    // Once per collective: CCL_ALGO=tree says nothing about allgather, which has no tree.
    const uint32_t bit = 1u << static_cast<unsigned>(collective);
    if ((fallback_warned_.fetch_or(bit) & bit) == 0) {
      CCL_WARN(kTune, "%s", tuner_->choose_explained(collective, bytes).reason.c_str());
    }
  }
  // CCL_DEBUG=INFO: the choice and its reason in one line (COLL), the whole cost table under
  // CCL_DEBUG_SUBSYS=TUNE; once per (collective, size): a sweep logs each size once, a training
  // loop once in all.
  const bool line = log_enabled(LogLevel::Info, kColl), table = log_enabled(LogLevel::Info, kTune);
  if (!line && !table) return choice;
  {
    std::lock_guard<std::mutex> lock(tune_log_mutex_);
    if (tune_logged_.size() >= 1024) return choice;
    if (!tune_logged_.emplace(static_cast<int>(collective), bytes).second) return choice;
  }
  if (line) {
    CCL_INFO(kColl, "%s %zu B: %s", tune::collective_name(collective), bytes,
             tuner_->choose_explained(collective, bytes).reason.c_str());
  }
  if (table) {
    CCL_INFO(kTune, "%s %zu B:\n%s", tune::collective_name(collective), bytes,
             tuner_->cost_table(collective, bytes).c_str());
  }
  return choice;
}

const algo::Schedule& Planner::cached(const tune::Choice& choice, size_t count, int root,
                                      size_t elem_size) {
  const auto key = std::make_tuple(static_cast<int>(choice.entry->collective),
                                   static_cast<int>(choice.algorithm), choice.chunk_bytes, count,
                                   root, elem_size);
  auto it = schedules_.find(key);
  if (it != schedules_.end()) return it->second;
  if (schedules_.size() >= 256) schedules_.clear();  // bounded memory for sweeping sizes
  const tune::BuildArgs args{
      ring_params(count, elem_size, choice.chunk_bytes),
      schedule_params(count, elem_size, choice.chunk_bytes, layout_.tree_order), root,
      layout_.host_of_rank};
  return schedules_.emplace(key, choice.entry->build(args)).first->second;
}

algo::ScheduleParams Planner::schedule_params(size_t count, size_t elem_size, size_t chunk_bytes,
                                              std::span<const int> order) const {
  algo::ScheduleParams params;
  params.nranks = options_.nranks;
  params.rank = options_.rank;
  params.count = count;
  params.chunk_elems = chunk_bytes / elem_size;
  params.order = order;
  return params;
}

}  // namespace ccl
