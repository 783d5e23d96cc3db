#include "pair_rounds.h"

#include <gtest/gtest.h>

#include <set>

namespace {

using ccl_check::pair_rounds;
using ccl_check::RankPair;

TEST(PairRounds, EveryPairOnceInRoundsOfDisjointPairs) {
  for (int n = 0; n <= 33; ++n) {
    const auto rounds = pair_rounds(n);
    const size_t expected_rounds = n < 2 ? 0 : static_cast<size_t>(n % 2 == 0 ? n - 1 : n);
    ASSERT_EQ(rounds.size(), expected_rounds) << n << " ranks";
    std::set<RankPair> seen;
    for (const auto& round : rounds) {
      EXPECT_EQ(round.size(), static_cast<size_t>(n / 2)) << n << " ranks";
      std::set<int> busy;
      for (const auto& [a, b] : round) {
        ASSERT_LT(a, b);
        ASSERT_GE(a, 0);
        ASSERT_LT(b, n);
        EXPECT_TRUE(busy.insert(a).second) << "rank " << a << " twice in a round of " << n;
        EXPECT_TRUE(busy.insert(b).second) << "rank " << b << " twice in a round of " << n;
        EXPECT_TRUE(seen.insert({a, b}).second) << a << "-" << b << " twice, " << n << " ranks";
      }
    }
    EXPECT_EQ(seen.size(), static_cast<size_t>(n * (n - 1) / 2)) << n << " ranks";
  }
}

TEST(PairRounds, FourRanksByHand) {
  const auto rounds = pair_rounds(4);
  ASSERT_EQ(rounds.size(), 3u);
  // Rank 3 stays, 0 1 2 rotate: (3, 2) (0, 1), then (3, 0) (1, 2), then (3, 1) (2, 0).
  EXPECT_EQ(rounds[0], (std::vector<RankPair>{{0, 1}, {2, 3}}));
  EXPECT_EQ(rounds[1], (std::vector<RankPair>{{0, 3}, {1, 2}}));
  EXPECT_EQ(rounds[2], (std::vector<RankPair>{{0, 2}, {1, 3}}));
}

}  // namespace
