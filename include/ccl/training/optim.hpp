/**
 * @file training/optim.hpp
 * @brief Large-batch optimizers (LAMB, LARS) and learning-rate schedules (linear scaling with
 * linear warm-up, polynomial decay), on float32 parameters held by the caller.
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

namespace ccl::training {

/// LAMB's hyper-parameters (You et al., "Large Batch Optimization for Deep Learning", 2019).
struct LambOptions {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-6, weight_decay = 0.01, clamp = 10.0;
};

/// One parameter tensor and its gradient, `count` floats each. `exclude`: a bias or a
/// normalization parameter, left out of weight decay and of the layer-wise adaptation.
struct ParamRef {
  float* param;
  const float* grad;
  size_t count;
  bool exclude = false;
};

/**
 * LAMB. Per parameter, at step t (from 1): m = β1·m + (1−β1)·g, v = β2·v + (1−β2)·g²,
 * m̂ = m/(1−β1^t), v̂ = v/(1−β2^t), u = m̂/(√v̂ + ε) + λ·x; trust ratio
 * r = min(‖x‖, clamp)/‖u‖, or 1 when either norm is 0; x −= lr·r·u. An excluded parameter takes
 * λ = 0 and r = 1. Norms are over the whole parameter tensor, accumulated in double.
 * Throws std::invalid_argument for a null pointer, a parameter whose count changed between
 * steps, or options out of range (lr < 0, β outside [0, 1), ε ≤ 0, weight_decay < 0, clamp ≤ 0).
 */
class Lamb {
 public:
  explicit Lamb(LambOptions);
  void step(std::span<const ParamRef>);

  /// The learning rate of the next step (a schedule sets it before each step).
  void set_lr(double lr);
  double lr() const { return options_.lr; }
  /// Steps taken so far.
  int64_t steps() const { return step_; }
  /// The trust ratio each parameter of the last step used, in the order they were passed.
  const std::vector<double>& last_trust_ratios() const { return last_ratios_; }

 private:
  struct Moments {
    std::vector<float> m, v;
  };
  LambOptions options_;
  int64_t step_ = 0;
  std::unordered_map<const float*, Moments> state_;
  std::vector<double> last_ratios_;
};

/// LARS's hyper-parameters (You, Gitman, Ginsburg, "Large Batch Training of Convolutional
/// Networks", 2017).
struct LarsOptions {
  double lr = 0.1, momentum = 0.9, weight_decay = 1e-4, trust_coefficient = 0.001, eps = 0.0;
};

/**
 * LARS with momentum. Per parameter: local_lr = η·‖x‖/(‖g‖ + λ·‖x‖ + ε) (η the trust
 * coefficient, λ the weight decay), or 1 when ‖x‖ or ‖g‖ is 0; v = μ·v + lr·local_lr·(g + λ·x);
 * x −= v. An excluded parameter takes λ = 0 and local_lr = 1 (plain momentum SGD).
 * Throws std::invalid_argument as Lamb does (lr < 0, momentum outside [0, 1), weight_decay < 0,
 * trust_coefficient ≤ 0, eps < 0).
 */
class Lars {
 public:
  explicit Lars(LarsOptions);
  void step(std::span<const ParamRef>);

  void set_lr(double lr);
  double lr() const { return options_.lr; }
  int64_t steps() const { return step_; }
  /// The local learning rate (trust ratio) each parameter of the last step used.
  const std::vector<double>& last_trust_ratios() const { return last_ratios_; }

 private:
  LarsOptions options_;
  int64_t step_ = 0;
  std::unordered_map<const float*, std::vector<float>> momentum_;
  std::vector<double> last_ratios_;
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
