// The tuner's choice: choices that hold by construction of the model, CCL_ALGO/CCL_PROTO
// exclusions and the fallback, ties, the reason and the cost table.
#include "core/tuning/tuner.h"

#include <gtest/gtest.h>

#include "core/tuning/registry.h"
#include "tuning_test_util.h"

namespace ccl::tune {
namespace {

using test::error_of;
using test::many_hosts;
using test::one_host;

constexpr size_t kMiB = 1 << 20;

std::string pair(const Choice& c) {
  return std::string(algorithm_name(c.algorithm)) + "/" + protocol_name(c.protocol);
}

TEST(Tuner, LatencyBoundPicksTheFewestRounds) {
  // Huge alpha, (nearly) free bytes: recursive doubling's log2(8) = 3 rounds beat the tree's 9,
  // Rabenseifner's 6 and the ring's 14; no direct path.
  const Tuner tuner(one_host(8, 0), test::uniform_figures(1000, 1e6, 1e6), Selection());
  const Choice c = tuner.choose(Collective::AllReduce, 8);
  EXPECT_EQ(pair(c), "recursive_doubling/LL");
  EXPECT_FALSE(c.fallback);
  // Broadcast: the binary tree's 3 levels beat the chain's 7 hops.
  EXPECT_EQ(tuner.choose(Collective::Broadcast, 8).algorithm, Algorithm::Tree);
}

TEST(Tuner, DirectWinsSmallMessagesOnOneHost) {
  Figures f = test::uniform_figures(5, 8, 8);
  f.direct.alpha_us = 0.5;
  const Tuner tuner(one_host(4, 4 * kMiB), f, Selection());
  for (Collective c :
       {Collective::AllReduce, Collective::Broadcast, Collective::Reduce, Collective::AllGather}) {
    EXPECT_EQ(tuner.choose(c, 64).algorithm, Algorithm::Direct) << collective_name(c);
  }
  // Beyond the window the direct path does not exist.
  EXPECT_NE(tuner.choose(Collective::AllReduce, 4 * kMiB + 1).algorithm, Algorithm::Direct);
  // One-shot for tiny messages: one synchronisation instead of two.
  EXPECT_EQ(tuner.choose(Collective::AllReduce, 64).protocol, Protocol::LL);
  EXPECT_EQ(tuner.choose(Collective::AllReduce, 64).chunk_bytes, 0u);
}

TEST(Tuner, RingWinsLargeMessagesOnAFlatNetwork) {
  // Not a power of two: Rabenseifner and recursive doubling pay a fold of the whole vector; the
  // tree moves 2S per rank against the ring's 2(n-1)/n S. (With a power of two, Rabenseifner
  // moves the ring's bytes in fewer rounds, and the model prefers it.)
  const Tuner tuner(one_host(6, 0), test::uniform_figures(5, 8, 8), Selection());
  EXPECT_EQ(tuner.choose(Collective::AllReduce, 64 * kMiB).algorithm, Algorithm::Ring)
      << tuner.cost_table(Collective::AllReduce, 64 * kMiB);
}

TEST(Tuner, ALaterAlgorithmMustWinByTheMargin) {
  // 4 ranks: Rabenseifner moves the ring's bytes in 4 rounds instead of 6, so with a small
  // alpha it is predicted barely faster, which is not enough to displace the ring; with a large
  // alpha its fewer rounds win by more than the margin.
  const Shape shape = one_host(4, 0);
  const Tuner close(shape, test::uniform_figures(0.01, 8, 8), Selection());
  const CostModel model(shape, test::uniform_figures(0.01, 8, 8));
  const double ring =
      *model.predict_us(Collective::AllReduce, Algorithm::Ring, Protocol::LL, 64 * kMiB);
  const double rab =
      *model.predict_us(Collective::AllReduce, Algorithm::Rabenseifner, Protocol::LL, 64 * kMiB);
  ASSERT_LT(rab, ring);
  ASSERT_GT(rab * 1.15, ring);
  EXPECT_EQ(close.choose(Collective::AllReduce, 64 * kMiB).algorithm, Algorithm::Ring);
  const Tuner far(shape, test::uniform_figures(1000, 8, 8), Selection());
  EXPECT_NE(far.choose(Collective::AllReduce, 1024).algorithm, Algorithm::Ring)
      << far.cost_table(Collective::AllReduce, 1024);
}

TEST(Tuner, HierarchicalWinsLargeMessagesOverASlowNetwork) {
  Figures f;
  f.shm = {0.1, 100};
  f.net = {10, 1};
  f.direct = {0.1, 100};
  f.reduce_gbps = 100;
  const Tuner tuner(many_hosts(2, 4), f, Selection());
  EXPECT_EQ(tuner.choose(Collective::AllReduce, 64 * kMiB).algorithm, Algorithm::Hierarchical)
      << tuner.cost_table(Collective::AllReduce, 64 * kMiB);
}

TEST(Tuner, PipelinedChainForLargeBroadcasts) {
  const Selection ring_only = Selection::parse("ring", "");
  const Tuner tuner(one_host(8, 0, kMiB), test::uniform_figures(5, 8, 8), ring_only);
  const Choice big = tuner.choose(Collective::Broadcast, 64 * kMiB);
  EXPECT_EQ(pair(big), "ring/Simple");
  EXPECT_EQ(big.chunk_bytes, kMiB);
  // One chunk: Simple costs what LL costs and LL is preferred.
  const Choice small = tuner.choose(Collective::Broadcast, 4096);
  EXPECT_EQ(pair(small), "ring/LL");
  EXPECT_EQ(small.chunk_bytes, 0u);
}

// Over many shapes, sizes and collectives: excluding the unrestricted choice's algorithm (or
// protocol) never yields it, and falls back only when nothing else is available.
TEST(Tuner, ExcludedNeverChosen) {
  const Shape shapes[] = {one_host(2, kMiB), one_host(5, kMiB), one_host(8, 0), many_hosts(2, 4),
                          many_hosts(3, 1)};
  for (const Shape& s : shapes) {
    const Tuner free(s, default_figures(), Selection());
    for (Collective c : kCollectives) {
      for (size_t bytes = 0; bytes <= 256 * kMiB; bytes = bytes * 8 + 1) {
        const Choice u = free.choose(c, bytes);
        const std::string coll = collective_name(c);
        const Tuner no_algo(s, default_figures(),
                            Selection::parse(coll + ":^" + algorithm_name(u.algorithm), ""));
        const Choice x = no_algo.choose(c, bytes);
        bool other = false;
        for (Algorithm a : kAlgorithms) {
          for (Protocol p : kProtocols) {
            other |= a != u.algorithm && predict_us(c, a, p, bytes, s, default_figures());
          }
        }
        EXPECT_EQ(x.fallback, !other);
        if (!x.fallback) {
          EXPECT_NE(x.algorithm, u.algorithm) << coll << " " << bytes;
        }

        const Tuner no_proto(s, default_figures(),
                             Selection::parse("", coll + ":^" + protocol_name(u.protocol)));
        const Choice y = no_proto.choose(c, bytes);
        if (!y.fallback) {
          EXPECT_NE(y.protocol, u.protocol) << coll << " " << bytes;
        }
      }
    }
  }
}

TEST(Tuner, FallsBackWhenTheSelectionLeavesNothing) {
  const Tuner tuner(one_host(4, kMiB), default_figures(), Selection::parse("allgather:tree", ""));
  const Choice c = tuner.choose_explained(Collective::AllGather, 1024);
  EXPECT_TRUE(c.fallback);
  EXPECT_EQ(c.reason.rfind("CCL_ALGO/CCL_PROTO allow nothing available for allgather at 1024 B; "
                           "using ",
                           0),
            0u)
      << c.reason;
  const Tuner free(one_host(4, kMiB), default_figures(), Selection());
  EXPECT_EQ(pair(c), pair(free.choose(Collective::AllGather, 1024)));
  // Other collectives are not affected.
  EXPECT_FALSE(tuner.choose(Collective::AllReduce, 1024).fallback);

  const Tuner ll128(one_host(4, kMiB), default_figures(), Selection::parse("", "LL128"));
  for (Collective coll : kCollectives) EXPECT_TRUE(ll128.choose(coll, 64).fallback);
}

TEST(Tuner, ReasonAndExplainedChoiceAgree) {
  const Tuner tuner(many_hosts(2, 4), default_figures(), Selection());
  for (Collective c : kCollectives) {
    for (size_t bytes = 1; bytes <= 64 * kMiB; bytes *= 16) {
      const Choice quick = tuner.choose(c, bytes);
      const Choice told = tuner.choose_explained(c, bytes);
      EXPECT_TRUE(quick.reason.empty());
      EXPECT_EQ(pair(quick), pair(told));
      EXPECT_EQ(quick.predicted_us, told.predicted_us);
      EXPECT_EQ(quick.chunk_bytes, told.chunk_bytes);
      EXPECT_EQ(told.reason.rfind(pair(told) + " ", 0), 0u) << told.reason;
      EXPECT_NE(told.reason.find("(next best)"), std::string::npos) << told.reason;
    }
  }
  const Tuner only(one_host(4, 0), default_figures(), Selection::parse("ring", "LL"));
  EXPECT_NE(only.choose_explained(Collective::AllGather, 8).reason.find("only one"),
            std::string::npos);
}

TEST(Tuner, CostTableHasEveryRow) {
  const Tuner tuner(one_host(4, kMiB), default_figures(), Selection::parse("^tree", "^Simple"));
  const std::string table = tuner.cost_table(Collective::AllReduce, 4096);
  size_t lines = 0, chosen = 0;
  for (size_t at = table.find('\n'); at != std::string::npos; at = table.find('\n', at + 1)) {
    ++lines;
  }
  for (size_t at = table.find("<- chosen"); at != std::string::npos;
       at = table.find("<- chosen", at + 1)) {
    ++chosen;
  }
  // A row per protocol of every registry entry of the collective.
  EXPECT_EQ(lines, 1u + entries_of(Collective::AllReduce).size() * kNumProtocols + 1u) << table;
  EXPECT_EQ(chosen, 1u) << table;
  EXPECT_NE(table.find("n/a: no LL128 on host memory"), std::string::npos) << table;
  EXPECT_NE(table.find("excluded by CCL_ALGO"), std::string::npos) << table;
  EXPECT_NE(table.find("excluded by CCL_PROTO"), std::string::npos) << table;
  EXPECT_NE(table.find("n/a: needs two hosts or more"), std::string::npos) << table;
  EXPECT_NE(table.find("choice: "), std::string::npos) << table;
}

TEST(Tuner, SameInputsSameChoices) {
  const Tuner a(many_hosts(3, 4), default_figures(), Selection::parse("^rabenseifner", ""));
  const Tuner b(many_hosts(3, 4), default_figures(), Selection::parse("^rabenseifner", ""));
  for (Collective c : kCollectives) {
    for (size_t bytes = 0; bytes <= 64 * kMiB; bytes = bytes * 2 + 1) {
      EXPECT_EQ(pair(a.choose(c, bytes)), pair(b.choose(c, bytes)));
    }
  }
}

TEST(Tuner, RejectsBadShapesAndFigures) {
  Shape s = one_host(4, 0);
  s.ranks_per_host = 2;  // 4 ranks on one host of at most 2
  EXPECT_EQ(error_of([&] { Tuner(s, default_figures(), Selection()); }).first, cclInvalidArgument);
  Figures f = default_figures();
  f.direct.beta_gbps = -3;
  EXPECT_EQ(error_of([&] { Tuner(one_host(4, 0), f, Selection()); }).first, cclInvalidArgument);
}

}  // namespace
}  // namespace ccl::tune
