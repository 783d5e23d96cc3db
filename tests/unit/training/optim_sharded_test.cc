// Optimizer::step_sharded (include/ccl/training/optim.hpp) at 2, 3 and 4 ranks (threads of one
// process), for SGD, Adam, LAMB and LARS: tensors of uneven sizes flattened and cut into
// contiguous rank slices as ZeRO cuts them (a rank holding parts of 3 tensors, a rank holding
// nothing), 3 steps, the slices put back together and compared with step() on the whole tensors.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "../support/rank_threads.h"
#include "ccl/training/optim.hpp"
#include "optim_testing.h"

namespace {

using namespace ccl::training;
using ccl_test::contains;
using ccl_test::expect_close;
using ccl_test::invalid_argument_of;
using ccl_test::random_tensor;

enum class Kind { kSgd, kAdam, kLamb, kLars };

std::unique_ptr<Optimizer> make(Kind kind) {
  switch (kind) {
    case Kind::kSgd:
      return std::make_unique<Sgd>(
          SgdOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true});
    case Kind::kAdam:
      return std::make_unique<Adam>(
          AdamOptions{.lr = 0.01, .beta2 = 0.99, .weight_decay = 0.1, .decoupled = true});
    case Kind::kLamb:
      return std::make_unique<Lamb>(LambOptions{
          .lr = 0.05, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.1, .clamp = 2});
    case Kind::kLars:
      return std::make_unique<Lars>(LarsOptions{.lr = 0.5,
                                                .momentum = 0.9,
                                                .weight_decay = 0.01,
                                                .trust_coefficient = 0.02,
                                                .eps = 1e-8});
  }
  return nullptr;
}

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kSgd:
      return "Sgd";
    case Kind::kAdam:
      return "Adam";
    case Kind::kLamb:
      return "Lamb";
    case Kind::kLars:
      return "Lars";
  }
  return "?";
}

// gtest prints the kind in a failure's parameters by this name.
void PrintTo(Kind kind, std::ostream* os) { *os << kind_name(kind); }

// The tensors, flattened one after the other: uneven sizes, one excluded (a bias), one that
// starts at zero (LAMB's and LARS's ratio 1 at the first step), one of a single element.
const std::vector<size_t> kSizes = {37, 5, 100, 9, 3, 1, 20};
const std::vector<bool> kExclude = {false, true, false, false, false, true, false};
constexpr size_t kZeroTensor = 3;
constexpr int kSteps = 3;

std::vector<size_t> offsets() {
  std::vector<size_t> o = {0};
  for (size_t n : kSizes) o.push_back(o.back() + n);
  return o;  // o.back() is the total, 175
}

// Where each rank's slice of the flat buffer starts and ends: cuts[r] to cuts[r + 1].
//   2 ranks: the cut is inside tensor 3 (the one that starts at zero).
//   3 ranks: rank 0 holds tensors 0 and 1 and the start of 2 (parts of 3 tensors); rank 1 holds
//            nothing.
//   4 ranks: rank 1 holds the end of 0, all of 1 and most of 2; rank 2 holds nothing.
// Each cut but at an empty rank splits a tensor that is not excluded, whose norms then need
// both sides.
std::vector<size_t> cuts(int nranks) {
  switch (nranks) {
    case 2:
      return {0, 145, 175};
    case 3:
      return {0, 90, 90, 175};
    default:
      return {0, 20, 140, 140, 175};
  }
}

// The pieces of the flat range [lo, hi), pointing into a rank's slice buffers (`x`, `g` hold
// the floats of [lo, hi)).
std::vector<ParamRef> pieces(size_t lo, size_t hi, float* x, const float* g) {
  const std::vector<size_t> off = offsets();
  std::vector<ParamRef> out;
  for (size_t t = 0; t < kSizes.size(); ++t) {
    const size_t begin = std::max(lo, off[t]), end = std::min(hi, off[t + 1]);
    if (begin >= end) continue;
    out.push_back({.param = x + (begin - lo),
                   .grad = g + (begin - lo),
                   .count = end - begin,
                   .exclude = kExclude[t],
                   .tensor = t});
  }
  return out;
}

// The initial flat parameters and each step's flat gradients, the same for every rank.
struct Data {
  std::vector<float> x0;
  std::vector<std::vector<float>> grads;  // per step
};

Data data() {
  std::mt19937 rng(17);
  Data d;
  for (size_t t = 0; t < kSizes.size(); ++t) {
    const std::vector<float> x = t == kZeroTensor ? std::vector<float>(kSizes[t], 0.0f)
                                                  : random_tensor(rng, kSizes[t], 0.1f, 1.0f);
    d.x0.insert(d.x0.end(), x.begin(), x.end());
  }
  for (int s = 0; s < kSteps; ++s) d.grads.push_back(random_tensor(rng, d.x0.size(), 0.1f, 1.0f));
  return d;
}

class StepShardedTest : public testing::TestWithParam<std::tuple<Kind, int>> {};

TEST_P(StepShardedTest, EqualsTheWholeTensorStep) {
  const auto [kind, nranks] = GetParam();
  const Data d = data();
  const std::vector<size_t> off = offsets(), cut = cuts(nranks);

  // The reference: one optimizer stepping the whole tensors.
  std::vector<float> whole = d.x0;
  auto reference = make(kind);
  for (int s = 0; s < kSteps; ++s) {
    std::vector<ParamRef> refs;
    for (size_t t = 0; t < kSizes.size(); ++t) {
      refs.push_back({.param = whole.data() + off[t],
                      .grad = d.grads[s].data() + off[t],
                      .count = kSizes[t],
                      .exclude = kExclude[t]});
    }
    reference->step(refs);
  }

  // Each rank steps its slice; the slices land in `gathered` (threads share memory, and each
  // writes only its own range).
  std::vector<float> gathered(d.x0.size(), -1.0f);
  std::vector<size_t> state_bytes(static_cast<size_t>(nranks));
  ccl_test::run_ranks(nranks, [&](ccl::Communicator& comm) {
    const auto r = static_cast<size_t>(comm.rank());
    const size_t lo = cut[r], hi = cut[r + 1];
    std::vector<float> x(d.x0.begin() + lo, d.x0.begin() + hi), g(hi - lo);
    const std::vector<ParamRef> mine = pieces(lo, hi, x.data(), g.data());
    auto opt = make(kind);
    for (int s = 0; s < kSteps; ++s) {
      std::copy(d.grads[s].begin() + lo, d.grads[s].begin() + hi, g.begin());
      opt->step_sharded(mine, kSizes.size(), comm);
    }
    if (opt->steps() != kSteps) throw std::runtime_error("steps() is not 3");
    std::copy(x.begin(), x.end(), gathered.begin() + lo);
    state_bytes[r] = opt->state_bytes();
  });

  // The ranks hold the state of their slices only, together the whole's.
  size_t bytes = 0;
  for (size_t b : state_bytes) bytes += b;
  EXPECT_EQ(bytes, reference->state_bytes());
  for (size_t t = 0; t < kSizes.size(); ++t) {
    const std::vector<float> got(gathered.begin() + off[t], gathered.begin() + off[t + 1]);
    const std::vector<float> want(whole.begin() + off[t], whole.begin() + off[t + 1]);
    expect_close(got, want, 1e-6, std::string(kind_name(kind)) + " tensor " + std::to_string(t));
  }
}

INSTANTIATE_TEST_SUITE_P(Optimizers, StepShardedTest,
                         testing::Combine(testing::Values(Kind::kSgd, Kind::kAdam, Kind::kLamb,
                                                          Kind::kLars),
                                          testing::Values(2, 3, 4)),
                         [](const testing::TestParamInfo<std::tuple<Kind, int>>& info) {
                           return std::string(kind_name(std::get<0>(info.param))) + "_" +
                                  std::to_string(std::get<1>(info.param)) + "ranks";
                         });

TEST(StepSharded, LambsRatiosAreTheWholeTensors) {
  // Tensor 0 split between the ranks: both pieces take the ratio of the whole tensor.
  const Data d = data();
  std::vector<float> whole(d.x0.begin(), d.x0.begin() + 37);
  Lamb reference(LambOptions{.lr = 0.05, .weight_decay = 0.1, .clamp = 2});
  const ParamRef all{.param = whole.data(), .grad = d.grads[0].data(), .count = 37};
  reference.step({&all, 1});
  std::vector<double> ratios(2);
  ccl_test::run_ranks(2, [&](ccl::Communicator& comm) {
    const size_t lo = comm.rank() == 0 ? 0 : 15, hi = comm.rank() == 0 ? 15 : 37;
    std::vector<float> x(d.x0.begin() + lo, d.x0.begin() + hi);
    const ParamRef piece{
        .param = x.data(), .grad = d.grads[0].data() + lo, .count = hi - lo, .tensor = 0};
    Lamb lamb(LambOptions{.lr = 0.05, .weight_decay = 0.1, .clamp = 2});
    lamb.step_sharded({&piece, 1}, 1, comm);
    ratios[static_cast<size_t>(comm.rank())] = lamb.last_trust_ratios().at(0);
  });
  const double want = reference.last_trust_ratios()[0];
  EXPECT_NE(want, 1.0);
  EXPECT_NEAR(ratios[0], want, 1e-12 * want);
  EXPECT_NEAR(ratios[1], want, 1e-12 * want);
}

TEST(StepSharded, ElementWiseOptimizersDoNotCommunicate) {
  // Only rank 1 steps: had SGD or Adam called a collective, it would wait for rank 0 until the
  // communicator's timeout and throw.
  std::atomic<bool> stepped{false};
  ccl_test::run_ranks(2, [&](ccl::Communicator& comm) {
    if (comm.rank() != 1) return;
    std::vector<float> x(4, 1.0f), g(4, 0.5f);
    const ParamRef piece{.param = x.data(), .grad = g.data(), .count = 4, .tensor = 1};
    Sgd sgd(SgdOptions{.momentum = 0.9});
    Adam adam(AdamOptions{});
    const auto start = std::chrono::steady_clock::now();
    sgd.step_sharded({&piece, 1}, 2, comm);
    adam.step_sharded({&piece, 1}, 2, comm);
    adam.step_sharded({}, 2, comm);
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(5)) {
      throw std::runtime_error("an element-wise step_sharded waited");
    }
    stepped = true;
  });
  EXPECT_TRUE(stepped);
}

TEST(StepSharded, RefusesAPieceOfATensorOutOfRangeOnEveryRank) {
  ccl_test::run_ranks(2, [](ccl::Communicator& comm) {
    std::vector<float> x(4, 1.0f), g(4, 0.5f);
    const ParamRef piece{.param = x.data(), .grad = g.data(), .count = 4, .tensor = 2};
    for (Kind kind : {Kind::kSgd, Kind::kAdam, Kind::kLamb, Kind::kLars}) {
      auto opt = make(kind);
      const std::string m = invalid_argument_of([&] { opt->step_sharded({&piece, 1}, 2, comm); });
      if (!contains(m, "piece 0 names tensor 2, but there are 2 tensors")) {
        throw std::runtime_error("unexpected message: " + m);
      }
      if (opt->steps() != 0 || x != std::vector<float>(4, 1.0f)) {
        throw std::runtime_error("the refused step changed something");
      }
    }
  });
}

}  // namespace
