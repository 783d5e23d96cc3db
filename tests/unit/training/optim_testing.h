// What the optimizer tests share: the same random numbers on every standard library, tensors of
// elements away from zero, the message of an expected std::invalid_argument, a comparison
// with a tolerance relative to a tensor's largest element, and a model's tensors as ParamRefs.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "ccl/training/optim.hpp"

namespace ccl_test {

// Uniform in [-1, 1) from mt19937's output, converted here rather than by a standard
// distribution, whose algorithm each standard library chooses: the same numbers everywhere.
inline float uniform(std::mt19937& rng) { return static_cast<float>(rng() >> 8) * 0x1p-23f - 1.0f; }

// A value in ±[lo, hi]: elements away from zero, so that a tolerance relative to a tensor's
// largest element is nearly one relative to each element.
inline float away_from_zero(std::mt19937& rng, float lo, float hi) {
  const float magnitude = lo + (hi - lo) * (uniform(rng) + 1) / 2;
  return uniform(rng) < 0 ? -magnitude : magnitude;
}

inline std::vector<float> random_tensor(std::mt19937& rng, size_t n, float lo, float hi) {
  std::vector<float> t(n);
  for (auto& e : t) e = away_from_zero(rng, lo, hi);
  return t;
}

// The message of the std::invalid_argument that `f` throws ("" and a failure if none).
template <class F>
std::string invalid_argument_of(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  ADD_FAILURE() << "no std::invalid_argument";
  return "";
}

inline bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}
inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Each element within `rel` of the tensor's largest magnitude: relative to each element alone
// would demand more than float can hold of an element that passes close to zero.
template <class Want>
void expect_close(const std::vector<float>& got, const std::vector<Want>& want, double rel,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0;
  for (const auto e : want) scale = std::max(scale, std::abs(static_cast<double>(e)));
  ASSERT_GT(scale, 0) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], static_cast<double>(want[i]), rel * scale) << what << " element " << i;
  }
}

// A model's parameter tensors, and which are left out of weight decay (biases, norms).
struct Model {
  std::vector<std::vector<float>> x;
  std::vector<bool> exclude;
};

// The model's tensors with these gradients, one ParamRef each.
inline std::vector<ccl::training::ParamRef> refs(Model& m, std::vector<std::vector<float>>& grads) {
  std::vector<ccl::training::ParamRef> r;
  for (size_t i = 0; i < m.x.size(); ++i) {
    r.push_back({.param = m.x[i].data(),
                 .grad = grads[i].data(),
                 .count = m.x[i].size(),
                 .exclude = m.exclude[i]});
  }
  return r;
}

}  // namespace ccl_test
