// Schedule basics (split_even, step_count, describe) and the builders' argument checks.
#include "algorithms/schedule.h"

#include <gtest/gtest.h>

#include <vector>

#include "algorithms/ring.h"
#include "base/error.h"

namespace ccl::algo {
namespace {

TEST(SplitEven, PiecesTileTheRangeAndDifferByAtMostOne) {
  for (size_t count : {0u, 1u, 2u, 7u, 16u, 1000u, 1000003u}) {
    for (size_t parts : {1u, 2u, 3u, 7u, 16u, 33u}) {
      size_t next = 0;
      for (size_t i = 0; i < parts; ++i) {
        const Piece p = split_even(count, parts, i);
        ASSERT_EQ(p.offset, next) << count << "/" << parts << " piece " << i;
        // The first count % parts pieces have one more element.
        ASSERT_EQ(p.count, count / parts + (i < count % parts ? 1 : 0));
        next += p.count;
      }
      EXPECT_EQ(next, count);
    }
  }
}

TEST(SplitEven, ExactValues) {
  EXPECT_EQ(split_even(10, 3, 0).offset, 0u);
  EXPECT_EQ(split_even(10, 3, 0).count, 4u);
  EXPECT_EQ(split_even(10, 3, 1).offset, 4u);
  EXPECT_EQ(split_even(10, 3, 1).count, 3u);
  EXPECT_EQ(split_even(10, 3, 2).offset, 7u);
  EXPECT_EQ(split_even(10, 3, 2).count, 3u);
  EXPECT_EQ(split_even(2, 4, 3).offset, 2u);
  EXPECT_EQ(split_even(2, 4, 3).count, 0u);
}

TEST(SplitEven, RejectsBadIndex) {
  EXPECT_THROW(split_even(10, 0, 0), Error);
  EXPECT_THROW(split_even(10, 3, 3), Error);
}

TEST(Schedule, StepCountAndDescribe) {
  Schedule s;
  EXPECT_EQ(s.step_count(), 0u);
  EXPECT_EQ(s.describe(), "(no rounds)\n");
  s.rounds.push_back(Round{
      {Step{StepKind::Send, 1, Region{Buffer::Input, 0, 5}, Region{}},
       Step{StepKind::RecvReduce, 3, Region{Buffer::Input, 5, 5}, Region{Buffer::Output, 5, 5}}}});
  s.rounds.push_back(Round{{Step{StepKind::Finalize, -1, Region{}, Region{Buffer::Output, 5, 5}}}});
  s.rounds.push_back(
      Round{{Step{StepKind::Copy, -1, Region{Buffer::Scratch, 0, 2}, Region{Buffer::Output, 0, 2}},
             Step{StepKind::Recv, 0, Region{}, Region{Buffer::Output, 2, 3}}}});
  s.scratch_elems = 2;
  EXPECT_EQ(s.step_count(), 5u);
  EXPECT_EQ(s.describe(),
            "scratch 2 elems\n"
            "round 0: Send peer=1 src=Input[0,5)\n"
            "round 0: RecvReduce peer=3 src=Input[5,10) dst=Output[5,10)\n"
            "round 1: Finalize dst=Output[5,10)\n"
            "round 2: Copy src=Scratch[0,2) dst=Output[0,2)\n"
            "round 2: Recv peer=0 dst=Output[2,5)\n");
}

// Every builder must reject the caller's mistakes with InvalidArgument.
template <typename F>
void expect_invalid(F f, const char* what) {
  try {
    f();
    ADD_FAILURE() << what << ": no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclInvalidArgument) << what << ": " << e.what();
  }
}

TEST(RingBuilders, RejectInvalidArguments) {
  const std::vector<int> dup = {0, 1, 1};
  const std::vector<int> out_of_range = {0, 1, 3};
  const std::vector<int> negative = {0, -1, 2};
  const std::vector<int> short_order = {0, 1};
  const std::vector<int> good = {2, 0, 1};
  const auto params = [](int n, int rank, std::span<const int> order) {
    RingParams p;
    p.nranks = n;
    p.rank = rank;
    p.count = 10;
    p.order = order;
    return p;
  };
  for (auto build : {+[](const RingParams& p) { return ring_allreduce(p); },
                     +[](const RingParams& p) { return chain_broadcast(p, 0); }}) {
    expect_invalid([&] { build(params(0, 0, {})); }, "nranks 0");
    expect_invalid([&] { build(params(-3, 0, {})); }, "nranks -3");
    expect_invalid([&] { build(params(3, -1, {})); }, "rank -1");
    expect_invalid([&] { build(params(3, 3, {})); }, "rank == nranks");
    expect_invalid([&] { build(params(3, 0, dup)); }, "duplicate in order");
    expect_invalid([&] { build(params(3, 0, out_of_range)); }, "order entry out of range");
    expect_invalid([&] { build(params(3, 0, negative)); }, "negative order entry");
    expect_invalid([&] { build(params(3, 0, short_order)); }, "order too short");
    EXPECT_NO_THROW(build(params(3, 1, good)));
  }
  expect_invalid([&] { chain_broadcast(params(3, 0, {}), -1); }, "root -1");
  expect_invalid([&] { chain_broadcast(params(3, 0, {}), 3); }, "root == nranks");
  expect_invalid([&] { chain_broadcast(params(3, 0, good), 5); }, "root 5 with order");
  expect_invalid([] { dissemination_barrier(0, 0); }, "barrier nranks 0");
  expect_invalid([] { dissemination_barrier(4, 4); }, "barrier rank 4");
  expect_invalid([] { dissemination_barrier(4, -1); }, "barrier rank -1");
}

}  // namespace
}  // namespace ccl::algo
