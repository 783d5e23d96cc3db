/**
 * @file training/pipeline.hpp
 * @brief Pipeline-parallel schedules as data (GPipe, 1F1B, interleaved 1F1B), their bubbles, and
 * a runner that executes a schedule with cclSend/cclRecv in groups.
 *
 * Part of the training layer (`#include <ccl/training.hpp>`, in libccl).
 *
 * Model: `stages` ranks, each holding `virtual_stages` chunks of the model (1 but for
 * Interleaved). Chunk c of rank s is virtual stage c·stages + s (Megatron-LM's layout): a
 * micro-batch goes forward through virtual stages 0, 1, …, stages·virtual_stages − 1 and back.
 */
#ifndef CCL_TRAINING_PIPELINE_HPP_
#define CCL_TRAINING_PIPELINE_HPP_

#include <cstddef>
#include <functional>
#include <span>
#include <vector>

#include "../ccl.hpp"

namespace ccl::training {

enum class PipelineKind { GPipe, OneFOneB, Interleaved };

/// One step of a stage's schedule: the forward or backward pass of `microbatch` through this
/// rank's model chunk `chunk` (always 0 but for Interleaved).
struct PipelineAction {
  enum Kind { Forward, Backward } kind;
  int microbatch;
  int chunk;
};

/**
 * The ordered actions of rank `stage` of `stages`:
 * - GPipe: every forward (micro-batches 0…m−1), then every backward (0…m−1).
 * - OneFOneB: warm-up of min(stages − stage − 1, microbatches) forwards, then one forward and
 *   one backward alternately, then the remaining backwards.
 * - Interleaved: Megatron-LM's interleaved 1F1B with `virtual_stages` chunks per rank (it needs
 *   microbatches to be a multiple of stages).
 * `virtual_stages` must be 1 for GPipe and OneFOneB. Throws std::invalid_argument for stages < 1,
 * microbatches < 1, stage outside [0, stages), virtual_stages < 1, or the cases above.
 */
std::vector<PipelineAction> pipeline_schedule(PipelineKind, int stages, int microbatches, int stage,
                                              int virtual_stages = 1);

/// Times of one micro-batch through one whole stage (a chunk takes 1/virtual_stages of them).
struct PipelineTiming {
  double forward = 1.0;
  double backward = 2.0;
};

/**
 * The bubble of a schedule, by simulation: every rank runs its pipeline_schedule in order, an
 * action starting once the rank is free and its input exists (a forward needs the same
 * micro-batch's forward on the previous virtual stage, a backward the backward on the next one);
 * communication takes no time. Returns (makespan − ideal)/ideal, ideal = microbatches ·
 * (forward + backward): the idle fraction of the ideal time.
 */
double pipeline_bubble(PipelineKind, int stages, int microbatches, int virtual_stages = 1,
                       PipelineTiming timing = {});

/// The closed forms: (stages − 1)/microbatches for GPipe and 1F1B, (stages − 1)/(virtual_stages ·
/// microbatches) for Interleaved.
double pipeline_bubble_closed_form(PipelineKind, int stages, int microbatches,
                                   int virtual_stages = 1);

/**
 * What a rank computes, for the runner. Every boundary between virtual stages carries
 * `activation_count` floats per micro-batch forward (activations) and the same backward (their
 * gradients).
 * - forward(chunk, microbatch, input, output): input is empty on virtual stage 0 (the stage reads
 *   its own data), output is empty on the last virtual stage (it computes the loss).
 * - backward(chunk, microbatch, output_grad, input_grad): output_grad is empty on the last
 *   virtual stage (the loss's gradient is the stage's own), input_grad is empty on virtual
 *   stage 0.
 * The functions keep what their backward needs (activations per micro-batch) themselves.
 */
struct PipelineStage {
  size_t activation_count = 0;
  std::function<void(int chunk, int microbatch, std::span<const float> input,
                     std::span<float> output)>
      forward;
  std::function<void(int chunk, int microbatch, std::span<const float> output_grad,
                     std::span<float> input_grad)>
      backward;
};

/**
 * Runs this rank's schedule (stage = comm.rank(), stages = comm.size()) once: one training
 * iteration over `microbatches` micro-batches. Activations go to the next virtual stage and
 * gradients to the previous one with comm.send/recv; the sends of one step and the receives of
 * the next are posted as one ccl group, so neighbouring ranks cannot wait on each other in a
 * cycle. A step is one action, or, in the interleaved steady state, a forward and the backward
 * after it (as Megatron-LM's send_forward_backward_recv_forward_backward): with one action a
 * step, interleaved ranks would each send what the other receives only in its next group. Every
 * wait is bounded by the communicator's timeout (a failure throws ccl::Error). Throws
 * std::invalid_argument as pipeline_schedule does, or when a function of `stage` is empty.
 */
void run_pipeline(ccl::Communicator& comm, PipelineKind kind, int microbatches,
                  const PipelineStage& stage, int virtual_stages = 1);

}  // namespace ccl::training

#endif  // CCL_TRAINING_PIPELINE_HPP_
