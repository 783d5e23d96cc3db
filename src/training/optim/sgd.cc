// SGD with momentum (optim.hpp), torch.optim.SGD's single-tensor update in float32, operation for
// operation: d = g + λ·x (torch adds the decay only when λ ≠ 0), b = d at a parameter's first
// step (torch clones d into the buffer: no dampening then), b = μ·b + (1 − dampening)·d after,
// and x −= lr·d with d = b or, nesterov, d + μ·b. One pass per parameter.
#include "ccl/training/optim.hpp"
#include "optim/param_checks.h"

namespace ccl::training {

namespace {

constexpr const char* kPrefix = "ccl::training::Sgd: ";

using optim_detail::check_range;

void validate(const SgdOptions& o) {
  check_range(kPrefix, o.lr >= 0, "lr", o.lr, "lr >= 0");
  check_range(kPrefix, o.momentum >= 0, "momentum", o.momentum, "momentum >= 0");
  check_range(kPrefix, o.dampening >= 0 && o.dampening <= 1, "dampening", o.dampening,
              "0 <= dampening <= 1");
  check_range(kPrefix, o.weight_decay >= 0, "weight_decay", o.weight_decay, "weight_decay >= 0");
  // As torch: Nesterov's look-ahead needs a momentum, and is defined without dampening.
  if (o.nesterov) {
    check_range(kPrefix, o.momentum > 0, "momentum", o.momentum, "momentum > 0 with nesterov");
    check_range(kPrefix, o.dampening == 0, "dampening", o.dampening, "dampening = 0 with nesterov");
  }
}

// The step's constants, in float as torch applies its scalars to float tensors.
struct Coefficients {
  float lr, weight_decay, momentum, one_minus_dampening;
};

enum class Buffer { kNone, kFirst, kLater };

// The flags are template arguments so that each variant is a branch-free loop the compiler can
// vectorize. Not inlined: GCC drops the __restrict of the arguments when it inlines. The arrays
// do not overlap (the buffer is ours; a parameter and its gradient are distinct).
template <bool kDecay, Buffer kBuffer, bool kNesterov>
[[gnu::noinline]] void sgd_step(float* __restrict x, float* __restrict b, const float* __restrict g,
                                size_t n, const Coefficients& c) {
  for (size_t i = 0; i < n; ++i) {
    float d = g[i];
    if constexpr (kDecay) d = d + c.weight_decay * x[i];
    if constexpr (kBuffer == Buffer::kFirst) b[i] = d;
    if constexpr (kBuffer == Buffer::kLater) b[i] = b[i] * c.momentum + c.one_minus_dampening * d;
    if constexpr (kBuffer != Buffer::kNone) d = kNesterov ? d + c.momentum * b[i] : b[i];
    x[i] = x[i] - c.lr * d;
  }
}

template <bool kDecay>
void sgd_step(Buffer buffer, bool nesterov, float* x, float* b, const float* g, size_t n,
              const Coefficients& c) {
  switch (buffer) {
    case Buffer::kNone:
      return sgd_step<kDecay, Buffer::kNone, false>(x, b, g, n, c);
    case Buffer::kFirst:
      return nesterov ? sgd_step<kDecay, Buffer::kFirst, true>(x, b, g, n, c)
                      : sgd_step<kDecay, Buffer::kFirst, false>(x, b, g, n, c);
    case Buffer::kLater:
      return nesterov ? sgd_step<kDecay, Buffer::kLater, true>(x, b, g, n, c)
                      : sgd_step<kDecay, Buffer::kLater, false>(x, b, g, n, c);
  }
}

}  // namespace

Sgd::Sgd(SgdOptions options) : Optimizer(kPrefix, "sgd", options.lr), options_(options) {
  validate(options_);
}

// As torch, no momentum keeps no buffer.
size_t Sgd::buffers() const { return options_.momentum != 0 ? 1 : 0; }

double Sgd::apply(const ParamRef& p, PieceState& s, const double*) {
  const double weight_decay = p.exclude ? 0.0 : options_.weight_decay;
  const Coefficients c{
      .lr = static_cast<float>(lr()),
      .weight_decay = static_cast<float>(weight_decay),
      .momentum = static_cast<float>(options_.momentum),
      .one_minus_dampening = static_cast<float>(1 - options_.dampening),
  };
  const Buffer buffer = options_.momentum == 0 ? Buffer::kNone
                        : s.steps == 0         ? Buffer::kFirst
                                               : Buffer::kLater;
  float* b = buffer == Buffer::kNone ? nullptr : s.buffer(0);
  if (weight_decay != 0) {
    sgd_step<true>(buffer, options_.nesterov, p.param, b, p.grad, p.count, c);
  } else {
    sgd_step<false>(buffer, options_.nesterov, p.param, b, p.grad, p.count, c);
  }
  return 1.0;
}

}  // namespace ccl::training
