// Chain reduce proven correct by symbolic execution over nranks 1..16 x every root x count x
// chunk x in-place x ring order, with rendezvous sends, plus exact checks of its shape.
#include "algorithms/chain_reduce.h"

#include <gtest/gtest.h>

#include <tuple>

#include "base/error.h"
#include "schedule_verifier.h"
#include "test_util.h"

namespace ccl::algo {
namespace {

using test::OrderKind;

constexpr size_t kBig = 100003;

std::vector<Schedule> build_reduce(int n, int root, size_t count, size_t chunk,
                                   const std::vector<int>& order) {
  return test::build_ring([&](const RingParams& p) { return chain_reduce(p, root); }, n, count,
                          chunk, order);
}

class ChainReduce : public ::testing::TestWithParam<std::tuple<int, OrderKind>> {};

TEST_P(ChainReduce, VerifiedForAllRootsCountsChunksAndInPlace) {
  const auto [n, kind] = GetParam();
  const std::vector<int> order = test::make_order(kind, n);
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, kBig}) {
    for (size_t chunk : {size_t{0}, size_t{1}, size_t{3}, size_t{1024}, size_t{65536}}) {
      if (count > 7 && chunk == 1) continue;     // rounds grow as count / chunk
      if (count > 1000 && chunk == 3) continue;  // (1000 in chunks of 3 is 334 rounds)
      for (int root = 0; root < n; ++root) {
        const std::vector<Schedule> s = build_reduce(n, root, count, chunk, order);
        ASSERT_FALSE(test::has_empty_round(s)) << n << " " << root << " " << count << " " << chunk;
        for (bool in_place : {false, true}) {
          verify::Problem problem = verify::reduce_problem(n, count, root, in_place);
          problem.rendezvous = true;  // also proves that no send relies on buffering
          ASSERT_EQ(verify::verify(s, problem), "")
              << "n=" << n << " root=" << root << " count=" << count << " chunk=" << chunk
              << " in_place=" << in_place << " order=" << test::order_name(kind);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sweep, ChainReduce, test::ring_sweep(), test::RingSweepName());

TEST(ChainReduceShape, ExactSchedulesForThreeRanks) {
  // Order 2,0,1 with root 0: the chain is 0 <- 1 <- 2. count 5 in chunks of at most 2:
  // [0,2) [2,4) [4,5); the middle rank's two Scratch slots are [0,2) and [2,4).
  const std::vector<int> order = {2, 0, 1};
  const std::vector<Schedule> s = build_reduce(3, 0, 5, 2, order);
  EXPECT_EQ(s[0].describe(),
            "round 0: RecvReduce peer=1 src=Input[0,2) dst=Output[0,2)\n"
            "round 1: RecvReduce peer=1 src=Input[2,4) dst=Output[2,4)\n"
            "round 1: Finalize dst=Output[0,2)\n"
            "round 2: RecvReduce peer=1 src=Input[4,5) dst=Output[4,5)\n"
            "round 2: Finalize dst=Output[2,4)\n"
            "round 3: Finalize dst=Output[4,5)\n");
  EXPECT_EQ(s[1].describe(),
            "scratch 4 elems\n"
            "round 0: RecvReduce peer=2 src=Input[0,2) dst=Scratch[0,2)\n"
            "round 1: RecvReduce peer=2 src=Input[2,4) dst=Scratch[2,4)\n"
            "round 1: Send peer=0 src=Scratch[0,2)\n"
            "round 2: RecvReduce peer=2 src=Input[4,5) dst=Scratch[0,1)\n"
            "round 2: Send peer=0 src=Scratch[2,4)\n"
            "round 3: Send peer=0 src=Scratch[0,1)\n");
  EXPECT_EQ(s[2].describe(),
            "round 0: Send peer=1 src=Input[0,2)\n"
            "round 1: Send peer=1 src=Input[2,4)\n"
            "round 2: Send peer=1 src=Input[4,5)\n");
}

TEST(ChainReduceShape, OneRankCopiesAndFinalizes) {
  const std::vector<Schedule> s = build_reduce(1, 0, 9, 4, {});
  EXPECT_EQ(s[0].describe(),
            "round 0: Copy src=Input[0,9) dst=Output[0,9)\n"
            "round 1: Finalize dst=Output[0,9)\n");
}

TEST(ChainReduceShape, EveryNonRootSendsCountOnceAndNeverTouchesOutput) {
  for (int n = 2; n <= 9; ++n) {
    const std::vector<int> order = test::make_order(OrderKind::Shuffled, n);
    for (int root = 0; root < n; ++root) {
      const std::vector<Schedule> s = build_reduce(n, root, 1000, 64, order);
      size_t total_sent = 0;
      for (int r = 0; r < n; ++r) {
        size_t sent = 0, received = 0, finalized = 0;
        for (const Schedule::Round round : s[r].rounds()) {
          for (const Step st : round) {
            if (st.kind == StepKind::Send) sent += st.src.count;
            if (st.kind == StepKind::RecvReduce) received += st.dst.count;
            if (st.kind == StepKind::Finalize) finalized += st.dst.count;
            if (r != root) {
              EXPECT_NE(st.src.buffer == Buffer::Output && st.src.count > 0, true);
              EXPECT_NE(st.dst.buffer == Buffer::Output && st.dst.count > 0, true);
            }
          }
        }
        EXPECT_EQ(sent, r == root ? 0u : 1000u) << n << " " << root << " " << r;
        EXPECT_EQ(finalized, r == root ? 1000u : 0u);
        total_sent += sent;
        // Scratch: two slots of a chunk (1000 in 16 chunks of at most 63), middle ranks only.
        const bool middle = r != root && received != 0;
        EXPECT_EQ(s[r].scratch_elems, middle ? 126u : 0u) << n << " " << root << " " << r;
      }
      EXPECT_EQ(total_sent, 1000u * (n - 1));  // a chain: every byte crosses one link once
    }
  }
}

TEST(ChainReduceShape, DroppedFinalizeIsCaught) {
  // The sweep can fail: without the root's last Finalize, the avg is not complete.
  std::vector<Schedule> s = build_reduce(4, 2, 10, 3, {});
  test::PlainRounds rounds = test::unpack(s[2]);
  ASSERT_EQ(rounds.back().back().kind, StepKind::Finalize);
  rounds.back().pop_back();  // pack() drops the round if that left it empty
  s[2] = test::pack(rounds, s[2].scratch_elems);
  EXPECT_NE(verify::verify(s, verify::reduce_problem(4, 10, 2, false)), "");
}

TEST(ChainReduceShape, EmptyCountIsAnEmptySchedule) {
  for (const Schedule& s : build_reduce(4, 2, 0, 0, {})) EXPECT_TRUE(s.rounds().empty());
}

TEST(ChainReduceShape, RejectsBadArguments) {
  RingParams p;
  p.nranks = 4;
  p.rank = 1;
  p.count = 10;
  EXPECT_THROW(chain_reduce(p, 4), Error);
  EXPECT_THROW(chain_reduce(p, -1), Error);
  const std::vector<int> not_a_permutation = {0, 1, 1, 3};
  p.order = not_a_permutation;
  EXPECT_THROW(chain_reduce(p, 0), Error);
  p.order = {};
  p.rank = 4;
  EXPECT_THROW(chain_reduce(p, 0), Error);
}

}  // namespace
}  // namespace ccl::algo
