// Chain broadcast proven correct by symbolic execution over nranks x root x count x chunk x
// in-place x ring order, plus exact checks of its shape.
#include <gtest/gtest.h>

#include <tuple>

#include "algorithms/ring.h"
#include "schedule_verifier.h"
#include "test_util.h"

namespace ccl::algo {
namespace {

using test::OrderKind;

constexpr size_t kBig = 1000003;

std::vector<Schedule> build_broadcast(int n, int root, size_t count, size_t chunk,
                                      const std::vector<int>& order) {
  return test::build_ring([&](const RingParams& p) { return chain_broadcast(p, root); }, n, count,
                          chunk, order);
}

std::vector<int> roots_for(int n) {
  std::vector<int> roots;
  if (n <= 8) {
    for (int r = 0; r < n; ++r) roots.push_back(r);
  } else {
    roots = {0, 1, n / 2, n - 1};
  }
  return roots;
}

class ChainBroadcast : public ::testing::TestWithParam<std::tuple<int, OrderKind>> {};

TEST_P(ChainBroadcast, VerifiedForAllRootsCountsChunksAndInPlace) {
  const auto [n, kind] = GetParam();
  const std::vector<int> order = test::make_order(kind, n);
  const std::vector<int> roots = roots_for(n);
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, kBig}) {
    for (size_t chunk : {size_t{0}, size_t{1}, size_t{3}, size_t{1024}, size_t{65536}}) {
      if (count > 1000 && (chunk == 1 || chunk == 3)) continue;  // too many rounds to simulate
      for (size_t i = 0; i < roots.size(); ++i) {
        // 1M+3 in 1024-element chunks is ~1000 rounds: two roots are enough there.
        if (count == kBig && chunk == 1024 && i != 0 && i + 1 != roots.size()) continue;
        const int root = roots[i];
        const std::vector<Schedule> s = build_broadcast(n, root, count, chunk, order);
        ASSERT_FALSE(test::has_empty_round(s)) << n << " " << count << " " << chunk;
        for (bool in_place : {false, true}) {
          verify::Problem problem = verify::broadcast_problem(n, count, root, in_place);
          problem.rendezvous = true;  // stricter than eager sends: also proves no buffering needed
          const std::string err = verify::verify(s, problem);
          ASSERT_EQ(err, "") << "n=" << n << " root=" << root << " count=" << count
                             << " chunk=" << chunk << " in_place=" << in_place
                             << " order=" << test::order_name(kind);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sweep, ChainBroadcast, test::ring_sweep(), test::RingSweepName());

TEST(ChainBroadcastShape, ExactSchedulesForThreeRanks) {
  // Order 2,0,1 with root 0: chain 0 -> 1 -> 2. count 5 in chunks of at most 2: [0,2) [2,4) [4,5).
  const std::vector<int> order = {2, 0, 1};
  const std::vector<Schedule> s = build_broadcast(3, 0, 5, 2, order);
  EXPECT_EQ(s[0].describe(),
            "round 0: Copy src=Input[0,5) dst=Output[0,5)\n"
            "round 0: Send peer=1 src=Input[0,2)\n"
            "round 1: Send peer=1 src=Input[2,4)\n"
            "round 2: Send peer=1 src=Input[4,5)\n");
  EXPECT_EQ(s[1].describe(),
            "round 0: Recv peer=0 dst=Output[0,2)\n"
            "round 1: Recv peer=0 dst=Output[2,4)\n"
            "round 1: Send peer=2 src=Output[0,2)\n"
            "round 2: Recv peer=0 dst=Output[4,5)\n"
            "round 2: Send peer=2 src=Output[2,4)\n"
            "round 3: Send peer=2 src=Output[4,5)\n");
  EXPECT_EQ(s[2].describe(),
            "round 0: Recv peer=1 dst=Output[0,2)\n"
            "round 1: Recv peer=1 dst=Output[2,4)\n"
            "round 2: Recv peer=1 dst=Output[4,5)\n");
}

TEST(ChainBroadcastShape, EveryNonRootReceivesCountOnceAndOnlyRootReadsInput) {
  for (int n = 1; n <= 9; ++n) {
    for (int root = 0; root < n; ++root) {
      const std::vector<int> order = test::make_order(OrderKind::Shuffled, n);
      const std::vector<Schedule> s = build_broadcast(n, root, 1000, 64, order);
      size_t total_sent = 0;
      for (int r = 0; r < n; ++r) {
        size_t received = 0;
        for (const Schedule::Round round : s[r].rounds()) {
          for (const Step st : round) {
            if (st.kind == StepKind::Recv) received += st.dst.count;
            if (st.kind == StepKind::Send) total_sent += st.src.count;
            if (r != root) {
              EXPECT_NE(st.src.buffer == Buffer::Input && st.src.count > 0, true);
            }
          }
        }
        EXPECT_EQ(received, r == root ? 0u : 1000u);
      }
      EXPECT_EQ(total_sent, 1000u * (n - 1));  // a chain: every byte crosses n-1 links
    }
  }
}

TEST(ChainBroadcastShape, EmptyCountIsAnEmptySchedule) {
  for (const Schedule& s : build_broadcast(4, 2, 0, 0, {})) EXPECT_TRUE(s.rounds().empty());
}

}  // namespace
}  // namespace ccl::algo
