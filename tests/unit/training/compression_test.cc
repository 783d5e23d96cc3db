// The compressors against references written from their definitions (compression.hpp), at 1, 2
// and 4 ranks (threads with a real communicator), and the bytes each reports.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "../support/rank_threads.h"
#include "ccl/training.hpp"

namespace {

using namespace ccl::training;

// Rank r's deterministic gradient of d elements.
std::vector<float> gradient(int rank, size_t d, int round = 0) {
  std::mt19937 gen(static_cast<unsigned>(1000 * rank + 7 * round + 1));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> g(d);
  for (auto& x : g) x = normal(gen);
  return g;
}

class CompressionRanks : public testing::TestWithParam<int> {};

TEST_P(CompressionRanks, TopKAveragesEveryRanksLargestEntriesAndKeepsTheRestAsError) {
  const int n = GetParam();
  const size_t d = 1000;
  // Reference: each rank's top 10 by magnitude, summed and divided by n.
  std::vector<float> expected(d, 0.0f);
  for (int r = 0; r < n; ++r) {
    auto g = gradient(r, d);
    std::vector<size_t> idx(d);
    std::iota(idx.begin(), idx.end(), 0);
    std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
      return std::fabs(g[a]) > std::fabs(g[b]) || (std::fabs(g[a]) == std::fabs(g[b]) && a < b);
    });
    for (size_t j = 0; j < 10; ++j) expected[idx[j]] += g[idx[j]] / static_cast<float>(n);
  }
  ccl_test::run_ranks(n, [&](ccl::Communicator& comm) {
    TopK topk({.ratio = 0.01});
    auto g = gradient(comm.rank(), d);
    const auto original = g;
    topk.all_reduce(comm, 0, g);
    for (size_t i = 0; i < d; ++i) ASSERT_NEAR(g[i], expected[i], 1e-6) << "element " << i;
    // e' = p − Δ: the entries sent are 0 in the error, the others keep the gradient.
    auto e = topk.error(0);
    size_t zeros = 0;
    for (size_t i = 0; i < d; ++i) {
      if (e[i] == 0.0f) {
        ++zeros;
      } else {
        ASSERT_EQ(e[i], original[i]);
      }
    }
    EXPECT_EQ(zeros, 10u);
    EXPECT_EQ(topk.bytes_sent(), 10u * 8u);
  });
}

TEST_P(CompressionRanks, TopKWithFp16ValuesSendsSixBytesAnEntryAndKeepsTheRounding) {
  const int n = GetParam();
  ccl_test::run_ranks(n, [&](ccl::Communicator& comm) {
    TopK topk({.ratio = 0.1, .fp16_values = true});
    std::vector<float> g(50, 0.0f);
    g[7] = 1.0f + 1.0f / 4096.0f;  // not representable in fp16: rounds to 1
    topk.all_reduce(comm, 3, g);
    EXPECT_EQ(topk.bytes_sent(), 5u * 6u);
    EXPECT_FLOAT_EQ(g[7], 1.0f);
    EXPECT_FLOAT_EQ(topk.error(3)[7], 1.0f / 4096.0f);
  });
}

TEST_P(CompressionRanks, ScaledSignAveragesEveryRanksScaledSigns) {
  const int n = GetParam();
  const size_t d = 77;  // not a multiple of 8
  std::vector<double> expected(d, 0.0);
  for (int r = 0; r < n; ++r) {
    auto g = gradient(r, d);
    double l1 = 0;
    for (float x : g) l1 += std::fabs(x);
    for (size_t i = 0; i < d; ++i) expected[i] += (g[i] >= 0 ? 1 : -1) * l1 / d / n;
  }
  ccl_test::run_ranks(n, [&](ccl::Communicator& comm) {
    ScaledSign sign;
    auto g = gradient(comm.rank(), d);
    const auto original = g;
    sign.all_reduce(comm, 0, g);
    for (size_t i = 0; i < d; ++i) ASSERT_NEAR(g[i], expected[i], 1e-5) << "element " << i;
    EXPECT_EQ(sign.bytes_sent(), 4u + 10u);
    double l1 = 0;
    for (float x : original) l1 += std::fabs(x);
    const double scale = l1 / d;
    for (size_t i = 0; i < d; ++i) {
      ASSERT_NEAR(sign.error(0)[i], original[i] - (original[i] >= 0 ? scale : -scale), 1e-5);
    }
  });
}

// DeepSpeed's compressed allreduce, in double, for every rank at once.
std::vector<double> onebit_reference(int n, size_t d, int rounds, std::vector<float>* last_input) {
  const size_t unit = 8 * static_cast<size_t>(n), dp = (d + unit - 1) / unit * unit;
  const size_t chunk = dp / static_cast<size_t>(n);
  std::vector<std::vector<double>> ew(static_cast<size_t>(n), std::vector<double>(dp, 0.0));
  std::vector<std::vector<double>> es(static_cast<size_t>(n), std::vector<double>(chunk, 0.0));
  std::vector<double> result(dp);
  auto sgn = [](double x) { return x >= 0 ? 1.0 : -1.0; };
  for (int round = 0; round < rounds; ++round) {
    std::vector<std::vector<double>> sent(static_cast<size_t>(n), std::vector<double>(dp));
    for (int r = 0; r < n; ++r) {
      auto g = gradient(r, d, round);
      if (r == 0 && last_input != nullptr) *last_input = g;
      std::vector<double> p(dp, 0.0);
      for (size_t i = 0; i < d; ++i) p[i] = g[i] + ew[r][i];
      double sq = 0;
      for (double x : p) sq += x * x;
      const double s = std::sqrt(sq / dp);
      for (size_t i = 0; i < dp; ++i) {
        sent[r][i] = s * sgn(p[i]);
        ew[r][i] = i < d ? p[i] - sent[r][i] : 0.0;
      }
    }
    for (int j = 0; j < n; ++j) {
      std::vector<double> q(chunk, 0.0);
      for (int r = 0; r < n; ++r) {
        for (size_t i = 0; i < chunk; ++i) q[i] += sent[r][j * chunk + i] / n;
      }
      for (size_t i = 0; i < chunk; ++i) q[i] += es[j][i];
      double sq = 0;
      for (double x : q) sq += x * x;
      const double s = std::sqrt(sq / chunk);
      for (size_t i = 0; i < chunk; ++i) {
        result[j * chunk + i] = s * sgn(q[i]);
        es[j][i] = q[i] - result[j * chunk + i];
      }
    }
  }
  result.resize(d);
  return result;
}

TEST_P(CompressionRanks, OneBitMatchesDeepSpeedsTwoStageAllreduceOverRounds) {
  const int n = GetParam();
  const size_t d = 301;
  const int rounds = 3;
  const auto expected = onebit_reference(n, d, rounds, nullptr);
  ccl_test::run_ranks(n, [&](ccl::Communicator& comm) {
    OneBit onebit;
    std::vector<float> g;
    for (int round = 0; round < rounds; ++round) {
      g = gradient(comm.rank(), d, round);
      onebit.all_reduce(comm, 5, g);
    }
    for (size_t i = 0; i < d; ++i) ASSERT_NEAR(g[i], expected[i], 1e-4) << "element " << i;
    const size_t unit = 8 * static_cast<size_t>(n), dp = (d + unit - 1) / unit * unit;
    EXPECT_EQ(onebit.bytes_sent(), rounds * (dp / 8 + 4 + dp / 8 / n + 4));
    EXPECT_EQ(onebit.server_error(5).size(), dp / n);
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, CompressionRanks, testing::Values(1, 2, 4), ccl_test::ranks_name);

TEST(Compression, WithoutErrorFeedbackTheErrorStaysZero) {
  ccl_test::run_ranks(1, [&](ccl::Communicator& comm) {
    TopK topk({.ratio = 0.1});
    topk.set_error_feedback(false);
    auto g = gradient(0, 100);
    topk.all_reduce(comm, 0, g);
    for (float e : topk.error(0)) ASSERT_EQ(e, 0.0f);
  });
}

TEST(Compression, RefusesMisuseWithClearErrors) {
  ccl_test::run_ranks(1, [&](ccl::Communicator& comm) {
    TopK topk;
    std::vector<float> g(10, 1.0f), h(11, 1.0f);
    EXPECT_THROW(topk.finish(comm, 0, g), std::logic_error);  // no start
    topk.all_reduce(comm, 0, g);
    EXPECT_THROW(topk.all_reduce(comm, 0, h), std::invalid_argument);  // the count changed
  });
  EXPECT_THROW(TopK({.ratio = 0.0}), std::invalid_argument);
  EXPECT_THROW(make_compressor("topk:2"), std::invalid_argument);
  EXPECT_THROW(make_compressor("topk:x"), std::invalid_argument);
  EXPECT_THROW(make_compressor("zip"), std::invalid_argument);
  EXPECT_EQ(make_compressor("topk16:0.5")->name(), "topk16:0.500000");
  EXPECT_EQ(make_compressor("onebit")->name(), "onebit");
}

}  // namespace
