// The optimizers' common step (optim.hpp): the argument checks, the pieces' state, and for
// LAMB and LARS the per-tensor sums, added up over the group in one all-reduce when sharded.
// A whole-tensor step is the same walk with each ref its own tensor and nothing to add up.
#include <stdexcept>
#include <string>

#include "ccl/training/optim.hpp"
#include "optim/param_checks.h"

namespace ccl::training {

Optimizer::Optimizer(const char* prefix, const char* kind, double lr)
    : prefix_(prefix), kind_(kind), lr_(lr) {}

void Optimizer::set_lr(double lr) {
  optim_detail::check_range(prefix_, lr >= 0, "lr", lr, "lr >= 0");
  lr_ = lr;
}

void Optimizer::measure(const ParamRef&, PieceState&, double*) {}

void Optimizer::step(std::span<const ParamRef> params) {
  run(params, params.size(), /*sharded=*/false, nullptr);
}

void Optimizer::step_sharded(std::span<const ParamRef> pieces, size_t tensors,
                             Communicator& group) {
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (pieces[i].tensor >= tensors) {
      throw std::invalid_argument(std::string(prefix_) + "step_sharded: piece " +
                                  std::to_string(i) + " names tensor " +
                                  std::to_string(pieces[i].tensor) + ", but there are " +
                                  std::to_string(tensors) + " tensors");
    }
  }
  run(pieces, tensors, /*sharded=*/true, &group);
}

void Optimizer::run(std::span<const ParamRef> pieces, size_t tensors, bool sharded,
                    Communicator* group) {
  // Everything is checked before anything changes, so a throw leaves the optimizer as it was.
  optim_detail::check_params(prefix_, pieces, state_, [](const PieceState& s) { return s.count; });

  const size_t per_tensor = sums_per_tensor();
  const size_t per_piece = buffers();
  // Index of a piece's tensor: whole tensors are numbered by position.
  const auto tensor_of = [&](size_t i) { return sharded ? pieces[i].tensor : i; };
  const auto state_of = [&](const ParamRef& p) -> PieceState& {
    PieceState& s = state_[p.param];
    if (s.count == 0) {  // first sight: zeroed state
      s.count = p.count;
      s.data.assign(per_piece * p.count, 0.0f);
    }
    return s;
  };

  std::vector<double> sums(per_tensor * tensors, 0.0);
  if (per_tensor > 0) {
    for (size_t i = 0; i < pieces.size(); ++i) {
      const ParamRef& p = pieces[i];
      if (p.count > 0) measure(p, state_of(p), &sums[per_tensor * tensor_of(i)]);
    }
    // One all-reduce for every tensor's sums; every rank computes the same `tensors`, so all
    // skip it alike when there is none.
    if (group != nullptr && !sums.empty()) group->all_reduce(std::span<double>(sums), cclSum);
  }

  ratios_.assign(pieces.size(), 1.0);
  for (size_t i = 0; i < pieces.size(); ++i) {
    const ParamRef& p = pieces[i];
    if (p.count == 0) continue;  // nothing to update; its ratio is 1
    PieceState& s = state_of(p);
    ratios_[i] = apply(p, s, per_tensor > 0 ? &sums[per_tensor * tensor_of(i)] : nullptr);
    ++s.steps;
  }
  ++step_;
}

}  // namespace ccl::training
