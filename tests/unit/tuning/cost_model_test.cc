// The cost model: availability rules, a few formulas checked by hand, determinism, and the
// shape and figures checks.
#include "core/tuning/cost_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/tuning/registry.h"
#include "tuning_test_util.h"

namespace ccl::tune {
namespace {

using test::error_of;
using test::many_hosts;
using test::one_host;

bool available(Collective c, Algorithm a, Protocol p, size_t bytes, const Shape& s,
               const char** why = nullptr) {
  return predict_us(c, a, p, bytes, s, default_figures(), why).has_value();
}

TEST(CostModel, NoLL128) {
  const Shape s = one_host(4, 1 << 20);
  for (Collective c : kCollectives) {
    for (Algorithm a : kAlgorithms) {
      const char* why = nullptr;
      EXPECT_FALSE(available(c, a, Protocol::LL128, 64, s, &why));
      EXPECT_STREQ(why, find_entry(c, a) != nullptr ? "no LL128 on host memory"
                                                    : "no such algorithm for this collective");
    }
  }
}

TEST(CostModel, DirectNeedsOneHostSharedMemoryAndTheWindow) {
  const Shape s = one_host(4, 4096);
  EXPECT_TRUE(available(Collective::AllReduce, Algorithm::Direct, Protocol::LL, 4096, s));
  EXPECT_TRUE(available(Collective::AllReduce, Algorithm::Direct, Protocol::Simple, 4096, s));
  EXPECT_FALSE(available(Collective::AllReduce, Algorithm::Direct, Protocol::LL, 4097, s));
  for (Collective c : {Collective::Broadcast, Collective::Reduce, Collective::AllGather}) {
    EXPECT_TRUE(available(c, Algorithm::Direct, Protocol::Simple, 100, s));
    EXPECT_FALSE(available(c, Algorithm::Direct, Protocol::LL, 100, s));
  }
  EXPECT_FALSE(available(Collective::ReduceScatter, Algorithm::Direct, Protocol::Simple, 100, s));

  Shape no_shm = s;
  no_shm.shm = false;
  Shape no_window = s;
  no_window.window_bytes = 0;
  Shape two_hosts = many_hosts(2, 2);
  two_hosts.window_bytes = 4096;  // inconsistent on purpose: the model still refuses
  for (const Shape& bad : {no_shm, no_window, two_hosts}) {
    const char* why = nullptr;
    EXPECT_FALSE(available(Collective::AllReduce, Algorithm::Direct, Protocol::LL, 8, bad, &why));
    EXPECT_NE(why, nullptr);
  }
}

TEST(CostModel, WhichAlgorithmServesWhichCollective) {
  const Shape s = many_hosts(2, 4);
  const auto ok = [&](Collective c, Algorithm a) {
    return available(c, a, Protocol::LL, 1 << 16, s);
  };
  for (Collective c : {Collective::AllReduce, Collective::Broadcast, Collective::Reduce,
                       Collective::AllGather, Collective::ReduceScatter}) {
    EXPECT_TRUE(ok(c, Algorithm::Ring));
  }
  // All-to-all and the barrier have their own algorithms (and the direct path on one host).
  EXPECT_TRUE(ok(Collective::AlltoAll, Algorithm::Pairwise));
  EXPECT_TRUE(ok(Collective::Barrier, Algorithm::Dissemination));
  for (Algorithm a : kAlgorithms) {
    if (a != Algorithm::Pairwise) {
      EXPECT_FALSE(ok(Collective::AlltoAll, a)) << algorithm_name(a);
    }
    if (a != Algorithm::Dissemination) {
      EXPECT_FALSE(ok(Collective::Barrier, a)) << algorithm_name(a);
    }
  }
  const Shape host = one_host(4, 1 << 20);
  EXPECT_TRUE(available(Collective::AlltoAll, Algorithm::Direct, Protocol::LL, 1 << 18, host));
  EXPECT_FALSE(available(Collective::AlltoAll, Algorithm::Direct, Protocol::LL, 1 << 19, host))
      << "4 ranks x 512 KiB blocks do not fit the 1 MiB window";
  EXPECT_TRUE(available(Collective::Barrier, Algorithm::Direct, Protocol::Simple, 0, host));
  EXPECT_TRUE(ok(Collective::AllReduce, Algorithm::Tree));
  EXPECT_TRUE(ok(Collective::Broadcast, Algorithm::Tree));
  EXPECT_TRUE(ok(Collective::Reduce, Algorithm::Tree));
  EXPECT_FALSE(ok(Collective::AllGather, Algorithm::Tree));
  EXPECT_FALSE(ok(Collective::ReduceScatter, Algorithm::Tree));
  for (Algorithm a :
       {Algorithm::RecursiveDoubling, Algorithm::Rabenseifner, Algorithm::Hierarchical}) {
    EXPECT_TRUE(ok(Collective::AllReduce, a));
    for (Collective c : {Collective::Broadcast, Collective::Reduce, Collective::AllGather,
                         Collective::ReduceScatter}) {
      EXPECT_FALSE(ok(c, a)) << algorithm_name(a) << " " << collective_name(c);
    }
  }
  // Recursive doubling and Rabenseifner have no chunked form.
  EXPECT_FALSE(
      available(Collective::AllReduce, Algorithm::RecursiveDoubling, Protocol::Simple, 1 << 16, s));
  EXPECT_FALSE(
      available(Collective::AllReduce, Algorithm::Rabenseifner, Protocol::Simple, 1 << 16, s));
  EXPECT_TRUE(
      available(Collective::AllReduce, Algorithm::Hierarchical, Protocol::Simple, 1 << 16, s));
}

TEST(CostModel, HierarchicalNeedsUniformHostsOfTwoRanksOrMore) {
  const auto hier = [](const Shape& s) {
    return available(Collective::AllReduce, Algorithm::Hierarchical, Protocol::LL, 1024, s);
  };
  EXPECT_TRUE(hier(many_hosts(2, 2)));
  EXPECT_FALSE(hier(one_host(8, 0)));    // one host
  EXPECT_FALSE(hier(many_hosts(4, 1)));  // one rank per host
  Shape uneven = many_hosts(2, 3);
  uneven.nranks = 5;
  uneven.uniform_hosts = false;
  EXPECT_FALSE(hier(uneven));
  EXPECT_TRUE(available(Collective::AllReduce, Algorithm::Ring, Protocol::LL, 1024, uneven));
}

TEST(CostModel, SimpleNeedsAChunkSize) {
  const Shape s = one_host(4, 0, /*chunk=*/0);
  const char* why = nullptr;
  EXPECT_FALSE(
      available(Collective::AllReduce, Algorithm::Ring, Protocol::Simple, 1 << 20, s, &why));
  EXPECT_STREQ(why, "no chunk size");
  EXPECT_TRUE(available(Collective::AllReduce, Algorithm::Ring, Protocol::LL, 1 << 20, s, &why));
  EXPECT_EQ(why, nullptr);
}

// alpha 1 us, 1 GB/s = 1000 B/us on every link, reduce at 1 GB/s.
constexpr double kAlpha = 1, kBeta = 1, kReduce = 1;

double predict(Collective c, Algorithm a, Protocol p, size_t bytes, const Shape& s,
               const Figures& f = test::uniform_figures(kAlpha, kBeta, kReduce)) {
  const std::optional<double> us = predict_us(c, a, p, bytes, s, f);
  EXPECT_TRUE(us.has_value());
  return us.value_or(-1);
}

TEST(CostModel, RingAllreduceByHand) {
  // n = 4, S = 4000: 2(n-1) steps of (alpha + 1000 B / 1000 B/us), (n-1) reductions of 1000 B.
  const Shape s = one_host(4, 0, 500);
  EXPECT_DOUBLE_EQ(predict(Collective::AllReduce, Algorithm::Ring, Protocol::LL, 4000, s),
                   6 * (1 + 1) + 3 * 1);
  // Simple: pieces of 1000 B in 2 chunks: one more alpha per step.
  EXPECT_DOUBLE_EQ(predict(Collective::AllReduce, Algorithm::Ring, Protocol::Simple, 4000, s),
                   6 * (2 + 1) + 3 * 1);
}

TEST(CostModel, ChainBroadcastPipelines) {
  // n = 3, S = 4000, chunk 1000: LL = 2 hops x (2 + 4); Simple = (2 + 4 - 1) x (2 + 1).
  const Shape s = one_host(3, 0, 1000);
  const Figures f = test::uniform_figures(2, kBeta, kReduce);
  EXPECT_DOUBLE_EQ(predict(Collective::Broadcast, Algorithm::Ring, Protocol::LL, 4000, s, f), 12);
  EXPECT_DOUBLE_EQ(predict(Collective::Broadcast, Algorithm::Ring, Protocol::Simple, 4000, s, f),
                   15);
  // Large messages in chunks large enough to hide alpha: pipelining wins.
  const Shape big = one_host(3, 0, 1 << 16);
  EXPECT_LT(predict(Collective::Broadcast, Algorithm::Ring, Protocol::Simple, 1 << 24, big, f),
            predict(Collective::Broadcast, Algorithm::Ring, Protocol::LL, 1 << 24, big, f));
}

TEST(CostModel, SimpleWithOneChunkIsExactlyLL) {
  const Shape s = many_hosts(2, 4, /*chunk=*/1 << 20);
  for (Collective c : kCollectives) {
    for (Algorithm a : {Algorithm::Ring, Algorithm::Tree, Algorithm::Hierarchical}) {
      const auto ll = predict_us(c, a, Protocol::LL, 4096, s, default_figures());
      const auto simple = predict_us(c, a, Protocol::Simple, 4096, s, default_figures());
      ASSERT_EQ(ll.has_value(), simple.has_value());
      if (ll) {
        EXPECT_EQ(*ll, *simple) << collective_name(c) << " " << algorithm_name(a);
      }
    }
  }
}

TEST(CostModel, DeterministicAndGrowingWithSize) {
  const Shape shapes[] = {one_host(2, 1 << 20), one_host(7, 1 << 20), many_hosts(3, 4),
                          many_hosts(2, 1)};
  for (const Shape& s : shapes) {
    const Shape copy = s;
    for (Collective c : kCollectives) {
      for (Algorithm a : kAlgorithms) {
        for (Protocol p : kProtocols) {
          double last = -1;
          for (size_t bytes = 0; bytes <= (size_t{1} << 26); bytes = bytes * 4 + 8) {
            const auto x = predict_us(c, a, p, bytes, s, default_figures());
            const auto y = predict_us(c, a, p, bytes, copy, default_figures());
            ASSERT_EQ(x.has_value(), y.has_value());
            if (!x) continue;
            EXPECT_EQ(std::memcmp(&*x, &*y, sizeof(double)), 0);  // bit-identical
            EXPECT_TRUE(std::isfinite(*x) && *x > 0);
            EXPECT_GE(*x, last) << collective_name(c) << " " << algorithm_name(a) << " "
                                << protocol_name(p) << " " << bytes;
            last = *x;
          }
        }
      }
    }
  }
}

TEST(CostModel, OneRankCostsNothing) {
  const Shape s = one_host(1, 0);
  for (const AlgorithmEntry* e : registry()) {
    const auto us =
        predict_us(e->collective, e->algorithm, Protocol::LL, 1 << 20, s, default_figures());
    if (us) {
      EXPECT_EQ(*us, 0.0) << collective_name(e->collective);
    }
  }
}

TEST(CostModel, ShapeAndFiguresAreChecked) {
  Shape bad = one_host(4, 0);
  bad.nranks = 0;
  EXPECT_EQ(error_of([&] { check_shape(bad); }).first, cclInvalidArgument);
  bad = many_hosts(2, 2);
  bad.nranks = 5;  // uniform hosts of 2 cannot hold 5
  EXPECT_EQ(error_of([&] { check_shape(bad); }).first, cclInvalidArgument);
  bad = many_hosts(3, 2);
  bad.nhosts = 4;
  EXPECT_EQ(error_of([&] { check_shape(bad); }).first, cclInvalidArgument);
  EXPECT_EQ(error_of([] { check_shape(many_hosts(3, 2)); }).first, 0);

  Figures f = default_figures();
  EXPECT_EQ(error_of([&] { check_figures(f, "x"); }).first, 0);
  f.net.alpha_us = -1;
  auto [code, message] = error_of([&] { check_figures(f, "x"); });
  EXPECT_EQ(code, cclInvalidArgument);
  EXPECT_NE(message.find("net.alpha_us"), std::string::npos) << message;
  f = default_figures();
  f.shm.beta_gbps = 0;
  EXPECT_EQ(error_of([&] { check_figures(f, "x"); }).first, cclInvalidArgument);
  f = default_figures();
  f.reduce_gbps = NAN;
  EXPECT_EQ(error_of([&] { check_figures(f, "x"); }).first, cclInvalidArgument);
}

}  // namespace
}  // namespace ccl::tune
