// Dissemination barrier: every rank's completion must depend on every rank's arrival.
#include <gtest/gtest.h>

#include "algorithms/ring.h"
#include "schedule_verifier.h"
#include "test_util.h"

namespace ccl::algo {
namespace {

TEST(DisseminationBarrier, VerifiedForOneToThirtyThreeRanks) {
  for (int n = 1; n <= 33; ++n) {
    const std::vector<Schedule> s =
        test::for_all_ranks(n, [&](int r) { return dissemination_barrier(n, r); });
    size_t rounds = 0;
    while ((size_t{1} << rounds) < static_cast<size_t>(n)) ++rounds;  // ceil(log2 n)
    for (const Schedule& one : s) {
      ASSERT_EQ(one.round_count(), rounds) << "n=" << n;
      for (const Schedule::Round round : one.rounds()) {
        ASSERT_EQ(round.size(), 2u);
        EXPECT_EQ(round[0].src.count + round[1].dst.count, 0u);
      }
    }
    verify::Problem problem = verify::barrier_problem(n);
    EXPECT_EQ(verify::verify(s, problem), "") << "n=" << n;
    problem.rendezvous = true;
    EXPECT_EQ(verify::verify(s, problem), "") << "n=" << n << " rendezvous";
  }
}

TEST(DisseminationBarrier, PeersOfRankFiveOfTwelve) {
  const Schedule s = dissemination_barrier(12, 5);
  EXPECT_EQ(s.describe(),
            "round 0: Send peer=6 src=Input[0,0)\n"
            "round 0: Recv peer=4 dst=Output[0,0)\n"
            "round 1: Send peer=7 src=Input[0,0)\n"
            "round 1: Recv peer=3 dst=Output[0,0)\n"
            "round 2: Send peer=9 src=Input[0,0)\n"
            "round 2: Recv peer=1 dst=Output[0,0)\n"
            "round 3: Send peer=1 src=Input[0,0)\n"
            "round 3: Recv peer=9 dst=Output[0,0)\n");
}

}  // namespace
}  // namespace ccl::algo
