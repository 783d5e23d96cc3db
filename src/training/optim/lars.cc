// LARS with momentum (optim.hpp). A parameter (or piece of one) takes one pass for ‖x‖ and ‖g‖
// (the Optimizer's measure, summed over the tensor's pieces; skipped when excluded: its local
// learning rate is 1) and one for the momentum and the parameter (apply).
#include <cmath>

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

Lars::Lars(LarsOptions options) : Optimizer(kPrefix, "lars", options.lr), options_(options) {
  validate(options_);
}

// The first pass: the piece's share of ‖x‖² and ‖g‖² (sums[0], sums[1]); none for an excluded
// parameter, whose local learning rate is 1.
void Lars::measure(const ParamRef& p, PieceState&, double* sums) {
  if (p.exclude) return;
  const Norms norms = squared_norms(p.param, p.grad, p.count);
  sums[0] += norms.x2;
  sums[1] += norms.g2;
}

// The second pass, with the whole tensor's norms.
double Lars::apply(const ParamRef& p, PieceState& s, const double* sums) {
  const double weight_decay = p.exclude ? 0.0 : options_.weight_decay;
  double local_lr = 1.0;
  const double x_norm = std::sqrt(sums[0]), g_norm = std::sqrt(sums[1]);
  if (!p.exclude && x_norm > 0 && g_norm > 0) {
    local_lr =
        options_.trust_coefficient * x_norm / (g_norm + weight_decay * x_norm + options_.eps);
  }
  momentum_step(p.param, s.buffer(0), p.grad, p.count, static_cast<float>(options_.momentum),
                static_cast<float>(lr() * local_lr), static_cast<float>(weight_decay));
  return local_lr;
}

}  // namespace ccl::training
