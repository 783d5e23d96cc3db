// The DDP reducer at 1, 2 and 4 ranks (threads of one process): the same parameters as one
// process on the whole batch, overlap, rebuilt buckets, no_sync, hooks, misuse.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "../support/rank_threads.h"
#include "ccl/training.hpp"

namespace {

using namespace ccl::training;

// A linear model whose weights are cut into tensors of these sizes (so they fill several buckets).
const std::vector<size_t> kSizes = {300, 200, 50, 400, 7};
constexpr size_t kFeatures = 957;  // the sum of kSizes
constexpr int kBatch = 8;          // samples per step, in all
constexpr int kSteps = 5;
constexpr float kLr = 0.05f;
const std::vector<size_t> kLimits = {1024, 2048};  // bytes: several buckets

std::vector<TensorSpec> specs() {
  std::vector<TensorSpec> s;
  for (size_t n : kSizes) s.push_back({n, cclFloat32});
  return s;
}

struct Sample {
  std::vector<float> x;
  float y;
};

Sample sample(int step, int i) {
  std::mt19937 gen(static_cast<unsigned>(step * 1000 + i));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Sample s{std::vector<float>(kFeatures), 0.0f};
  for (size_t f = 0; f < kFeatures; ++f) {
    s.x[f] = normal(gen);
    s.y += s.x[f] * (static_cast<float>(f % 7) - 3.0f) * 0.01f;
  }
  return s;
}

// d/dw of mean over samples [first, first + count) of (w·x − y)²/2, into grad (accumulates).
void add_gradient(const std::vector<float>& w, int step, int first, int count,
                  std::vector<float>& grad) {
  for (int i = first; i < first + count; ++i) {
    const Sample s = sample(step, i);
    double pred = 0;
    for (size_t f = 0; f < kFeatures; ++f) pred += w[f] * s.x[f];
    const auto r = static_cast<float>(pred - s.y);
    for (size_t f = 0; f < kFeatures; ++f) grad[f] += r * s.x[f] / static_cast<float>(count);
  }
}

std::vector<float> single_process_weights() {
  std::vector<float> w(kFeatures, 0.0f);
  for (int step = 0; step < kSteps; ++step) {
    std::vector<float> g(kFeatures, 0.0f);
    add_gradient(w, step, 0, kBatch, g);
    for (size_t f = 0; f < kFeatures; ++f) w[f] -= kLr * g[f];
  }
  return w;
}

class ReducerRanks : public testing::TestWithParam<int> {};

TEST_P(ReducerRanks, TrainsToTheParametersOfOneProcessOnTheWholeBatch) {
  const int n = GetParam();
  const auto expected = single_process_weights();
  ccl_test::run_ranks(n, [&](ccl::Communicator& comm) {
    const auto s = specs();
    Reducer reducer(comm, s, {.bucket_limits = kLimits});
    std::vector<float> w(kFeatures, 0.0f);
    const int shard = kBatch / n;
    for (int step = 0; step < kSteps; ++step) {
      std::vector<float> g(kFeatures, 0.0f);
      add_gradient(w, step, comm.rank() * shard, shard, g);
      reducer.zero_grad();
      // Backward: the last tensor's gradient is ready first; rank 0 uses another order, whose
      // buckets every rank must adopt after the first iteration.
      std::vector<size_t> order = {4, 3, 2, 1, 0};
      if (comm.rank() == 0) order = {2, 4, 0, 3, 1};
      size_t offset_of[5], off = 0;
      for (size_t t = 0; t < kSizes.size(); ++t) offset_of[t] = off, off += kSizes[t];
      for (size_t t : order) {
        auto view = reducer.grad_as<float>(t);
        std::copy(g.begin() + static_cast<long>(offset_of[t]),
                  g.begin() + static_cast<long>(offset_of[t] + kSizes[t]), view.begin());
        reducer.mark_ready(t);
      }
      reducer.wait();
      for (size_t t = 0; t < kSizes.size(); ++t) {
        auto view = reducer.grad_as<float>(t);
        for (size_t j = 0; j < kSizes[t]; ++j) w[offset_of[t] + j] -= kLr * view[j];
      }
      if (step == 0) {
        const std::vector<size_t> rank0 = {2, 4, 0, 3, 1};
        EXPECT_TRUE(reducer.rebuilt());
        EXPECT_EQ(reducer.buckets(), assign_buckets(s, kLimits, rank0));
      }
    }
    for (size_t f = 0; f < kFeatures; ++f) ASSERT_NEAR(w[f], expected[f], 1e-5) << "weight " << f;
    EXPECT_EQ(reducer.bytes_sent(), uint64_t{kSteps} * kFeatures * 4);
  });
}

TEST_P(ReducerRanks, ABucketsAllreduceRunsBeforeTheLastGradientIsMarked) {
  const int n = GetParam();
  ccl_test::run_ranks(n, [&](ccl::Communicator& comm) {
    const auto s = specs();
    Reducer reducer(comm, s, {.bucket_limits = kLimits, .rebuild_buckets = false});
    ASSERT_GE(reducer.buckets().size(), 3u);
    // The first bucket's parameters only: its allreduce must complete with no wait() called.
    for (size_t p : reducer.buckets()[0]) reducer.mark_ready(p);
    EXPECT_TRUE(reducer.bucket_launched(0));
    EXPECT_FALSE(reducer.bucket_launched(1));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!reducer.bucket_done(0) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_TRUE(reducer.bucket_done(0)) << "bucket 0 did not complete before the other marks";
    for (size_t b = 1; b < reducer.buckets().size(); ++b) {
      for (size_t p : reducer.buckets()[b]) reducer.mark_ready(p);
    }
    reducer.wait();
  });
}

TEST_P(ReducerRanks, NoSyncAccumulatesAndTheNextIterationReducesTheSum) {
  const int n = GetParam();
  ccl_test::run_ranks(n, [&](ccl::Communicator& comm) {
    const std::vector<TensorSpec> s = {{64, cclFloat32}, {32, cclFloat64}};
    Reducer reducer(comm, s);
    reducer.zero_grad();
    {
      Reducer::NoSync no_sync(reducer);
      for (auto& x : reducer.grad_as<float>(0)) x += static_cast<float>(comm.rank());
      for (auto& x : reducer.grad_as<double>(1)) x += 1.0;
      reducer.mark_ready(1);
      reducer.mark_ready(0);
      reducer.wait();  // nothing to wait for
      EXPECT_FALSE(reducer.bucket_launched(0));
    }
    for (auto& x : reducer.grad_as<float>(0)) x += 1.0f;
    for (auto& x : reducer.grad_as<double>(1)) x += static_cast<double>(comm.rank());
    reducer.mark_ready(1);
    reducer.mark_ready(0);
    reducer.wait();
    const double mean_rank = (n - 1) / 2.0;
    for (float x : reducer.grad_as<float>(0)) ASSERT_FLOAT_EQ(x, static_cast<float>(mean_rank + 1));
    for (double x : reducer.grad_as<double>(1)) ASSERT_DOUBLE_EQ(x, mean_rank + 1);
  });
}

TEST_P(ReducerRanks, HooksAverageThroughHalfPrecisionAndCompressors) {
  const int n = GetParam();
  ccl_test::run_ranks(n, [&](ccl::Communicator& comm) {
    const std::vector<TensorSpec> s = {{1000, cclFloat32}};
    for (CommHook hook : {CommHook::Fp16, CommHook::Bf16, CommHook::Compress}) {
      ReducerOptions o{.hook = hook};
      if (hook == CommHook::Compress)
        o.compressor = std::make_shared<TopK>(TopKOptions{.ratio = 1.0});
      Reducer reducer(comm, s, o);
      auto g = reducer.grad_as<float>(0);
      for (size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(i % 10) * 0.1f + comm.rank();
      reducer.mark_ready(0);
      reducer.wait();
      g = reducer.grad_as<float>(0);  // the first wait() rebuilt the buckets: a new view
      const double tol = hook == CommHook::Bf16 ? 3e-2 : hook == CommHook::Fp16 ? 5e-3 : 1e-6;
      for (size_t i = 0; i < g.size(); ++i) {
        ASSERT_NEAR(g[i], (i % 10) * 0.1 + (n - 1) / 2.0, tol) << "element " << i;
      }
      EXPECT_EQ(reducer.bytes_sent(), hook == CommHook::Compress ? 8000u : 2000u);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, ReducerRanks, testing::Values(1, 2, 4), ccl_test::ranks_name);

TEST(Reducer, RefusesMisuseWithClearErrors) {
  ccl_test::run_ranks(1, [&](ccl::Communicator& comm) {
    const std::vector<TensorSpec> s = {{4, cclFloat32}, {4, cclFloat32}};
    Reducer reducer(comm, s, {.bucket_limits = {8}});
    EXPECT_THROW(reducer.grad_as<double>(0), std::invalid_argument);
    EXPECT_THROW(reducer.mark_ready(2), std::out_of_range);
    reducer.mark_ready(1);
    EXPECT_THROW(reducer.mark_ready(1), std::logic_error);
    try {
      reducer.wait();
      ADD_FAILURE() << "wait with parameter 0 unmarked";
    } catch (const std::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find("not marked ready: 0"), std::string::npos) << e.what();
    }
    // The next iteration starts clean.
    reducer.mark_ready(0);
    reducer.mark_ready(1);
    reducer.wait();
    const std::vector<size_t> no_limits;
    EXPECT_THROW(Reducer(comm, s, {.bucket_limits = no_limits}), std::invalid_argument);
    EXPECT_THROW(Reducer(comm, s, {.hook = CommHook::Compress}), std::invalid_argument);
    const std::vector<TensorSpec> bad = {{4, static_cast<cclDataType_t>(42)}};
    EXPECT_THROW(Reducer(comm, bad), std::invalid_argument);
  });
}

}  // namespace
