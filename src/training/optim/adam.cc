// Adam and AdamW (optim.hpp), torch.optim.Adam / AdamW's single-tensor update (no amsgrad) in
// float32, operation for operation: Adam adds λ·x to the gradient (when λ ≠ 0), AdamW first
// scales x by 1 − lr·λ; then m = m·β1 + (1−β1)·g, v = v·β2 + (1−β2)·g·g,
// denom = √v / √(1−β2^t) + ε, x += −(lr/(1−β1^t))·(m/denom), the scalars computed in double and
// applied in float as torch does. t is the parameter's own step count, as torch keeps it.
// sources.cmake compiles this file with -fno-math-errno (the square root vectorizes then).
#include <cmath>

#include "ccl/training/optim.hpp"
#include "optim/param_checks.h"

namespace ccl::training {

namespace {

constexpr const char* kPrefix = "ccl::training::Adam: ";

using optim_detail::check_range;

void validate(const AdamOptions& o) {
  check_range(kPrefix, o.lr >= 0, "lr", o.lr, "lr >= 0");
  check_range(kPrefix, o.beta1 >= 0 && o.beta1 < 1, "beta1", o.beta1, "0 <= beta1 < 1");
  check_range(kPrefix, o.beta2 >= 0 && o.beta2 < 1, "beta2", o.beta2, "0 <= beta2 < 1");
  check_range(kPrefix, o.eps >= 0, "eps", o.eps, "eps >= 0");
  check_range(kPrefix, o.weight_decay >= 0, "weight_decay", o.weight_decay, "weight_decay >= 0");
}

struct Coefficients {
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
  float weight_decay;  // Adam: added to the gradient
  float shrink;        // AdamW: 1 − lr·λ
  float bias2_sqrt;    // √(1−β2^t)
  float eps;
  float step_size;  // lr/(1−β1^t)
};

enum class Decay { kNone, kCoupled, kDecoupled };

// Not inlined: GCC drops the __restrict of the arguments when it inlines. The arrays do not
// overlap (the moments are ours; a parameter and its gradient are distinct).
template <Decay kDecay>
[[gnu::noinline]] void adam_step(float* __restrict x, float* __restrict m, float* __restrict v,
                                 const float* __restrict g, size_t n, const Coefficients& c) {
  for (size_t i = 0; i < n; ++i) {
    float grad = g[i];
    if constexpr (kDecay == Decay::kCoupled) grad = grad + c.weight_decay * x[i];
    if constexpr (kDecay == Decay::kDecoupled) x[i] = x[i] * c.shrink;
    m[i] = m[i] * c.beta1 + c.one_minus_beta1 * grad;
    v[i] = v[i] * c.beta2 + c.one_minus_beta2 * grad * grad;
    const float denom = std::sqrt(v[i]) / c.bias2_sqrt + c.eps;
    x[i] = x[i] - c.step_size * (m[i] / denom);
  }
}

}  // namespace

Adam::Adam(AdamOptions options) : Optimizer(kPrefix, "adam", options.lr), options_(options) {
  validate(options_);
}

double Adam::apply(const ParamRef& p, PieceState& s, const double*) {
  const auto t = static_cast<double>(s.steps + 1);
  const double weight_decay = p.exclude ? 0.0 : options_.weight_decay;
  const Coefficients c{
      .beta1 = static_cast<float>(options_.beta1),
      .one_minus_beta1 = static_cast<float>(1 - options_.beta1),
      .beta2 = static_cast<float>(options_.beta2),
      .one_minus_beta2 = static_cast<float>(1 - options_.beta2),
      .weight_decay = static_cast<float>(weight_decay),
      .shrink = static_cast<float>(1 - lr() * weight_decay),
      .bias2_sqrt = static_cast<float>(std::sqrt(1 - std::pow(options_.beta2, t))),
      .eps = static_cast<float>(options_.eps),
      .step_size = static_cast<float>(lr() / (1 - std::pow(options_.beta1, t))),
  };
  if (options_.decoupled) {
    adam_step<Decay::kDecoupled>(p.param, s.buffer(0), s.buffer(1), p.grad, p.count, c);
  } else if (weight_decay != 0) {
    adam_step<Decay::kCoupled>(p.param, s.buffer(0), s.buffer(1), p.grad, p.count, c);
  } else {
    adam_step<Decay::kNone>(p.param, s.buffer(0), s.buffer(1), p.grad, p.count, c);
  }
  return 1.0;
}

}  // namespace ccl::training
