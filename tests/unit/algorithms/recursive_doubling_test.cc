// Recursive-doubling allreduce proven correct by symbolic execution for 1..64 ranks (powers of two
// and the folded extra ranks of the others), odd counts, in place and out of place.
#include "algorithms/recursive_doubling.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "schedule_verifier.h"
#include "test_util.h"

namespace ccl::algo {
namespace {

std::vector<Schedule> build(int n, size_t count) {
  return test::for_all_ranks(n, [&](int r) { return recursive_doubling_allreduce(n, r, count); });
}

class RecursiveDoubling : public ::testing::TestWithParam<int> {};

TEST_P(RecursiveDoubling, VerifiedForCountsAndInPlace) {
  const int n = GetParam();
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{1000003}}) {
    const std::vector<Schedule> s = build(n, count);
    ASSERT_FALSE(test::has_empty_round(s)) << n << " " << count;
    EXPECT_EQ(verify::verify_allreduce(s, n, count), "") << "n=" << n << " count=" << count;
  }
}

INSTANTIATE_TEST_SUITE_P(Sweep, RecursiveDoubling,
                         ::testing::Values(1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 15, 16, 17, 31, 33, 64));

TEST(RecursiveDoublingShape, RoundsAreLogarithmic) {
  // 8 ranks: 3 exchange rounds (into Scratch, Output, Scratch), then a copy and the finalize.
  Schedule s = recursive_doubling_allreduce(8, 5, 100);
  size_t exchanges = 0;
  for (const Schedule::Round r : s.rounds()) exchanges += r.size() == 2;
  EXPECT_EQ(exchanges, 3u);
  EXPECT_EQ(s.scratch_elems, 100u);
  // An extra rank of 6 (rank 5 folds into rank 1): send, then receive the result.
  Schedule extra = recursive_doubling_allreduce(6, 5, 100);
  ASSERT_EQ(extra.round_count(), 2u);
  EXPECT_EQ(extra.round(0)[0].kind, StepKind::Send);
  EXPECT_EQ(extra.round(0)[0].peer, 1);
  EXPECT_EQ(extra.round(1)[0].kind, StepKind::Recv);
}

TEST(RecursiveDoublingShape, RejectsBadArguments) {
  EXPECT_THROW(recursive_doubling_allreduce(0, 0, 1), Error);
  EXPECT_THROW(recursive_doubling_allreduce(4, 4, 1), Error);
  EXPECT_THROW(recursive_doubling_allreduce(4, -1, 1), Error);
}

}  // namespace
}  // namespace ccl::algo
