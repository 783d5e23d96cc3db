// LARS with momentum (optim.hpp). A parameter takes one pass for ‖x‖ and ‖g‖ (skipped when
// excluded: its local learning rate is 1) and one for the momentum and the parameter.
#include <cmath>
#include <optional>

#include "ccl/training/optim.hpp"
#include "optim/param_checks.h"

namespace ccl::training {

namespace {

constexpr const char* kPrefix = "ccl::training::Lars: ";

using optim_detail::check_range;

void validate(const LarsOptions& o) {
  check_range(kPrefix, o.lr >= 0, "lr", o.lr, "lr >= 0");
  check_range(kPrefix, o.momentum >= 0 && o.momentum < 1, "momentum", o.momentum,
              "0 <= momentum < 1");
  check_range(kPrefix, o.weight_decay >= 0, "weight_decay", o.weight_decay, "weight_decay >= 0");
  check_range(kPrefix, o.trust_coefficient > 0, "trust_coefficient", o.trust_coefficient,
              "trust_coefficient > 0");
  check_range(kPrefix, o.eps >= 0, "eps", o.eps, "eps >= 0");
}

// Independent partial sums, one per lane: a float-to-double reduction vectorizes only if its
// order may change, and the compiler may not reorder one accumulator (no -ffast-math here).
// Blocks of a fixed size also let GCC vectorize at -O2 (its "very cheap" cost model takes only
// loops of a known trip count).
constexpr size_t kLanes = 8;

struct Norms {
  double x2 = 0, g2 = 0;  // ‖x‖², ‖g‖²
};

// The kernels are not inlined: GCC drops the __restrict of the arguments when it inlines, and
// without them it does not vectorize. The arrays do not overlap (the momentum is ours; a
// parameter and its gradient are distinct).
[[gnu::noinline]] Norms squared_norms(const float* __restrict x, const float* __restrict g,
                                      size_t n) {
  double x2[kLanes] = {}, g2[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t lane = 0; lane < kLanes; ++lane) {
      x2[lane] += static_cast<double>(x[i + lane]) * x[i + lane];
      g2[lane] += static_cast<double>(g[i + lane]) * g[i + lane];
    }
  }
  for (; i < n; ++i) {
    x2[0] += static_cast<double>(x[i]) * x[i];
    g2[0] += static_cast<double>(g[i]) * g[i];
  }
  Norms norms;
  for (size_t lane = 0; lane < kLanes; ++lane) {
    norms.x2 += x2[lane];
    norms.g2 += g2[lane];
  }
  return norms;
}

// v = μ·v + scale·(g + λ·x); x −= v, with scale = lr·local_lr.
[[gnu::noinline]] void momentum_step(float* __restrict x, float* __restrict v,
                                     const float* __restrict g, size_t n, float momentum,
                                     float scale, float weight_decay) {
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t lane = 0; lane < kLanes; ++lane) {
      v[i + lane] = momentum * v[i + lane] + scale * (g[i + lane] + weight_decay * x[i + lane]);
      x[i + lane] -= v[i + lane];
    }
  }
  for (; i < n; ++i) {
    v[i] = momentum * v[i] + scale * (g[i] + weight_decay * x[i]);
    x[i] -= v[i];
  }
}

}  // namespace

Lars::Lars(LarsOptions options) : options_(options) { validate(options_); }

void Lars::set_lr(double lr) {
  LarsOptions next = options_;
  next.lr = lr;
  validate(next);
  options_ = next;
}

void Lars::step(std::span<const ParamRef> params) {
  // Everything is checked before anything changes, so a throw leaves the optimizer as it was.
  optim_detail::check_params(kPrefix, params, momentum_,
                             [](const std::vector<float>& v) { return v.size(); });

  last_ratios_.assign(params.size(), 1.0);
  for (size_t i = 0; i < params.size(); ++i) {
    const ParamRef& p = params[i];
    if (p.count == 0) continue;  // nothing to update; its local learning rate is 1
    std::vector<float>& v = momentum_[p.param];
    if (v.empty()) v.assign(p.count, 0.0f);  // first sight: zero momentum
    const double weight_decay = p.exclude ? 0.0 : options_.weight_decay;
    double local_lr = 1.0;
    if (!p.exclude) {
      const Norms norms = squared_norms(p.param, p.grad, p.count);
      const double x_norm = std::sqrt(norms.x2), g_norm = std::sqrt(norms.g2);
      if (x_norm > 0 && g_norm > 0) {
        local_lr =
            options_.trust_coefficient * x_norm / (g_norm + weight_decay * x_norm + options_.eps);
      }
    }
    last_ratios_[i] = local_lr;
    momentum_step(p.param, v.data(), p.grad, p.count, static_cast<float>(options_.momentum),
                  static_cast<float>(options_.lr * local_lr), static_cast<float>(weight_decay));
  }
  ++step_;
}

}  // namespace ccl::training
