// The action lists of GPipe, 1F1B and Megatron-LM's interleaved 1F1B: which forward and backward
// passes a pipeline rank runs, in which order. The runner and the bubble simulation both walk
// these lists, so the schedule is defined here once.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "ccl/training/pipeline.hpp"

namespace ccl::training {

namespace {

[[noreturn]] void bad_argument(const std::string& what) {
  throw std::invalid_argument("ccl::training::pipeline_schedule: " + what);
}

void check_arguments(PipelineKind kind, int stages, int microbatches, int stage,
                     int virtual_stages) {
  if (stages < 1) bad_argument("stages " + std::to_string(stages) + " must be at least 1");
  if (microbatches < 1) {
    bad_argument("microbatches " + std::to_string(microbatches) + " must be at least 1");
  }
  if (stage < 0 || stage >= stages) {
    bad_argument("stage " + std::to_string(stage) + " is outside [0, " + std::to_string(stages) +
                 ")");
  }
  if (virtual_stages < 1) {
    bad_argument("virtual_stages " + std::to_string(virtual_stages) + " must be at least 1");
  }
  switch (kind) {
    case PipelineKind::GPipe:
    case PipelineKind::OneFOneB:
      if (virtual_stages != 1) {
        bad_argument("virtual_stages " + std::to_string(virtual_stages) +
                     " must be 1 but for PipelineKind::Interleaved");
      }
      return;
    case PipelineKind::Interleaved:
      // Each group of `stages` micro-batches goes through one chunk before the next chunk
      // starts; a partial group would leave a rank waiting on a micro-batch that never comes.
      if (microbatches % stages != 0) {
        bad_argument("microbatches " + std::to_string(microbatches) +
                     " must be a multiple of stages " + std::to_string(stages) +
                     " for PipelineKind::Interleaved");
      }
      return;
  }
  bad_argument("kind " + std::to_string(static_cast<int>(kind)) + " is not a PipelineKind");
}

std::vector<PipelineAction> gpipe(int microbatches) {
  std::vector<PipelineAction> actions;
  for (int mb = 0; mb < microbatches; ++mb) actions.push_back({PipelineAction::Forward, mb, 0});
  for (int mb = 0; mb < microbatches; ++mb) actions.push_back({PipelineAction::Backward, mb, 0});
  return actions;
}

std::vector<PipelineAction> one_f_one_b(int stages, int microbatches, int stage) {
  // Stage s starts its first backward once the micro-batch has gone through the p - s - 1 stages
  // after it; until then it fills the pipeline with forwards, and afterwards it never holds more
  // than p - s micro-batches' activations.
  const int warmup = std::min(stages - stage - 1, microbatches);
  std::vector<PipelineAction> actions;
  int forward = 0;
  int backward = 0;
  for (; forward < warmup; ++forward) actions.push_back({PipelineAction::Forward, forward, 0});
  for (; forward < microbatches; ++forward, ++backward) {
    actions.push_back({PipelineAction::Forward, forward, 0});
    actions.push_back({PipelineAction::Backward, backward, 0});
  }
  for (; backward < microbatches; ++backward) {
    actions.push_back({PipelineAction::Backward, backward, 0});
  }
  return actions;
}

// Megatron-LM's forward_backward_pipelining_with_interleaving. The k-th forward of a rank is
// "virtual micro-batch" k of microbatches * virtual_stages: they come in groups of `stages`
// micro-batches per chunk, chunk 0 first; backwards walk the chunks in reverse.
std::vector<PipelineAction> interleaved(int stages, int microbatches, int stage,
                                        int virtual_stages) {
  const int total = microbatches * virtual_stages;
  const int round = stages * virtual_stages;  // virtual micro-batches per group of micro-batches
  auto microbatch = [&](int k) { return (k / round) * stages + k % stages; };
  auto forward_chunk = [&](int k) { return (k % round) / stages; };
  auto backward_chunk = [&](int k) { return virtual_stages - 1 - forward_chunk(k); };

  // With as many micro-batches as stages there is no steady state to speak of: Megatron runs
  // every forward, then every backward.
  int warmup = total;
  if (microbatches != stages) {
    warmup = std::min((stages - stage - 1) * 2 + (virtual_stages - 1) * stages, total);
  }
  std::vector<PipelineAction> actions;
  actions.reserve(static_cast<size_t>(2 * total));
  int forward = 0;
  int backward = 0;
  for (; forward < warmup; ++forward) {
    actions.push_back({PipelineAction::Forward, microbatch(forward), forward_chunk(forward)});
  }
  for (; forward < total; ++forward, ++backward) {
    actions.push_back({PipelineAction::Forward, microbatch(forward), forward_chunk(forward)});
    actions.push_back({PipelineAction::Backward, microbatch(backward), backward_chunk(backward)});
  }
  for (; backward < total; ++backward) {
    actions.push_back({PipelineAction::Backward, microbatch(backward), backward_chunk(backward)});
  }
  return actions;
}

}  // namespace

std::vector<PipelineAction> pipeline_schedule(PipelineKind kind, int stages, int microbatches,
                                              int stage, int virtual_stages) {
  check_arguments(kind, stages, microbatches, stage, virtual_stages);
  switch (kind) {
    case PipelineKind::GPipe:
      return gpipe(microbatches);
    case PipelineKind::OneFOneB:
      return one_f_one_b(stages, microbatches, stage);
    case PipelineKind::Interleaved:
      return interleaved(stages, microbatches, stage, virtual_stages);
  }
  return {};  // unreachable: check_arguments rejects any other kind
}

}  // namespace ccl::training
