// LAMB, LARS and the learning-rate schedules (include/ccl/training/optim.hpp): steps against a
// double-precision reference written straight from the formulas and against cases worked out by
// hand, the argument checks, the schedules' values, and a small training run where 8x the batch
// at the linearly scaled learning rate with warm-up reaches the small batch's loss.
#include "ccl/training/optim.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "optim_testing.h"

namespace {

using ccl::training::Lamb;
using ccl::training::LambOptions;
using ccl::training::Lars;
using ccl::training::LarsOptions;
using ccl::training::linear_scaled_lr;
using ccl::training::ParamRef;
using ccl::training::WarmupPolyDecay;
using ccl_test::contains;
using ccl_test::expect_close;
using ccl_test::invalid_argument_of;
using ccl_test::Model;
using ccl_test::random_tensor;
using ccl_test::refs;
using ccl_test::starts_with;
using ccl_test::uniform;

double norm(const std::vector<double>& t) {
  double s = 0;
  for (const double e : t) s += e * e;
  return std::sqrt(s);
}

// --- The reference: one tensor's state in double, each formula as the header writes it. ---

struct RefTensor {
  std::vector<double> x, m, v;  // LARS keeps its momentum in m
  bool exclude = false;
};

RefTensor ref_tensor(const std::vector<float>& x, bool exclude) {
  RefTensor r;
  r.x.assign(x.begin(), x.end());
  r.m.assign(x.size(), 0.0);
  r.v.assign(x.size(), 0.0);
  r.exclude = exclude;
  return r;
}

// One LAMB step at step t (from 1); returns the trust ratio, and in x_norm ‖x‖ before the step.
double ref_lamb_step(RefTensor& p, const std::vector<float>& grad, int t, const LambOptions& o,
                     double* x_norm = nullptr) {
  const size_t n = p.x.size();
  const double lambda = p.exclude ? 0.0 : o.weight_decay;
  std::vector<double> u(n);
  for (size_t i = 0; i < n; ++i) {
    const double g = grad[i];
    p.m[i] = o.beta1 * p.m[i] + (1 - o.beta1) * g;
    p.v[i] = o.beta2 * p.v[i] + (1 - o.beta2) * g * g;
    const double m_hat = p.m[i] / (1 - std::pow(o.beta1, t));
    const double v_hat = p.v[i] / (1 - std::pow(o.beta2, t));
    u[i] = m_hat / (std::sqrt(v_hat) + o.eps) + lambda * p.x[i];
  }
  const double xn = norm(p.x), un = norm(u);
  if (x_norm != nullptr) *x_norm = xn;
  double r = 1.0;
  if (!p.exclude && xn != 0 && un != 0) r = std::min(xn, o.clamp) / un;
  for (size_t i = 0; i < n; ++i) p.x[i] -= o.lr * r * u[i];
  return r;
}

// One LARS step; returns the local learning rate.
double ref_lars_step(RefTensor& p, const std::vector<float>& grad, const LarsOptions& o) {
  const size_t n = p.x.size();
  const double lambda = p.exclude ? 0.0 : o.weight_decay;
  std::vector<double> g(grad.begin(), grad.end());
  const double xn = norm(p.x), gn = norm(g);
  double local_lr = 1.0;
  if (!p.exclude && xn != 0 && gn != 0) {
    local_lr = o.trust_coefficient * xn / (gn + lambda * xn + o.eps);
  }
  for (size_t i = 0; i < n; ++i) {
    p.m[i] = o.momentum * p.m[i] + o.lr * local_lr * (g[i] + lambda * p.x[i]);
    p.x[i] -= p.m[i];
  }
  return local_lr;
}

// The tensors of the comparisons: an odd size (the kernels' blocks and their tail), one whose
// norm is above LAMB's clamp, an excluded one, and one that starts at zero (ratio 1).
enum Tensor { kWeight, kBig, kBias, kZero, kTensors };

Model comparison_model(std::mt19937& rng) {
  Model m;
  m.x.push_back(random_tensor(rng, 37, 0.1f, 0.3f));   // ‖x‖ ≈ 1.3
  m.x.push_back(random_tensor(rng, 100, 0.5f, 1.0f));  // ‖x‖ ≈ 7.6, above the clamp of 2
  m.x.push_back(random_tensor(rng, 5, 0.1f, 0.3f));
  m.x.push_back(std::vector<float>(9, 0.0f));
  m.exclude = {false, false, true, false};
  return m;
}

TEST(Lamb, MatchesTheDoubleReferenceOverThreeSteps) {
  std::mt19937 rng(7);
  Model model = comparison_model(rng);
  const LambOptions o{
      .lr = 0.05, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.1, .clamp = 2.0};
  std::vector<RefTensor> ref;
  for (size_t i = 0; i < kTensors; ++i) ref.push_back(ref_tensor(model.x[i], model.exclude[i]));
  Lamb lamb(o);
  for (int t = 1; t <= 3; ++t) {
    std::vector<std::vector<float>> grads;
    for (const auto& x : model.x) grads.push_back(random_tensor(rng, x.size(), 0.1f, 1.0f));
    lamb.step(refs(model, grads));
    ASSERT_EQ(lamb.steps(), t);
    ASSERT_EQ(lamb.last_trust_ratios().size(), static_cast<size_t>(kTensors));
    for (size_t i = 0; i < kTensors; ++i) {
      double x_norm = 0;
      const double r = ref_lamb_step(ref[i], grads[i], t, o, &x_norm);
      const std::string what = "step " + std::to_string(t) + " tensor " + std::to_string(i);
      EXPECT_NEAR(lamb.last_trust_ratios()[i], r, 1e-6 * r) << what;
      expect_close(model.x[i], ref[i].x, 1e-6, what);
      if (i == kBig) {
        EXPECT_GT(x_norm, o.clamp) << what << ": the clamp case must be clamped";
      }
      if (i == kWeight) {
        EXPECT_LT(x_norm, o.clamp) << what;
      }
    }
    EXPECT_EQ(lamb.last_trust_ratios()[kBias], 1.0);  // excluded
    if (t == 1) {
      EXPECT_EQ(lamb.last_trust_ratios()[kZero], 1.0);  // ‖x‖ = 0
    } else {
      EXPECT_NE(lamb.last_trust_ratios()[kZero], 1.0);  // it has moved off zero
    }
  }
}

TEST(Lars, MatchesTheDoubleReferenceOverThreeSteps) {
  std::mt19937 rng(11);
  Model model = comparison_model(rng);
  const LarsOptions o{
      .lr = 0.5, .momentum = 0.9, .weight_decay = 0.01, .trust_coefficient = 0.02, .eps = 1e-8};
  std::vector<RefTensor> ref;
  for (size_t i = 0; i < kTensors; ++i) ref.push_back(ref_tensor(model.x[i], model.exclude[i]));
  Lars lars(o);
  for (int t = 1; t <= 3; ++t) {
    std::vector<std::vector<float>> grads;
    for (const auto& x : model.x) grads.push_back(random_tensor(rng, x.size(), 0.1f, 1.0f));
    lars.step(refs(model, grads));
    ASSERT_EQ(lars.steps(), t);
    for (size_t i = 0; i < kTensors; ++i) {
      const double local_lr = ref_lars_step(ref[i], grads[i], o);
      const std::string what = "step " + std::to_string(t) + " tensor " + std::to_string(i);
      EXPECT_NEAR(lars.last_trust_ratios()[i], local_lr, 1e-6 * local_lr) << what;
      expect_close(model.x[i], ref[i].x, 1e-6, what);
    }
    EXPECT_EQ(lars.last_trust_ratios()[kBias], 1.0);  // excluded
    if (t == 1) {
      EXPECT_EQ(lars.last_trust_ratios()[kZero], 1.0);  // ‖x‖ = 0
    }
    EXPECT_LT(lars.last_trust_ratios()[kWeight], 0.1) << "step " << t;  // η‖x‖/‖g‖ is small
  }
}

TEST(Lamb, OneElementByHand) {
  // lr 0.1, β1 0.9, β2 0.999, ε 1e-6, λ 0.01, clamp 10; x = 2, g = 0.5 at both steps.
  // Step 1: m = 0.05, v = 0.00025, m̂ = 0.05/0.1 = 0.5, v̂ = 0.00025/0.001 = 0.25,
  //   u = 0.5/(0.5 + 1e-6) + 0.01·2 = 1.019998000004, r = 2/u = 1.9607881584,
  //   x = 2 − 0.1·r·u = 2 − 0.1·2 = 1.8 (one element: r·u = min(|x|, clamp)).
  // Step 2: m = 0.095, v = 0.00049975, m̂ = 0.095/0.19 = 0.5, v̂ = 0.00049975/0.001999 = 0.25,
  //   u = 0.999998000004 + 0.018 = 1.017998000004, r = 1.8/u = 1.7681763618, x = 1.8 − 0.18 = 1.62.
  Lamb lamb(LambOptions{
      .lr = 0.1, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-6, .weight_decay = 0.01, .clamp = 10});
  float x = 2.0f;
  const float g = 0.5f;
  const ParamRef p{.param = &x, .grad = &g, .count = 1};
  lamb.step({&p, 1});
  EXPECT_NEAR(lamb.last_trust_ratios()[0], 1.9607881584, 1e-6);
  EXPECT_NEAR(x, 1.8, 1e-6);
  lamb.step({&p, 1});
  EXPECT_NEAR(lamb.last_trust_ratios()[0], 1.7681763618, 1e-6);
  EXPECT_NEAR(x, 1.62, 1e-6);
}

TEST(Lamb, OneElementAboveTheClampByHand) {
  // As above with x = 20: u = 0.999998000004 + 0.01·20 = 1.199998000004, r = min(20, 10)/u =
  // 8.3333472222, x = 20 − 0.1·10 = 19.
  Lamb lamb(LambOptions{
      .lr = 0.1, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-6, .weight_decay = 0.01, .clamp = 10});
  float x = 20.0f;
  const float g = 0.5f;
  const ParamRef p{.param = &x, .grad = &g, .count = 1};
  lamb.step({&p, 1});
  EXPECT_NEAR(lamb.last_trust_ratios()[0], 8.3333472222, 1e-6 * 8.3);
  EXPECT_NEAR(x, 19.0, 1e-5);
}

TEST(Lamb, AZeroGradientLeavesOnlyTheDecayEvenWithATinyEps) {
  // g = 0: m = v = 0, so u = 0/(0 + ε) + λ·x = λ·x (ε = 1e-50 is 0 as a float; it must not give
  // 0/0), r = ‖x‖/‖λ·x‖ = 1/λ = 100, x = 2 − 0.1·100·0.01·2 = 1.8.
  Lamb lamb(LambOptions{.lr = 0.1, .eps = 1e-50, .weight_decay = 0.01});
  float x = 2.0f;
  const float g = 0.0f;
  const ParamRef p{.param = &x, .grad = &g, .count = 1};
  lamb.step({&p, 1});
  EXPECT_NEAR(lamb.last_trust_ratios()[0], 100.0, 1e-4);
  EXPECT_NEAR(x, 1.8, 1e-6);
}

TEST(Lars, OneElementByHand) {
  // lr 0.1, μ 0.9, λ 0.01, η 0.001, ε 0; x = 2, g = 0.5 at both steps.
  // Step 1: local_lr = 0.001·2/(0.5 + 0.01·2) = 0.0038461538, v = 0.1·local_lr·(0.5 + 0.02) =
  //   0.0002, x = 1.9998.
  // Step 2: local_lr = 0.001·1.9998/(0.5 + 0.019998) = 0.0038457840,
  //   v = 0.9·0.0002 + 0.1·0.001·1.9998 = 0.00037998, x = 1.9998 − 0.00037998 = 1.99942002.
  Lars lars(LarsOptions{
      .lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .trust_coefficient = 0.001, .eps = 0});
  float x = 2.0f;
  const float g = 0.5f;
  const ParamRef p{.param = &x, .grad = &g, .count = 1};
  lars.step({&p, 1});
  EXPECT_NEAR(lars.last_trust_ratios()[0], 0.0038461538, 1e-10);
  EXPECT_NEAR(x, 1.9998, 1e-6);
  lars.step({&p, 1});
  EXPECT_NEAR(lars.last_trust_ratios()[0], 0.0038457840, 1e-10);
  EXPECT_NEAR(x, 1.99942002, 1e-6);
}

TEST(Lars, AnExcludedParameterIsPlainMomentumSgd) {
  // v = 0.9·v + 0.1·g; x −= v: g = 1 twice gives v = 0.1 then 0.19, x = 1 − 0.1 − 0.19 = 0.71.
  Lars lars(LarsOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.5});
  float x = 1.0f;
  const float g = 1.0f;
  const ParamRef p{.param = &x, .grad = &g, .count = 1, .exclude = true};
  lars.step({&p, 1});
  lars.step({&p, 1});
  EXPECT_NEAR(x, 0.71, 1e-6);
  EXPECT_EQ(lars.last_trust_ratios()[0], 1.0);
}

TEST(Lamb, StateFollowsThePointerNotThePosition) {
  std::mt19937 rng(3);
  const std::vector<float> a0 = random_tensor(rng, 20, 0.5f, 1.0f);
  const std::vector<float> b0 = random_tensor(rng, 12, 0.5f, 1.0f);
  const std::vector<float> ga = random_tensor(rng, 20, 0.1f, 1.0f);
  const std::vector<float> gb = random_tensor(rng, 12, 0.1f, 1.0f);
  std::vector<float> a1 = a0, b1 = b0, a2 = a0, b2 = b0;
  Lamb in_order(LambOptions{}), swapped(LambOptions{});
  const std::vector<ParamRef> p1 = {{a1.data(), ga.data(), 20}, {b1.data(), gb.data(), 12}};
  const std::vector<ParamRef> p2 = {{a2.data(), ga.data(), 20}, {b2.data(), gb.data(), 12}};
  const std::vector<ParamRef> p2_swapped = {p2[1], p2[0]};
  in_order.step(p1);
  swapped.step(p2);
  in_order.step(p1);
  swapped.step(p2_swapped);
  EXPECT_EQ(a1, a2);
  EXPECT_EQ(b1, b2);
  // The ratios come in argument order.
  EXPECT_EQ(swapped.last_trust_ratios()[0], in_order.last_trust_ratios()[1]);
  EXPECT_EQ(swapped.last_trust_ratios()[1], in_order.last_trust_ratios()[0]);
  EXPECT_NE(a1, a0);
}

// --- Argument checks. ---

struct BadOption {
  const char* text;  // what the message must hold: the field and its value
  LambOptions lamb;
};

TEST(Lamb, RejectsEachOptionOutOfRange) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<BadOption> cases = {
      {"lr = -0.5", {.lr = -0.5}},
      {"lr = nan", {.lr = nan}},
      {"beta1 = -0.1", {.beta1 = -0.1}},
      {"beta1 = 1", {.beta1 = 1.0}},
      {"beta2 = 1", {.beta2 = 1.0}},
      {"beta2 = -1", {.beta2 = -1.0}},
      {"eps = 0", {.eps = 0.0}},
      {"eps = -1e-08", {.eps = -1e-8}},
      {"weight_decay = -0.01", {.weight_decay = -0.01}},
      {"clamp = 0", {.clamp = 0.0}},
      {"clamp = -3", {.clamp = -3.0}},
  };
  for (const auto& c : cases) {
    const std::string message = invalid_argument_of([&] { Lamb{c.lamb}; });
    EXPECT_TRUE(starts_with(message, "ccl::training::Lamb: ")) << message;
    EXPECT_TRUE(contains(message, c.text)) << message << " (expected " << c.text << ")";
  }
  EXPECT_NO_THROW((Lamb{LambOptions{.lr = 0, .beta1 = 0, .beta2 = 0, .weight_decay = 0}}));
}

TEST(Lamb, SetLrChecksAndKeepsTheOldRateOnError) {
  Lamb lamb(LambOptions{.lr = 0.01});
  const std::string message = invalid_argument_of([&] { lamb.set_lr(-1); });
  EXPECT_TRUE(starts_with(message, "ccl::training::Lamb: ")) << message;
  EXPECT_TRUE(contains(message, "lr = -1")) << message;
  EXPECT_EQ(lamb.lr(), 0.01);
  lamb.set_lr(0.25);
  EXPECT_EQ(lamb.lr(), 0.25);
}

TEST(Lars, RejectsEachOptionOutOfRange) {
  struct Case {
    const char* text;
    LarsOptions options;
  };
  const std::vector<Case> cases = {
      {"lr = -1", {.lr = -1}},
      {"momentum = 1", {.momentum = 1}},
      {"momentum = -0.5", {.momentum = -0.5}},
      {"weight_decay = -0.001", {.weight_decay = -0.001}},
      {"trust_coefficient = 0", {.trust_coefficient = 0}},
      {"trust_coefficient = -0.1", {.trust_coefficient = -0.1}},
      {"eps = -1", {.eps = -1}},
  };
  for (const auto& c : cases) {
    const std::string message = invalid_argument_of([&] { Lars{c.options}; });
    EXPECT_TRUE(starts_with(message, "ccl::training::Lars: ")) << message;
    EXPECT_TRUE(contains(message, c.text)) << message << " (expected " << c.text << ")";
  }
  Lars lars(LarsOptions{});
  const std::string message = invalid_argument_of([&] { lars.set_lr(-0.1); });
  EXPECT_TRUE(contains(message, "lr = -0.1")) << message;
  EXPECT_EQ(lars.lr(), LarsOptions{}.lr);
  EXPECT_NO_THROW((Lars{LarsOptions{.lr = 0, .momentum = 0, .weight_decay = 0}}));
}

// The same pointer checks for both optimizers.
template <class Optimizer, class Options>
void check_step_arguments(const std::string& prefix) {
  std::vector<float> x(4, 1.0f), g(4, 0.5f), y(3, 1.0f), gy(3, 0.5f);
  {
    Optimizer opt(Options{});
    const std::vector<ParamRef> null_param = {{nullptr, g.data(), 4}};
    const std::string m1 = invalid_argument_of([&] { opt.step(null_param); });
    EXPECT_TRUE(starts_with(m1, prefix)) << m1;
    EXPECT_TRUE(contains(m1, "null param")) << m1;
    const std::vector<ParamRef> null_grad = {{x.data(), nullptr, 4}};
    const std::string m2 = invalid_argument_of([&] { opt.step(null_grad); });
    EXPECT_TRUE(contains(m2, "null grad")) << m2;
    EXPECT_EQ(opt.steps(), 0);
    // Empty parameters may have null pointers.
    const std::vector<ParamRef> empty = {{nullptr, nullptr, 0}};
    EXPECT_NO_THROW(opt.step(empty));
    EXPECT_EQ(opt.last_trust_ratios(), std::vector<double>{1.0});
  }
  {
    // A bad parameter after a good one: the call throws before changing anything.
    Optimizer opt(Options{});
    const std::vector<ParamRef> mixed = {{x.data(), g.data(), 4}, {y.data(), nullptr, 3}};
    invalid_argument_of([&] { opt.step(mixed); });
    EXPECT_EQ(x, std::vector<float>(4, 1.0f));
    EXPECT_EQ(opt.steps(), 0);
  }
  {
    // A known pointer whose count changed is named in the message; nothing changes.
    Optimizer opt(Options{});
    const std::vector<ParamRef> first = {{x.data(), g.data(), 4}};
    opt.step(first);
    const std::vector<float> after_one = x;
    const std::vector<ParamRef> shorter = {{x.data(), g.data(), 3}};
    const std::string m = invalid_argument_of([&] { opt.step(shorter); });
    std::ostringstream pointer;
    pointer << static_cast<const void*>(x.data());
    EXPECT_TRUE(starts_with(m, prefix)) << m;
    EXPECT_TRUE(contains(m, pointer.str())) << m << " (expected " << pointer.str() << ")";
    EXPECT_EQ(x, after_one);
    EXPECT_EQ(opt.steps(), 1);
    EXPECT_NO_THROW(opt.step(first));
  }
  {
    // The same new pointer twice with two counts in one call.
    Optimizer opt(Options{});
    const std::vector<ParamRef> twice = {{x.data(), g.data(), 4}, {x.data(), g.data(), 3}};
    invalid_argument_of([&] { opt.step(twice); });
    const std::vector<ParamRef> three = {{x.data(), g.data(), 3}};
    EXPECT_NO_THROW(opt.step(three)) << "the failed call must not have recorded a count";
  }
}

TEST(Lamb, RejectsNullPointersAndChangedCounts) {
  check_step_arguments<Lamb, LambOptions>("ccl::training::Lamb: ");
}

TEST(Lars, RejectsNullPointersAndChangedCounts) {
  check_step_arguments<Lars, LarsOptions>("ccl::training::Lars: ");
}

// --- Schedules. ---

TEST(LinearScaledLr, ScalesWithTheBatch) {
  EXPECT_DOUBLE_EQ(linear_scaled_lr(0.1, 256, 32), 0.8);
  EXPECT_DOUBLE_EQ(linear_scaled_lr(0.1, 16, 32), 0.05);
  EXPECT_DOUBLE_EQ(linear_scaled_lr(0.1, 32, 32), 0.1);
  EXPECT_THROW(linear_scaled_lr(0.1, 32, 0), std::invalid_argument);
}

TEST(WarmupPolyDecay, WarmsUpLinearlyThenDecaysPolynomially) {
  // Warm-up over 4 steps to 1.0, then (1 − 0.1)·(1 − (s − 4)/8)² + 0.1 until step 12.
  const WarmupPolyDecay s{
      .peak_lr = 1.0, .warmup_steps = 4, .total_steps = 12, .power = 2.0, .end_lr = 0.1};
  EXPECT_DOUBLE_EQ(s(0), 0.25);
  EXPECT_DOUBLE_EQ(s(1), 0.5);
  EXPECT_DOUBLE_EQ(s(3), 1.0);  // the last warm-up step reaches the peak
  EXPECT_DOUBLE_EQ(s(4), 1.0);  // the decay starts from it
  EXPECT_DOUBLE_EQ(s(6), 0.9 * 0.75 * 0.75 + 0.1);
  EXPECT_DOUBLE_EQ(s(8), 0.9 * 0.25 + 0.1);  // half-way: (1/2)²
  EXPECT_DOUBLE_EQ(s(11), 0.9 / 64 + 0.1);
  EXPECT_DOUBLE_EQ(s(12), 0.1);
  EXPECT_DOUBLE_EQ(s(1000), 0.1);
}

TEST(WarmupPolyDecay, EdgeCases) {
  // No warm-up: step 0 at the peak; linear decay by default.
  const WarmupPolyDecay linear{.peak_lr = 2.0, .warmup_steps = 0, .total_steps = 4};
  EXPECT_DOUBLE_EQ(linear(0), 2.0);
  EXPECT_DOUBLE_EQ(linear(1), 1.5);
  EXPECT_DOUBLE_EQ(linear(4), 0.0);
  // Warm-up only: from warmup_steps (== total_steps) on, end_lr.
  const WarmupPolyDecay warm_only{
      .peak_lr = 1.0, .warmup_steps = 4, .total_steps = 4, .end_lr = 0.01};
  EXPECT_DOUBLE_EQ(warm_only(3), 1.0);
  EXPECT_DOUBLE_EQ(warm_only(4), 0.01);
  EXPECT_DOUBLE_EQ(warm_only(5), 0.01);
  // Power 0: the peak until total_steps.
  const WarmupPolyDecay constant{
      .peak_lr = 1.0, .warmup_steps = 2, .total_steps = 10, .power = 0.0};
  EXPECT_DOUBLE_EQ(constant(9), 1.0);
  EXPECT_DOUBLE_EQ(constant(10), 0.0);
}

TEST(WarmupPolyDecay, RejectsBadSchedules) {
  EXPECT_THROW((WarmupPolyDecay{.peak_lr = 1, .warmup_steps = 5, .total_steps = 4})(0),
               std::invalid_argument);
  EXPECT_THROW((WarmupPolyDecay{.peak_lr = 1, .warmup_steps = -1, .total_steps = 4})(0),
               std::invalid_argument);
  EXPECT_THROW((WarmupPolyDecay{.peak_lr = 1, .total_steps = 4, .power = -1})(0),
               std::invalid_argument);
  EXPECT_THROW((WarmupPolyDecay{.peak_lr = 1, .total_steps = 4, .power = std::nan("")})(0),
               std::invalid_argument);
  EXPECT_THROW((WarmupPolyDecay{.peak_lr = 1, .total_steps = 4})(-1), std::invalid_argument);
}

// --- Large batches: linear scaling with warm-up. ---
//
// Linear regression y = w*·a + b* + noise, 32 features, trained with LAMB (the weight adapted
// layer-wise, the bias excluded) over one pass of the same 8192 samples: batch 8 for 1024 steps
// at lr0 decaying linearly to 0, and batch 64 for 128 steps at linear_scaled_lr(lr0, 64, 8) with
// 8 steps of warm-up, then the same decay. The loss is the mean squared error against the
// noise-free targets on held-out samples.
//
// The budget (one pass, lr0 = 0.003) leaves training limited by how far the steps go, not by the
// gradient noise, which is the regime where the linear rule holds for LAMB: its steps have a
// norm of lr·min(‖x‖, clamp) whatever the batch, so 128 steps of 8·lr0 travel as far as 1024 of
// lr0, along better directions. Trained to its noise floor instead (lr0 = 0.005 or 0.01 here), the
// small batch ends 1.6-4.6x below the scaled large batch: fewer steps of a fixed norm anneal less.
// Over seeds 1-30 of this test (the data, w* and w0 drawn anew), every assertion below held:
// the large batch ended at 0.29-0.83x the small batch's loss; without warm-up it ended higher
// in all 30, but by 1-60% (here, seed 1, by 36%), so only "higher" is asserted.

constexpr size_t kFeatures = 32;

struct Regression {
  std::vector<float> a, y, clean;  // samples × kFeatures features, noisy and clean targets
};

Regression regression_samples(std::mt19937& rng, size_t n, const std::vector<float>& w, float b) {
  Regression d;
  d.a.resize(n * kFeatures);
  d.y.resize(n);
  d.clean.resize(n);
  for (size_t i = 0; i < n; ++i) {
    double target = b;
    for (size_t j = 0; j < kFeatures; ++j) {
      d.a[i * kFeatures + j] = uniform(rng);
      target += w[j] * d.a[i * kFeatures + j];
    }
    d.clean[i] = static_cast<float>(target);
    d.y[i] = static_cast<float>(target + 0.5 * uniform(rng));
  }
  return d;
}

double predict(const float* a, const std::vector<float>& w, float b) {
  double p = b;
  for (size_t j = 0; j < kFeatures; ++j) p += w[j] * a[j];
  return p;
}

double test_loss(const Regression& test, const std::vector<float>& w, float b) {
  double loss = 0;
  for (size_t i = 0; i < test.clean.size(); ++i) {
    const double e = predict(&test.a[i * kFeatures], w, b) - test.clean[i];
    loss += 0.5 * e * e;
  }
  return loss / static_cast<double>(test.clean.size());
}

// Trains from w0 (bias 0) on train's samples in order, batch after batch; the final test loss.
double train(const Regression& train, const Regression& test, const std::vector<float>& w0,
             size_t batch, int64_t steps, const WarmupPolyDecay& schedule) {
  std::vector<float> w = w0, gw(kFeatures);
  float b = 0, gb = 0;
  const std::vector<ParamRef> params = {{w.data(), gw.data(), kFeatures},
                                        {&b, &gb, 1, /*exclude=*/true}};
  Lamb lamb(LambOptions{.lr = schedule(0), .weight_decay = 0.0});
  std::vector<double> g(kFeatures);
  for (int64_t s = 0; s < steps; ++s) {
    std::fill(g.begin(), g.end(), 0.0);
    double g_bias = 0;
    for (size_t k = 0; k < batch; ++k) {
      const size_t i = static_cast<size_t>(s) * batch + k;
      const float* a = &train.a[i * kFeatures];
      const double e = predict(a, w, b) - train.y[i];  // d(e²/2)/dprediction
      for (size_t j = 0; j < kFeatures; ++j) g[j] += e * a[j];
      g_bias += e;
    }
    for (size_t j = 0; j < kFeatures; ++j) gw[j] = static_cast<float>(g[j] / batch);
    gb = static_cast<float>(g_bias / batch);
    lamb.set_lr(schedule(s));
    lamb.step(params);
  }
  return test_loss(test, w, b);
}

TEST(LargeBatch, LinearScalingWithWarmupReachesTheSmallBatchLoss) {
  constexpr size_t kBatch = 8, kScale = 8;
  constexpr int64_t kSteps = 1024;
  constexpr double kLr0 = 0.003;
  std::mt19937 rng(1);
  std::vector<float> w_true(kFeatures), w0(kFeatures);
  for (auto& e : w_true) e = uniform(rng);
  for (auto& e : w0) e = uniform(rng);  // as far from w_true as w_true is from 0
  const Regression train_set = regression_samples(rng, kBatch * kSteps, w_true, 0.5f);
  const Regression test_set = regression_samples(rng, 2048, w_true, 0.5f);
  const double initial = test_loss(test_set, w0, 0);

  const double small =
      train(train_set, test_set, w0, kBatch, kSteps,
            WarmupPolyDecay{.peak_lr = kLr0, .warmup_steps = 0, .total_steps = kSteps});
  const double scaled_lr = linear_scaled_lr(kLr0, kScale * kBatch, kBatch);
  ASSERT_DOUBLE_EQ(scaled_lr, 8 * kLr0);
  const int64_t large_steps = kSteps / kScale;
  const double large =
      train(train_set, test_set, w0, kScale * kBatch, large_steps,
            WarmupPolyDecay{.peak_lr = scaled_lr, .warmup_steps = 8, .total_steps = large_steps});
  const double no_warmup =
      train(train_set, test_set, w0, kScale * kBatch, large_steps,
            WarmupPolyDecay{.peak_lr = scaled_lr, .warmup_steps = 0, .total_steps = large_steps});
  const double unscaled =
      train(train_set, test_set, w0, kScale * kBatch, large_steps,
            WarmupPolyDecay{.peak_lr = kLr0, .warmup_steps = 8, .total_steps = large_steps});
  std::cout << "test loss: initial " << initial << ", batch " << kBatch << " " << small
            << ", batch " << kScale * kBatch << " with warm-up " << large << ", without "
            << no_warmup << ", at the unscaled lr " << unscaled << "\n";

  EXPECT_LT(small, initial / 4) << "the small batch must have learned something";
  // Within 10% of the small batch's loss, or below it.
  EXPECT_LE(large, 1.10 * small);
  // Without warm-up it ends higher (here by a third).
  EXPECT_GT(no_warmup, large);
  // The scaling is what makes up for the fewer steps: at the unscaled lr0 the large batch falls
  // far short (its 128 steps travel an eighth as far).
  EXPECT_GT(unscaled, 2 * small);
}

}  // namespace
