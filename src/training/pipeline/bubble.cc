// The bubble of a pipeline schedule: a discrete-event simulation of every rank's action list
// (communication free, each chunk taking its share of a stage's time), and the closed forms that
// the literature gives for it (GPipe, Megatron-LM's 1F1B and interleaved schedules).
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "ccl/training/pipeline.hpp"

namespace ccl::training {

namespace {

constexpr double kNotDone = -1.0;

void check_timing(const PipelineTiming& timing) {
  auto valid = [](double t) { return std::isfinite(t) && t >= 0.0; };
  if (!valid(timing.forward) || !valid(timing.backward) ||
      timing.forward + timing.backward <= 0.0) {
    throw std::invalid_argument("ccl::training::pipeline_bubble: timing forward " +
                                std::to_string(timing.forward) + " and backward " +
                                std::to_string(timing.backward) +
                                " must be finite, non-negative and not both zero");
  }
}

}  // namespace

double pipeline_bubble(PipelineKind kind, int stages, int microbatches, int virtual_stages,
                       PipelineTiming timing) {
  check_timing(timing);
  std::vector<std::vector<PipelineAction>> schedules;
  // Rank 0's schedule is made even for stages < 1, so that pipeline_schedule rejects the call.
  for (int rank = 0; rank < std::max(stages, 1); ++rank) {
    schedules.push_back(pipeline_schedule(kind, stages, microbatches, rank, virtual_stages));
  }
  const int last = stages * virtual_stages - 1;
  const double forward = timing.forward / virtual_stages;
  const double backward = timing.backward / virtual_stages;

  // End times of each pass of (virtual stage, micro-batch), kNotDone until simulated.
  const size_t passes = static_cast<size_t>(last + 1) * static_cast<size_t>(microbatches);
  std::vector<double> forward_end(passes, kNotDone);
  std::vector<double> backward_end(passes, kNotDone);
  auto at = [&](int vs, int mb) {
    return static_cast<size_t>(vs) * static_cast<size_t>(microbatches) + static_cast<size_t>(mb);
  };

  std::vector<size_t> next(schedules.size(), 0);  // each rank's next action
  std::vector<double> free(schedules.size(), 0.0);
  size_t remaining = 0;
  for (const auto& s : schedules) remaining += s.size();

  // An action's start depends only on its rank's previous action and its input, never on the
  // order ranks are visited in, so sweeping the ranks until none can advance gives the exact
  // event times; a sweep without progress means some input is never produced.
  while (remaining > 0) {
    bool progress = false;
    for (size_t rank = 0; rank < schedules.size(); ++rank) {
      const auto& actions = schedules[rank];
      while (next[rank] < actions.size()) {
        const PipelineAction& a = actions[next[rank]];
        const int vs = a.chunk * stages + static_cast<int>(rank);
        double ready = 0.0;
        if (a.kind == PipelineAction::Forward) {
          if (vs > 0 && (ready = forward_end[at(vs - 1, a.microbatch)]) == kNotDone) break;
        } else {
          // A backward needs its own forward's activations and the gradient from the next
          // virtual stage (the last one computes its gradient from the loss).
          const double own = forward_end[at(vs, a.microbatch)];
          if (own == kNotDone) break;
          ready = own;
          if (vs < last) {
            const double grad = backward_end[at(vs + 1, a.microbatch)];
            if (grad == kNotDone) break;
            ready = std::max(ready, grad);
          }
        }
        const double start = std::max(free[rank], ready);
        const bool is_forward = a.kind == PipelineAction::Forward;
        free[rank] = start + (is_forward ? forward : backward);
        (is_forward ? forward_end : backward_end)[at(vs, a.microbatch)] = free[rank];
        ++next[rank];
        --remaining;
        progress = true;
      }
    }
    if (!progress) {
      throw std::logic_error(
          "ccl::training::pipeline_bubble: the schedule deadlocks (an action waits for a pass "
          "that never runs)");
    }
  }
  const double makespan = *std::max_element(free.begin(), free.end());
  const double ideal = microbatches * (timing.forward + timing.backward);
  return (makespan - ideal) / ideal;
}

double pipeline_bubble_closed_form(PipelineKind kind, int stages, int microbatches,
                                   int virtual_stages) {
  (void)pipeline_schedule(kind, stages, microbatches, 0, virtual_stages);  // checks the arguments
  const double idle = stages - 1;
  if (kind == PipelineKind::Interleaved) {
    return idle / (static_cast<double>(virtual_stages) * microbatches);
  }
  return idle / microbatches;
}

}  // namespace ccl::training
