// The model of the ZeRO tests: six parameter tensors of uneven sizes in three units (two of them
// biases, excluded from weight decay), and a per-rank loss whose gradient depends on the rank
// and, non-linearly, on the parameters: g = (x - t_r) + 0.1·x³, t_r a target of rank r. Runs a
// few steps with ZeRO, or with plain DDP (the Reducer's all-reduce and the whole optimizer step).
#pragma once

#include <cmath>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "ccl/training.hpp"

namespace zero_test {

using namespace ccl::training;

inline const std::vector<ZeroParam>& model() {
  static const std::vector<ZeroParam> params = {{37, false, 0},  {64, false, 0}, {5, true, 1},
                                                {120, false, 1}, {9, true, 2},   {33, false, 2}};
  return params;
}

inline float initial(size_t param, size_t k) {
  return 0.5f * std::sin(0.37f * static_cast<float>(k) + static_cast<float>(param));
}

inline float target(int rank, size_t param, size_t k) {
  return std::cos(0.11f * static_cast<float>(k * (param + 1)) + 0.7f * static_cast<float>(rank));
}

inline void gradient(int rank, size_t param, std::span<const float> x, std::span<float> g) {
  for (size_t k = 0; k < x.size(); ++k) {
    g[k] += (x[k] - target(rank, param, k)) + 0.1f * x[k] * x[k] * x[k];
  }
}

enum class Opt { Sgd, Adam, Lamb, Lars };

inline const char* opt_name(Opt o) {
  return o == Opt::Sgd ? "Sgd" : o == Opt::Adam ? "Adam" : o == Opt::Lamb ? "Lamb" : "Lars";
}

// gtest prints a test's parameters: the name, not the enum's bytes.
inline void PrintTo(Opt o, std::ostream* os) { *os << opt_name(o); }

inline std::unique_ptr<Optimizer> make_optimizer(Opt o) {
  switch (o) {
    case Opt::Sgd:
      return std::make_unique<Sgd>(SgdOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01});
    case Opt::Adam:
      return std::make_unique<Adam>(
          AdamOptions{.lr = 0.01, .weight_decay = 0.01, .decoupled = true});
    case Opt::Lamb:
      return std::make_unique<Lamb>(LambOptions{.lr = 0.01});
    case Opt::Lars:
      return std::make_unique<Lars>(LarsOptions{.lr = 0.1, .trust_coefficient = 0.02});
  }
  return nullptr;
}

// One training step's forward and backward through ZeRO's protocol: units gathered in forward
// order, then backward in reverse order writing gradients and marking them ready.
inline void zero_iteration(Zero& zero, int rank) {
  const auto& params = model();
  const size_t units = zero.units().size();
  for (size_t u = 0; u < units; ++u) {
    zero.gather(u);
    zero.release(u);
  }
  for (size_t u = units; u-- > 0;) {
    zero.gather(u);
    for (size_t i = params.size(); i-- > 0;) {
      if (params[i].unit != u) continue;
      gradient(rank, i, zero.param(i), zero.grad(i));
      zero.mark_ready(i);
    }
    zero.release(u);
  }
  zero.step();
}

inline void load_initial(Zero& zero) {
  const auto& params = model();
  for (size_t i = 0; i < params.size(); ++i) {
    std::vector<float> v(params[i].count);
    for (size_t k = 0; k < v.size(); ++k) v[k] = initial(i, k);
    zero.load_full(i, v);
  }
}

inline std::vector<std::vector<float>> full_params(Zero& zero) {
  std::vector<std::vector<float>> out;
  for (size_t i = 0; i < model().size(); ++i) out.push_back(zero.gather_full(i));
  return out;
}

inline std::vector<std::vector<float>> run_zero(ccl::Communicator& comm, Opt opt,
                                                ZeroOptions options, int steps) {
  Zero zero(comm, model(), make_optimizer(opt), options);
  load_initial(zero);
  for (int s = 0; s < steps; ++s) zero_iteration(zero, comm.rank());
  return full_params(zero);
}

// Plain DDP: whole parameters on every rank, gradients averaged by the Reducer, the whole step.
inline std::vector<std::vector<float>> run_ddp(ccl::Communicator& comm, Opt opt, int steps) {
  const auto& params = model();
  std::vector<TensorSpec> specs;
  std::vector<std::vector<float>> x;
  for (size_t i = 0; i < params.size(); ++i) {
    specs.push_back({params[i].count, cclFloat32});
    x.emplace_back(params[i].count);
    for (size_t k = 0; k < params[i].count; ++k) x[i][k] = initial(i, k);
  }
  Reducer reducer(comm, specs, {.bucket_limits = {256}});
  auto optimizer = make_optimizer(opt);
  for (int s = 0; s < steps; ++s) {
    reducer.zero_grad();
    for (size_t i = params.size(); i-- > 0;) {
      gradient(comm.rank(), i, x[i], reducer.grad_as<float>(i));
      reducer.mark_ready(i);
    }
    reducer.wait();
    std::vector<ParamRef> refs;
    for (size_t i = 0; i < params.size(); ++i) {
      refs.push_back(
          {x[i].data(), reducer.grad_as<float>(i).data(), params[i].count, params[i].exclude});
    }
    optimizer->step(refs);
  }
  return x;
}

}  // namespace zero_test
