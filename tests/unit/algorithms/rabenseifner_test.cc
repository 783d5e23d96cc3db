// Rabenseifner's allreduce proven correct by symbolic execution for 1..64 ranks (the extra ranks
// of non-powers of two folded in), odd counts with empty pieces, in place and out of place, with
// rendezvous sends; its results shown bit-identical on every rank with real doubles; its shape
// checked exactly for small n.
#include "algorithms/rabenseifner.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "base/error.h"
#include "numeric_run.h"
#include "schedule_verifier.h"
#include "test_util.h"

namespace ccl::algo {
namespace {

std::vector<Schedule> build(int n, size_t count) {
  return test::for_all_ranks(n, [&](int r) { return rabenseifner_allreduce(n, r, count); });
}

int largest_power_of_two(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

class Rabenseifner : public ::testing::TestWithParam<int> {};

TEST_P(Rabenseifner, VerifiedForCountsAndInPlace) {
  const int n = GetParam();
  const auto un = static_cast<size_t>(n);
  for (size_t count :
       {size_t{0}, size_t{1}, size_t{7}, un - 1, un + 1, size_t{1000}, size_t{100003}}) {
    const std::vector<Schedule> s = build(n, count);
    ASSERT_FALSE(test::has_empty_round(s)) << n << " " << count;
    for (const Schedule& r : s) EXPECT_EQ(r.scratch_elems, 0u);
    ASSERT_EQ(verify::verify_allreduce(s, n, count), "") << "n=" << n << " count=" << count;
  }
}

INSTANTIATE_TEST_SUITE_P(Sweep, Rabenseifner,
                         ::testing::Values(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                           17, 24, 31, 32, 33, 48, 63, 64),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

TEST(RabenseifnerShape, RoundsAndBytes) {
  // count a multiple of p: each half of the algorithm sends and receives (p-1)/p of the vector,
  // in log2(p) rounds, plus one round for the final step; a folded pair adds a round and the
  // whole vector at each end.
  for (int n = 2; n <= 40; ++n) {
    const int p = largest_power_of_two(n);
    int log2p = 0;
    while ((1 << log2p) < p) ++log2p;
    const size_t count = 12 * static_cast<size_t>(p);
    const std::vector<Schedule> s = build(n, count);
    for (int r = 0; r < n; ++r) {
      const auto [sent, received] = test::traffic_of(s[r]);
      const bool folded = r >= p, has_extra = r < n - p;
      const size_t exchange = 2 * (count - count / p);
      EXPECT_EQ(sent, folded ? count : exchange + (has_extra ? count : 0)) << n << " " << r;
      EXPECT_EQ(received, sent) << n << " " << r;
      const size_t rounds = folded ? 2 : 2 * log2p + 1 + (has_extra ? 2 : 0);
      EXPECT_EQ(s[r].round_count(), rounds) << n << " " << r;
    }
  }
}

TEST(RabenseifnerShape, ExactSchedulesWithAFoldedRank) {
  // 3 ranks: rank 2 folds into rank 0; pieces of 5 over p = 2 are [0,3) and [3,5).
  const std::vector<Schedule> s = build(3, 5);
  EXPECT_EQ(s[0].describe(),
            "round 0: RecvReduce peer=2 src=Input[0,5) dst=Output[0,5)\n"
            "round 1: Send peer=1 src=Output[3,5)\n"
            "round 1: RecvReduce peer=1 src=Output[0,3) dst=Output[0,3)\n"
            "round 2: Finalize dst=Output[0,3)\n"
            "round 3: Send peer=1 src=Output[0,3)\n"
            "round 3: Recv peer=1 dst=Output[3,5)\n"
            "round 4: Send peer=2 src=Output[0,5)\n");
  EXPECT_EQ(s[1].describe(),
            "round 0: Send peer=0 src=Input[0,3)\n"
            "round 0: RecvReduce peer=0 src=Input[3,5) dst=Output[3,5)\n"
            "round 1: Finalize dst=Output[3,5)\n"
            "round 2: Send peer=0 src=Output[3,5)\n"
            "round 2: Recv peer=0 dst=Output[0,3)\n");
  EXPECT_EQ(s[2].describe(),
            "round 0: Send peer=0 src=Input[0,5)\n"
            "round 1: Recv peer=0 dst=Output[0,5)\n");
}

TEST(RabenseifnerShape, EmptyPiecesExchangeNothing) {
  // 4 ranks, 3 elements: pieces [0,1) [1,2) [2,3) and an empty one for rank 3, which therefore
  // receives nothing to reduce at distance 1, finalizes nothing and sends nothing at distance 1
  // of the allgather; rank 2 mirrors it.
  const std::vector<Schedule> s = build(4, 3);
  EXPECT_EQ(s[3].describe(),
            "round 0: Send peer=1 src=Input[0,2)\n"
            "round 0: RecvReduce peer=1 src=Input[2,3) dst=Output[2,3)\n"
            "round 1: Send peer=2 src=Output[2,3)\n"
            "round 2: Recv peer=2 dst=Output[2,3)\n"
            "round 3: Send peer=1 src=Output[2,3)\n"
            "round 3: Recv peer=1 dst=Output[0,2)\n");
  EXPECT_EQ(s[2].describe(),
            "round 0: Send peer=0 src=Input[0,2)\n"
            "round 0: RecvReduce peer=0 src=Input[2,3) dst=Output[2,3)\n"
            "round 1: RecvReduce peer=3 src=Output[2,3) dst=Output[2,3)\n"
            "round 2: Finalize dst=Output[2,3)\n"
            "round 3: Send peer=3 src=Output[2,3)\n"
            "round 4: Send peer=0 src=Output[2,3)\n"
            "round 4: Recv peer=0 dst=Output[0,2)\n");
}

TEST(RabenseifnerShape, OneRankCopiesAndFinalizes) {
  EXPECT_EQ(rabenseifner_allreduce(1, 0, 9).describe(),
            "round 0: Copy src=Input[0,9) dst=Output[0,9)\n"
            "round 1: Finalize dst=Output[0,9)\n");
  for (const Schedule& s : build(5, 0)) EXPECT_TRUE(s.rounds().empty());
}

TEST(RabenseifnerShape, ResultsAreBitIdenticalOnEveryRank) {
  for (int n : {2, 3, 4, 5, 7, 8, 12, 16, 33}) {
    for (bool in_place : {false, true}) {
      const size_t count = 101;
      std::vector<std::vector<double>> inputs;
      for (int r = 0; r < n; ++r) inputs.push_back(test::spread_values(r, count));
      const test::NumericRun run = test::run_numeric_allreduce(build(n, count), inputs, in_place);
      ASSERT_EQ(run.error, "") << n;
      for (size_t i = 0; i < count; ++i) {
        double exact = 0;
        for (int r = 0; r < n; ++r) exact += inputs[r][i];
        EXPECT_NEAR(run.output[0][i], exact / n, 1e-9) << n << " " << i;
      }
      for (int r = 1; r < n; ++r) {
        EXPECT_EQ(std::memcmp(run.output[r].data(), run.output[0].data(), count * sizeof(double)),
                  0)
            << "n=" << n << " rank " << r << " differs from rank 0";
      }
    }
  }
}

TEST(RabenseifnerShape, BitCheckCatchesRankDependentOrder) {
  // The check above can fail: here every rank adds the others' inputs in its own order (the
  // verifier accepts it: every contribution arrives once), and the bits differ.
  const int n = 3;
  const size_t count = 1;
  std::vector<Schedule> s(n);
  for (int r = 0; r < n; ++r) {
    const Region in{Buffer::Input, 0, count}, out{Buffer::Output, 0, count};
    const int a = (r + 1) % n, b = (r + 2) % n;
    s[r].add_round({Step{StepKind::Send, a, in, {}}, Step{StepKind::Send, b, in, {}},
                    Step{StepKind::RecvReduce, a, in, out}});
    s[r].add_round({Step{StepKind::RecvReduce, b, out, out}});
    s[r].add_round({Step{StepKind::Finalize, -1, {}, out}});
  }
  ASSERT_EQ(verify::verify(s, verify::allreduce_problem(n, count, false)), "");
  const std::vector<std::vector<double>> inputs = {{1e16}, {1.0}, {-1e16}};
  const test::NumericRun run = test::run_numeric_allreduce(s, inputs, false);
  ASSERT_EQ(run.error, "");
  EXPECT_NE(run.output[0][0], run.output[2][0]);  // (1e16 + 1) - 1e16 != (-1e16 + 1e16) + 1
}

TEST(RabenseifnerShape, RejectsBadArguments) {
  EXPECT_THROW(rabenseifner_allreduce(0, 0, 1), Error);
  EXPECT_THROW(rabenseifner_allreduce(4, 4, 1), Error);
  EXPECT_THROW(rabenseifner_allreduce(4, -1, 1), Error);
}

}  // namespace
}  // namespace ccl::algo
