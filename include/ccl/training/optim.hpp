/**
 * @file training/optim.hpp
 * @brief Optimizers (SGD, Adam/AdamW, and the large-batch LAMB and LARS) on float32 parameters
 * held by the caller, whole or sharded over a group (ZeRO), and learning-rate schedules (linear
 * scaling with linear warm-up, polynomial decay).
 *
 * Part of the training layer (`#include <ccl/training.hpp>`, in libccl). The
 * optimizers keep their state (moments, momentum) per parameter pointer: pass the same
 * ParamRef list (the same `param` pointers and counts) at every step.
 */
#ifndef CCL_TRAINING_OPTIM_HPP_
#define CCL_TRAINING_OPTIM_HPP_

#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "../ccl.hpp"

namespace ccl::training {

/// One parameter tensor and its gradient, `count` floats each. `exclude`: a bias or a
/// normalization parameter, left out of weight decay and of the layer-wise adaptation.
/// `tensor`: for Optimizer::step_sharded, the index of the whole tensor this piece is part of
/// (step() ignores it: each ref there is a whole tensor).
struct ParamRef {
  float* param;
  const float* grad;
  size_t count;
  bool exclude = false;
  size_t tensor = 0;
};

/**
 * The optimizers' common interface, for callers that hold any of them (ZeRO's engine).
 *
 * State (moments, momentum buffers, and each piece's own step count) is kept per `param`
 * pointer, created zeroed the first time a pointer with count > 0 is stepped; a pointer's count
 * may not change. A step checks every argument before it changes anything: on
 * std::invalid_argument the optimizer is as it was.
 *
 * Sharded steps (ZeRO): each rank of a group holds a contiguous slice of a flat buffer of
 * tensors, so a tensor may be split between ranks and a rank may hold pieces of several tensors,
 * or none. Every rank calls `step_sharded` with its pieces, each naming its whole tensor by
 * `ParamRef::tensor` (numbered alike on every rank, below `tensors`). LAMB and LARS, whose
 * updates scale by norms of whole tensors, sum the pieces' squares per tensor (in double) and
 * add those up over the group with one all-reduce per step; SGD and Adam are element-wise and do
 * not communicate. The result is the unsharded step's, up to the order of the norms' additions.
 *
 * Example (ZeRO: this rank's slice holds the end of tensor 0 and the start of tensor 1):
 * @code
 * ccl::training::Adam adam({.lr = 1e-3, .weight_decay = 0.01, .decoupled = true});
 * std::vector<ccl::training::ParamRef> pieces = {
 *     {.param = x0, .grad = g0, .count = n0, .tensor = 0},
 *     {.param = x1, .grad = g1, .count = n1, .tensor = 1}};
 * adam.step_sharded(pieces, 2, dp);  // on every rank of dp
 * std::vector<char> blob = adam.save_state(pieces);  // this rank's share of a checkpoint
 * @endcode
 */
class Optimizer {
 public:
  virtual ~Optimizer() = default;

  /// One step over whole tensors (each ref its own tensor; `tensor` is ignored).
  void step(std::span<const ParamRef> params);

  /**
   * One step over this rank's `pieces` of `tensors` tensors sharded over `group`'s ranks.
   * Collective: every rank of `group` calls it (with no pieces too) with the same `tensors`.
   * LAMB and LARS all-reduce `tensors` pairs of doubles (cclSum) on `group`, blocking; SGD and
   * Adam do not use `group`. Throws std::invalid_argument, before any communication, for a piece
   * whose `tensor` is not below `tensors` and as step() does; a rank that throws leaves the
   * others' all-reduce to fail by the communicator's timeout. A ccl::Error of the all-reduce
   * leaves the step half done (LAMB's moments advanced, no parameter changed): restore a
   * checkpoint.
   */
  void step_sharded(std::span<const ParamRef> pieces, size_t tensors, Communicator& group);

  /// The learning rate of the next step (a schedule sets it before each step). Throws
  /// std::invalid_argument for lr < 0 or NaN and keeps the old rate.
  virtual void set_lr(double lr);
  double lr() const { return lr_; }
  /// Steps taken so far.
  int64_t steps() const { return step_; }
  /// Bytes of state held: the moments or momentum buffers of every parameter seen.
  size_t state_bytes() const;

  /**
   * The step count and the state of exactly `refs`, in order, as a self-describing blob (a
   * magic word, a version, the optimizer's kind; host byte order): a ref whose pointer has no
   * state yet is saved as absent. For a rank's share of a checkpoint: `load_state` with the same
   * refs (the same counts, at any addresses) restores it. Throws std::invalid_argument for a
   * ref whose count differs from its state's.
   */
  std::vector<char> save_state(std::span<const ParamRef> refs) const;
  /// Restores what save_state wrote for refs of the same counts, and the step count; a ref saved
  /// absent loses its state here. Throws std::invalid_argument naming what does not fit (not a
  /// blob, its version, the kind, the count of refs, a ref's count or buffers), before changing
  /// anything.
  void load_state(std::span<const ParamRef> refs, std::span<const char> bytes);

 protected:
  /// One piece's state: `buffers()` arrays of `count` floats, one after the other in `data`.
  struct PieceState {
    size_t count = 0;
    int64_t steps = 0;  ///< steps this piece took (Adam's bias correction, SGD's first step)
    std::vector<float> data;
    float* buffer(size_t i) { return data.data() + i * count; }
  };

  /// `prefix` starts every message ("ccl::training::Lamb: "); `kind` names the optimizer in
  /// saved state ("lamb"). Both are string literals.
  Optimizer(const char* prefix, const char* kind, double lr);
  Optimizer(const Optimizer&) = default;
  Optimizer(Optimizer&&) = default;
  Optimizer& operator=(const Optimizer&) = default;
  Optimizer& operator=(Optimizer&&) = default;

  /// What `apply` returned for each piece of the last step, in the order they were passed (1
  /// for an empty piece).
  const std::vector<double>& ratios() const { return ratios_; }

 private:
  /// Float arrays of state per element (LAMB and Adam 2, LARS 1, SGD 1 with momentum, else 0).
  virtual size_t buffers() const = 0;
  /// Doubles per tensor that the step sums over the tensor's pieces (LAMB, LARS: 2).
  virtual size_t sums_per_tensor() const { return 0; }
  /// First pass over a piece (count > 0), when sums_per_tensor() > 0: adds the piece's share to
  /// `sums` (its tensor's sums_per_tensor() doubles). LAMB also advances its moments here.
  virtual void measure(const ParamRef& piece, PieceState& state, double* sums);
  /// Second pass: updates the piece (count > 0) given its whole tensor's `sums` (summed over the
  /// group); returns its ratio (LAMB's trust ratio, LARS's local learning rate, else 1).
  virtual double apply(const ParamRef& piece, PieceState& state, const double* sums) = 0;

  void run(std::span<const ParamRef> pieces, size_t tensors, bool sharded, Communicator* group);

  const char* prefix_;
  const char* kind_;
  double lr_;
  int64_t step_ = 0;
  std::unordered_map<const float*, PieceState> state_;
  std::vector<double> ratios_;
};

/// SGD's hyper-parameters, as torch.optim.SGD's.
struct SgdOptions {
  double lr = 0.01, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
};

/**
 * SGD with momentum, as torch.optim.SGD (1.13) in float32. Per parameter: d = g + λ·x; with
 * momentum μ > 0, b = d at the parameter's first step, then b = μ·b + (1 − dampening)·d, and
 * d = d + μ·b (nesterov) or d = b; x −= lr·d. An excluded parameter takes λ = 0.
 * Throws std::invalid_argument naming the option: lr < 0, momentum < 0, dampening outside
 * [0, 1], weight_decay < 0, nesterov with momentum 0 or dampening ≠ 0 (NaN fails every check).
 */
class Sgd : public Optimizer {
 public:
  explicit Sgd(SgdOptions);

 private:
  size_t buffers() const override;
  double apply(const ParamRef&, PieceState&, const double*) override;
  SgdOptions options_;  // its lr is the constructor's; lr() is the current one
};

/// Adam's hyper-parameters, as torch.optim.Adam's; `decoupled`: AdamW's weight decay.
struct AdamOptions {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool decoupled = false;
};

/**
 * Adam (Kingma & Ba) and AdamW (Loshchilov & Hutter), as torch.optim.Adam / AdamW (1.13,
 * without amsgrad) in float32. Per parameter at its own step t (from 1, as torch counts):
 * Adam: g' = g + λ·x; AdamW: x = x·(1 − lr·λ), g' = g. Then m = β1·m + (1−β1)·g',
 * v = β2·v + (1−β2)·g'², x −= lr/(1−β1^t) · m/(√v/√(1−β2^t) + ε). An excluded parameter
 * takes λ = 0. Throws std::invalid_argument naming the option: lr < 0, β outside [0, 1),
 * eps < 0, weight_decay < 0.
 */
class Adam : public Optimizer {
 public:
  explicit Adam(AdamOptions);

 private:
  size_t buffers() const override { return 2; }
  double apply(const ParamRef&, PieceState&, const double*) override;
  AdamOptions options_;  // its lr is the constructor's; lr() is the current one
};

/// LAMB's hyper-parameters (You et al., "Large Batch Optimization for Deep Learning", 2019).
struct LambOptions {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-6, weight_decay = 0.01, clamp = 10.0;
};

/**
 * LAMB. Per parameter, at step t (from 1; the optimizer's step count, as in the paper):
 * m = β1·m + (1−β1)·g, v = β2·v + (1−β2)·g²,
 * m̂ = m/(1−β1^t), v̂ = v/(1−β2^t), u = m̂/(√v̂ + ε) + λ·x; trust ratio
 * r = min(‖x‖, clamp)/‖u‖, or 1 when either norm is 0; x −= lr·r·u. An excluded parameter takes
 * λ = 0 and r = 1. Norms are over the whole parameter tensor (over its pieces on every rank,
 * sharded), accumulated in double.
 * Throws std::invalid_argument for a null pointer, a parameter whose count changed between
 * steps, or options out of range (lr < 0, β outside [0, 1), ε ≤ 0, weight_decay < 0, clamp ≤ 0).
 */
class Lamb : public Optimizer {
 public:
  explicit Lamb(LambOptions);

  /// The trust ratio each parameter (piece) of the last step used, in the order they were
  /// passed.
  const std::vector<double>& last_trust_ratios() const { return ratios(); }

 private:
  size_t buffers() const override { return 2; }
  size_t sums_per_tensor() const override { return 2; }
  void measure(const ParamRef&, PieceState&, double*) override;
  double apply(const ParamRef&, PieceState&, const double*) override;
  LambOptions options_;  // its lr is the constructor's; lr() is the current one
};

/// LARS's hyper-parameters (You, Gitman, Ginsburg, "Large Batch Training of Convolutional
/// Networks", 2017).
struct LarsOptions {
  double lr = 0.1, momentum = 0.9, weight_decay = 1e-4, trust_coefficient = 0.001, eps = 0.0;
};

/**
 * LARS with momentum. Per parameter: local_lr = η·‖x‖/(‖g‖ + λ·‖x‖ + ε) (η the trust
 * coefficient, λ the weight decay), or 1 when ‖x‖ or ‖g‖ is 0; v = μ·v + lr·local_lr·(g + λ·x);
 * x −= v. An excluded parameter takes λ = 0 and local_lr = 1 (plain momentum SGD). Norms are
 * over the whole tensor (over its pieces on every rank, sharded), accumulated in double.
 * Throws std::invalid_argument as Lamb does (lr < 0, momentum outside [0, 1), weight_decay < 0,
 * trust_coefficient ≤ 0, eps < 0).
 */
class Lars : public Optimizer {
 public:
  explicit Lars(LarsOptions);

  /// The local learning rate (trust ratio) each parameter (piece) of the last step used.
  const std::vector<double>& last_trust_ratios() const { return ratios(); }

 private:
  size_t buffers() const override { return 1; }
  size_t sums_per_tensor() const override { return 2; }
  void measure(const ParamRef&, PieceState&, double*) override;
  double apply(const ParamRef&, PieceState&, const double*) override;
  LarsOptions options_;  // its lr is the constructor's; lr() is the current one
};

/// Goyal et al.'s linear scaling rule: the learning rate for `batch` samples per step when
/// `base_lr` suits `base_batch` (base_lr · batch / base_batch). Throws for base_batch == 0.
double linear_scaled_lr(double base_lr, size_t batch, size_t base_batch);

/**
 * A learning-rate schedule: linear warm-up from `peak_lr / warmup_steps` to `peak_lr` over the
 * first `warmup_steps` steps (Goyal et al.; step s < warmup_steps gets peak_lr·(s+1)/warmup_steps),
 * then polynomial decay to `end_lr` at `total_steps`:
 * (peak_lr − end_lr)·(1 − (s − warmup_steps)/(total_steps − warmup_steps))^power + end_lr,
 * and end_lr from total_steps on. Steps count from 0.
 */
struct WarmupPolyDecay {
  double peak_lr;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  double power = 1.0;
  double end_lr = 0.0;
  /// The learning rate of step `step`; throws std::invalid_argument when total_steps <
  /// warmup_steps, warmup_steps < 0, or power < 0.
  double operator()(int64_t step) const;
};

}  // namespace ccl::training

#endif  // CCL_TRAINING_OPTIM_HPP_
