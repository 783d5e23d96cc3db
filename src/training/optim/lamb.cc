// LAMB (optim.hpp). Each parameter (or piece of one) takes two passes over its floats, the
// Optimizer's measure and apply: the first updates the moments and accumulates ‖x‖² and ‖u‖²
// (summed over the tensor's pieces, on every rank when sharded), the second recomputes u from
// the updated moments and applies x −= lr·r·u. Writing u out in the first pass instead would save
// the second pass one stream read (m and v for u) at the cost of one more written in the first: the
// same traffic, plus a scratch buffer as large as the largest parameter. sources.cmake compiles
// this file with -fno-math-errno, without which GCC does not vectorize the square root (each one
// becomes a call that may set errno, behind a branch).
#include <algorithm>
#include <cmath>
#include <limits>

#include "ccl/training/optim.hpp"
#include "optim/param_checks.h"

namespace ccl::training {

namespace {

constexpr const char* kPrefix = "ccl::training::Lamb: ";

using optim_detail::check_range;

void validate(const LambOptions& o) {
  check_range(kPrefix, o.lr >= 0, "lr", o.lr, "lr >= 0");
  check_range(kPrefix, o.beta1 >= 0 && o.beta1 < 1, "beta1", o.beta1, "0 <= beta1 < 1");
  check_range(kPrefix, o.beta2 >= 0 && o.beta2 < 1, "beta2", o.beta2, "0 <= beta2 < 1");
  check_range(kPrefix, o.eps > 0, "eps", o.eps, "eps > 0");
  check_range(kPrefix, o.weight_decay >= 0, "weight_decay", o.weight_decay, "weight_decay >= 0");
  check_range(kPrefix, o.clamp > 0, "clamp", o.clamp, "clamp > 0");
}

// The step's constants, in float: the elements are floats and the loops stay in one width.
struct Coefficients {
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
  float inv_bias1, inv_bias2;  // 1/(1−β1^t), 1/(1−β2^t)
  float eps, weight_decay;
};

// u = m̂/(√v̂ + ε) + λ·x, the same expression in both passes so that the second applies exactly
// the update whose norm the first measured.
inline float update(float m, float v, float x, const Coefficients& c) {
  return m * c.inv_bias1 / (std::sqrt(v * c.inv_bias2) + c.eps) + c.weight_decay * x;
}

// m = β1·m + (1−β1)·g, v = β2·v + (1−β2)·g², and u from the new moments.
inline float moments_and_update(float& m, float& v, float g, float x, const Coefficients& c) {
  m = c.beta1 * m + c.one_minus_beta1 * g;
  v = c.beta2 * v + c.one_minus_beta2 * g * g;
  return update(m, v, x, c);
}

struct Norms {
  double x2 = 0, u2 = 0;  // ‖x‖², ‖u‖²
};

// Independent partial sums, one per lane: a float-to-double reduction vectorizes only if its
// order may change, and the compiler may not reorder one accumulator (no -ffast-math here).
constexpr size_t kLanes = 8;

// First pass: the moments, and the squared norms of x and u. The arrays do not overlap (the
// moments are ours; a parameter and its gradient are distinct). Not inlined: GCC drops the
// __restrict of the arguments when it inlines, and without them it does not vectorize.
[[gnu::noinline]] Norms moments_and_norms(float* __restrict m, float* __restrict v,
                                          const float* __restrict g, const float* __restrict x,
                                          size_t n, const Coefficients& c) {
  double x2[kLanes] = {}, u2[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t lane = 0; lane < kLanes; ++lane) {
      const float u = moments_and_update(m[i + lane], v[i + lane], g[i + lane], x[i + lane], c);
      x2[lane] += static_cast<double>(x[i + lane]) * x[i + lane];
      u2[lane] += static_cast<double>(u) * u;
    }
  }
  for (; i < n; ++i) {
    const float u = moments_and_update(m[i], v[i], g[i], x[i], c);
    x2[0] += static_cast<double>(x[i]) * x[i];
    u2[0] += static_cast<double>(u) * u;
  }
  Norms norms;
  for (size_t lane = 0; lane < kLanes; ++lane) {
    norms.x2 += x2[lane];
    norms.u2 += u2[lane];
  }
  return norms;
}

// Second pass: x −= lr·r·u. In blocks, as the first pass, because at -O2 GCC vectorizes only
// loops of a known trip count (its "very cheap" cost model).
[[gnu::noinline]] void apply_update(float* __restrict x, const float* __restrict m,
                                    const float* __restrict v, size_t n, const Coefficients& c,
                                    float scale) {
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t lane = 0; lane < kLanes; ++lane) {
      x[i + lane] -= scale * update(m[i + lane], v[i + lane], x[i + lane], c);
    }
  }
  for (; i < n; ++i) x[i] -= scale * update(m[i], v[i], x[i], c);
}

Coefficients coefficients(const LambOptions& o, int64_t t, bool exclude) {
  const double bias1 = 1 - std::pow(o.beta1, static_cast<double>(t));
  const double bias2 = 1 - std::pow(o.beta2, static_cast<double>(t));
  return Coefficients{
      .beta1 = static_cast<float>(o.beta1),
      .one_minus_beta1 = static_cast<float>(1 - o.beta1),
      .beta2 = static_cast<float>(o.beta2),
      .one_minus_beta2 = static_cast<float>(1 - o.beta2),
      .inv_bias1 = static_cast<float>(1 / bias1),
      .inv_bias2 = static_cast<float>(1 / bias2),
      // An ε too small for a float acts as the smallest normal float, not as 0 (0/0 where g
      // has always been 0).
      .eps = std::max(static_cast<float>(o.eps), std::numeric_limits<float>::min()),
      .weight_decay = exclude ? 0.0f : static_cast<float>(o.weight_decay),
  };
}

}  // namespace

Lamb::Lamb(LambOptions options) : Optimizer(kPrefix, "lamb", options.lr), options_(options) {
  validate(options_);
}

// The first pass: the moments, and the piece's share of ‖x‖² and ‖u‖² (sums[0], sums[1]). The
// step count is the optimizer's (as in the paper), the same for every piece of a step.
void Lamb::measure(const ParamRef& p, PieceState& s, double* sums) {
  const Coefficients c = coefficients(options_, steps() + 1, p.exclude);
  const Norms norms = moments_and_norms(s.buffer(0), s.buffer(1), p.grad, p.param, p.count, c);
  sums[0] += norms.x2;
  sums[1] += norms.u2;
}

// The second pass, with the whole tensor's norms.
double Lamb::apply(const ParamRef& p, PieceState& s, const double* sums) {
  const Coefficients c = coefficients(options_, steps() + 1, p.exclude);
  const double x_norm = std::sqrt(sums[0]), u_norm = std::sqrt(sums[1]);
  double ratio = 1.0;
  if (!p.exclude && x_norm > 0 && u_norm > 0) ratio = std::min(x_norm, options_.clamp) / u_norm;
  apply_update(p.param, s.buffer(0), s.buffer(1), p.count, c, static_cast<float>(lr() * ratio));
  return ratio;
}

}  // namespace ccl::training
