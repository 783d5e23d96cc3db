// SGD and Adam/AdamW (include/ccl/training/optim.hpp): steps against a double-precision reference
// written from torch 1.13's documented single-tensor updates (torch/optim/sgd.py, adam.py,
// adamw.py), cases worked out by hand, the argument checks, and what the Optimizer base holds.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ccl/training/optim.hpp"
#include "optim_testing.h"

namespace {

using namespace ccl::training;
using ccl_test::contains;
using ccl_test::expect_close;
using ccl_test::invalid_argument_of;
using ccl_test::Model;
using ccl_test::random_tensor;
using ccl_test::refs;
using ccl_test::starts_with;

// --- The references: one tensor in double, as torch's single-tensor loops write it. ---

struct RefTensor {
  std::vector<double> x, m, v;  // SGD keeps its momentum buffer in m
  bool exclude = false;
  int steps = 0;  // torch counts steps per parameter
};

RefTensor ref_tensor(const std::vector<float>& x, bool exclude) {
  return RefTensor{.x = std::vector<double>(x.begin(), x.end()),
                   .m = std::vector<double>(x.size(), 0.0),
                   .v = std::vector<double>(x.size(), 0.0),
                   .exclude = exclude};
}

// torch.optim.SGD: d = g + λx; buf = d at the first step, then μ·buf + (1 − dampening)·d;
// d = d + μ·buf (nesterov) or buf; x −= lr·d.
void ref_sgd_step(RefTensor& p, const std::vector<float>& grad, const SgdOptions& o) {
  const double lambda = p.exclude ? 0.0 : o.weight_decay;
  for (size_t i = 0; i < p.x.size(); ++i) {
    double d = grad[i] + lambda * p.x[i];
    if (o.momentum != 0) {
      p.m[i] = p.steps == 0 ? d : o.momentum * p.m[i] + (1 - o.dampening) * d;
      d = o.nesterov ? d + o.momentum * p.m[i] : p.m[i];
    }
    p.x[i] -= o.lr * d;
  }
  ++p.steps;
}

// torch.optim.Adam (grad += λx) and AdamW (x *= 1 − lr·λ), amsgrad off.
void ref_adam_step(RefTensor& p, const std::vector<float>& grad, const AdamOptions& o) {
  const double lambda = p.exclude ? 0.0 : o.weight_decay;
  const int t = ++p.steps;
  const double bias1 = 1 - std::pow(o.beta1, t), bias2 = 1 - std::pow(o.beta2, t);
  for (size_t i = 0; i < p.x.size(); ++i) {
    double g = grad[i];
    if (o.decoupled) {
      p.x[i] *= 1 - o.lr * lambda;
    } else {
      g += lambda * p.x[i];
    }
    p.m[i] = o.beta1 * p.m[i] + (1 - o.beta1) * g;
    p.v[i] = o.beta2 * p.v[i] + (1 - o.beta2) * g * g;
    const double denom = std::sqrt(p.v[i]) / std::sqrt(bias2) + o.eps;
    p.x[i] -= o.lr / bias1 * p.m[i] / denom;
  }
}

// An odd-sized weight (the kernels' vector body and tail), a larger one, and an excluded bias.
Model model(std::mt19937& rng) {
  return Model{.x = {random_tensor(rng, 37, 0.1f, 0.3f), random_tensor(rng, 100, 0.5f, 1.0f),
                     random_tensor(rng, 5, 0.1f, 0.3f)},
               .exclude = {false, false, true}};
}

// Steps `opt` and the reference over `steps` steps of random gradients; compares after each.
template <class Options, class RefStep>
void compare_steps(Optimizer& opt, const Options& o, RefStep ref_step, unsigned seed,
                   int steps = 4) {
  std::mt19937 rng(seed);
  Model m = model(rng);
  std::vector<RefTensor> ref;
  for (size_t i = 0; i < m.x.size(); ++i) ref.push_back(ref_tensor(m.x[i], m.exclude[i]));
  for (int t = 1; t <= steps; ++t) {
    std::vector<std::vector<float>> grads;
    for (const auto& x : m.x) grads.push_back(random_tensor(rng, x.size(), 0.1f, 1.0f));
    opt.step(refs(m, grads));
    ASSERT_EQ(opt.steps(), t);
    for (size_t i = 0; i < m.x.size(); ++i) {
      ref_step(ref[i], grads[i], o);
      expect_close(m.x[i], ref[i].x, 1e-6,
                   "step " + std::to_string(t) + " tensor " + std::to_string(i));
    }
  }
}

struct SgdCase {
  const char* name;
  SgdOptions options;
};

TEST(Sgd, MatchesTorchsUpdateOverFourSteps) {
  const std::vector<SgdCase> cases = {
      {"plain", {.lr = 0.1}},
      {"weight decay", {.lr = 0.1, .weight_decay = 0.05}},
      {"momentum", {.lr = 0.1, .momentum = 0.9}},
      {"dampening", {.lr = 0.1, .momentum = 0.9, .dampening = 0.3}},
      {"nesterov", {.lr = 0.1, .momentum = 0.9, .nesterov = true}},
      {"all", {.lr = 0.05, .momentum = 0.8, .weight_decay = 0.01, .nesterov = true}},
      {"momentum above 1", {.lr = 0.01, .momentum = 1.5, .dampening = 1, .weight_decay = 0.1}},
  };
  unsigned seed = 1;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    Sgd sgd(c.options);
    compare_steps(sgd, c.options, ref_sgd_step, seed++);
  }
}

TEST(Adam, MatchesTorchsAdamAndAdamWOverFourSteps) {
  struct Case {
    const char* name;
    AdamOptions options;
  };
  const std::vector<Case> cases = {
      {"defaults", {}},
      {"adam with weight decay", {.lr = 0.01, .beta2 = 0.99, .weight_decay = 0.1}},
      {"adamw", {.lr = 0.01, .beta1 = 0.8, .eps = 1e-6, .weight_decay = 0.1, .decoupled = true}},
      {"beta 0", {.lr = 0.02, .beta1 = 0, .beta2 = 0}},
  };
  unsigned seed = 11;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    Adam adam(c.options);
    compare_steps(adam, c.options, ref_adam_step, seed++);
  }
}

// x = 1 with gradient 1, stepped twice: x after each step (the by-hand cases below).
std::pair<float, float> two_steps_from_one(Optimizer& optimizer) {
  float x = 1.0f;
  const float g = 1.0f;
  const ParamRef p{.param = &x, .grad = &g, .count = 1};
  optimizer.step({&p, 1});
  const float first = x;
  optimizer.step({&p, 1});
  return {first, x};
}

TEST(Sgd, MomentumByHand) {
  // lr 0.1, μ 0.9; x = 1, g = 1 at both steps. Step 1: b = d = 1, x = 0.9. Step 2:
  // b = 0.9 + 1 = 1.9, x = 0.9 − 0.19 = 0.71.
  Sgd sgd(SgdOptions{.lr = 0.1, .momentum = 0.9});
  const auto [first, second] = two_steps_from_one(sgd);
  EXPECT_NEAR(first, 0.9, 1e-7);
  EXPECT_NEAR(second, 0.71, 1e-7);
}

TEST(Sgd, NesterovByHand) {
  // Step 1: b = 1, d = 1 + 0.9·1 = 1.9, x = 1 − 0.19 = 0.81. Step 2: b = 1.9, d = 1 + 0.9·1.9 =
  // 2.71, x = 0.81 − 0.271 = 0.539.
  Sgd sgd(SgdOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
  const auto [first, second] = two_steps_from_one(sgd);
  EXPECT_NEAR(first, 0.81, 1e-7);
  EXPECT_NEAR(second, 0.539, 1e-7);
}

TEST(Sgd, DampeningSparesTheFirstStep) {
  // torch clones d into the buffer at the first step: dampening 0.5 applies from the second.
  // Step 1: b = 1, x = 0.9. Step 2: b = 0.9·1 + 0.5·1 = 1.4, x = 0.9 − 0.14 = 0.76.
  Sgd sgd(SgdOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.5});
  const auto [first, second] = two_steps_from_one(sgd);
  EXPECT_NEAR(first, 0.9, 1e-7);
  EXPECT_NEAR(second, 0.76, 1e-7);
}

TEST(Sgd, AnExcludedParameterTakesNoWeightDecay) {
  Sgd sgd(SgdOptions{.lr = 0.1, .weight_decay = 0.5});
  float decayed = 1.0f, excluded = 1.0f;
  const float g = 0.0f;
  const std::vector<ParamRef> p = {{.param = &decayed, .grad = &g, .count = 1},
                                   {.param = &excluded, .grad = &g, .count = 1, .exclude = true}};
  sgd.step(p);
  EXPECT_NEAR(decayed, 0.95, 1e-7);  // 1 − 0.1·0.5·1
  EXPECT_EQ(excluded, 1.0f);
}

TEST(Adam, FirstStepMovesByLrTimesTheSign) {
  // m̂ = g and v̂ = g² at the first step: x −= lr·g/(|g| + ε).
  Adam adam(AdamOptions{.lr = 0.1});
  float x[2] = {1.0f, 1.0f};
  const float g[2] = {0.5f, -2.0f};
  const ParamRef p{.param = x, .grad = g, .count = 2};
  adam.step({&p, 1});
  EXPECT_NEAR(x[0], 0.9, 1e-6);
  EXPECT_NEAR(x[1], 1.1, 1e-6);
}

TEST(Adam, AdamWDecaysTheParameterNotTheGradient) {
  // g = 0: m = v = 0 and the update is 0/ε = 0, so only AdamW's x·(1 − lr·λ) moves x; Adam's
  // decay enters the moments instead: g' = λx = 0.5, whose first step is lr·sign(g') = 0.1.
  AdamOptions o{.lr = 0.1, .weight_decay = 0.5, .decoupled = true};
  Adam adamw(o);
  o.decoupled = false;
  Adam adam(o);
  float xw = 1.0f, x = 1.0f, excluded = 1.0f;
  const float g = 0.0f;
  const ParamRef pw{.param = &xw, .grad = &g, .count = 1};
  const std::vector<ParamRef> p = {{.param = &x, .grad = &g, .count = 1},
                                   {.param = &excluded, .grad = &g, .count = 1, .exclude = true}};
  adamw.step({&pw, 1});
  adam.step(p);
  EXPECT_NEAR(xw, 0.95, 1e-7);
  EXPECT_NEAR(x, 0.9, 1e-6);
  EXPECT_EQ(excluded, 1.0f);
}

TEST(Adam, EachParameterCountsItsOwnSteps) {
  // As torch: a parameter first stepped at the optimizer's third step takes the bias correction
  // of its own first step, so it moves exactly as under a fresh optimizer.
  std::mt19937 rng(5);
  std::vector<float> a = random_tensor(rng, 9, 0.5f, 1.0f), b = random_tensor(rng, 9, 0.5f, 1.0f);
  std::vector<float> b_fresh = b;
  const std::vector<float> g = random_tensor(rng, 9, 0.1f, 1.0f);
  Adam adam(AdamOptions{.lr = 0.01}), fresh(AdamOptions{.lr = 0.01});
  const ParamRef pa{.param = a.data(), .grad = g.data(), .count = 9};
  adam.step({&pa, 1});
  adam.step({&pa, 1});
  const std::vector<ParamRef> both = {pa, {.param = b.data(), .grad = g.data(), .count = 9}};
  adam.step(both);
  const ParamRef pf{.param = b_fresh.data(), .grad = g.data(), .count = 9};
  fresh.step({&pf, 1});
  EXPECT_EQ(adam.steps(), 3);
  EXPECT_EQ(b, b_fresh);
}

// --- Argument checks. ---

TEST(Sgd, RejectsEachOptionOutOfRange) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  struct Case {
    const char* text;
    SgdOptions options;
  };
  const std::vector<Case> cases = {
      {"lr = -0.1", {.lr = -0.1}},
      {"lr = nan", {.lr = nan}},
      {"momentum = -0.5", {.momentum = -0.5}},
      {"dampening = -1", {.dampening = -1}},
      {"dampening = 1.5", {.dampening = 1.5}},
      {"weight_decay = -0.01", {.weight_decay = -0.01}},
      {"momentum = 0 is out of range (momentum > 0 with nesterov)", {.nesterov = true}},
      {"dampening = 0.1 is out of range (dampening = 0 with nesterov)",
       {.momentum = 0.9, .dampening = 0.1, .nesterov = true}},
  };
  for (const auto& c : cases) {
    const std::string message = invalid_argument_of([&] { Sgd{c.options}; });
    EXPECT_TRUE(starts_with(message, "ccl::training::Sgd: ")) << message;
    EXPECT_TRUE(contains(message, c.text)) << message << " (expected " << c.text << ")";
  }
  EXPECT_NO_THROW((Sgd{SgdOptions{.lr = 0, .momentum = 2, .dampening = 1}}));
}

TEST(Adam, RejectsEachOptionOutOfRange) {
  struct Case {
    const char* text;
    AdamOptions options;
  };
  const std::vector<Case> cases = {
      {"lr = -1", {.lr = -1}},           {"beta1 = 1", {.beta1 = 1}},
      {"beta1 = -0.1", {.beta1 = -0.1}}, {"beta2 = 1", {.beta2 = 1}},
      {"eps = -1e-08", {.eps = -1e-8}},  {"weight_decay = -0.5", {.weight_decay = -0.5}},
  };
  for (const auto& c : cases) {
    const std::string message = invalid_argument_of([&] { Adam{c.options}; });
    EXPECT_TRUE(starts_with(message, "ccl::training::Adam: ")) << message;
    EXPECT_TRUE(contains(message, c.text)) << message << " (expected " << c.text << ")";
  }
  EXPECT_NO_THROW((Adam{AdamOptions{.lr = 0, .beta1 = 0, .beta2 = 0, .eps = 0}}));
}

TEST(Optimizer, SetLrThroughTheBaseChecksAndKeepsTheOldRate) {
  std::vector<std::unique_ptr<Optimizer>> all;
  all.push_back(std::make_unique<Sgd>(SgdOptions{.lr = 0.5}));
  all.push_back(std::make_unique<Adam>(AdamOptions{.lr = 0.5}));
  all.push_back(std::make_unique<Lamb>(LambOptions{.lr = 0.5}));
  all.push_back(std::make_unique<Lars>(LarsOptions{.lr = 0.5}));
  const std::vector<std::string> prefixes = {"ccl::training::Sgd: ", "ccl::training::Adam: ",
                                             "ccl::training::Lamb: ", "ccl::training::Lars: "};
  for (size_t i = 0; i < all.size(); ++i) {
    Optimizer& o = *all[i];
    const std::string message = invalid_argument_of([&] { o.set_lr(-2); });
    EXPECT_TRUE(starts_with(message, prefixes[i])) << message;
    EXPECT_TRUE(contains(message, "lr = -2")) << message;
    EXPECT_EQ(o.lr(), 0.5);
    o.set_lr(0.125);
    EXPECT_EQ(o.lr(), 0.125);
  }
}

// The pointer checks every optimizer shares (the base's), through the base.
TEST(Optimizer, RejectsNullPointersAndChangedCountsBeforeChangingAnything) {
  std::vector<float> x(4, 1.0f), g(4, 0.5f);
  std::vector<std::unique_ptr<Optimizer>> all;
  all.push_back(std::make_unique<Sgd>(SgdOptions{.momentum = 0.9}));
  all.push_back(std::make_unique<Adam>(AdamOptions{}));
  for (auto& opt : all) {
    const std::vector<ParamRef> mixed = {{x.data(), g.data(), 4}, {x.data() + 1, nullptr, 3}};
    EXPECT_TRUE(contains(invalid_argument_of([&] { opt->step(mixed); }), "null grad"));
    EXPECT_EQ(x, std::vector<float>(4, 1.0f));
    EXPECT_EQ(opt->steps(), 0);
    EXPECT_EQ(opt->state_bytes(), 0u);
    const std::vector<ParamRef> first = {{x.data(), g.data(), 4}};
    opt->step(first);
    const std::vector<float> after_one = x;
    const std::vector<ParamRef> shorter = {{x.data(), g.data(), 3}};
    EXPECT_TRUE(
        contains(invalid_argument_of([&] { opt->step(shorter); }), "count 3, but it had 4"));
    EXPECT_EQ(x, after_one);
    EXPECT_EQ(opt->steps(), 1);
    std::fill(x.begin(), x.end(), 1.0f);
  }
}

TEST(Optimizer, StateBytesCountTheBuffers) {
  std::vector<float> a(10, 1.0f), b(6, 1.0f), g(10, 0.5f);
  const std::vector<ParamRef> p = {
      {a.data(), g.data(), 10}, {b.data(), g.data(), 6}, {nullptr, nullptr, 0}};
  Sgd plain(SgdOptions{}), momentum(SgdOptions{.momentum = 0.9});
  Adam adam(AdamOptions{});
  Lamb lamb(LambOptions{});
  Lars lars(LarsOptions{});
  std::vector<std::pair<Optimizer*, size_t>> expected = {
      {&plain, 0}, {&momentum, 16}, {&adam, 32}, {&lamb, 32}, {&lars, 16}};
  for (auto& [opt, floats] : expected) {
    EXPECT_EQ(opt->state_bytes(), 0u);
    opt->step(p);
    EXPECT_EQ(opt->state_bytes(), floats * sizeof(float));
  }
}

}  // namespace
