// Schedule basics (split_even, step_count, describe) and the builders' argument checks.
#include "algorithms/schedule.h"

#include <gtest/gtest.h>

#include <cstdint>
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
  s.add_round(
      {Step{StepKind::Send, 1, Region{Buffer::Input, 0, 5}, Region{}},
       Step{StepKind::RecvReduce, 3, Region{Buffer::Input, 5, 5}, Region{Buffer::Output, 5, 5}}});
  s.add_round({Step{StepKind::Finalize, -1, Region{}, Region{Buffer::Output, 5, 5}}});
  s.add_round(
      {Step{StepKind::Copy, -1, Region{Buffer::Scratch, 0, 2}, Region{Buffer::Output, 0, 2}},
       Step{StepKind::Recv, 0, Region{}, Region{Buffer::Output, 2, 3}}});
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

// The compact encoding is lossless: every step reads back exactly as it was added, from its
// 32-byte record or, where the record has no room (two different non-zero counts, two slots),
// kept whole.
TEST(Schedule, EveryStepReadsBackAsAdded) {
  const size_t big = (size_t{1} << 40) + 3;  // offsets and counts past 32 bits
  const std::vector<std::vector<Step>> rounds = {
      {Step{StepKind::Send, 1, Region{Buffer::Input, big, big}, Region{}},
       Step{StepKind::Recv, 16383, Region{}, Region{Buffer::Output, 7, 9}},
       Step{StepKind::RecvReduce, 2, Region{Buffer::Input, 5, 4}, Region{Buffer::Scratch, big, 4}}},
      {Step{StepKind::Finalize, -1, Region{}, Region{Buffer::Output, 1, 2}},
       Step{StepKind::Copy, -1, Region{Buffer::Scratch, 0, 2}, Region{Buffer::Output, 0, 2}}},
      // Slots: a one-region step keeps its slot in the record, a slot-to-slot copy is kept whole.
      {Step{StepKind::Send, 3, Region{Buffer::Slot, 0, 10, 70000}, Region{}},
       Step{StepKind::Recv, 4, Region{}, Region{Buffer::Slot, 2, 10, 5}},
       Step{StepKind::Copy, -1, Region{Buffer::Slot, 0, 8, 1}, Region{Buffer::Slot, 0, 8, 2}}},
      // What a builder must not make, but the verifier must still see as it is: different
      // counts (kept whole), a region a kind does not use, an unknown kind.
      {Step{StepKind::RecvReduce, 1, Region{Buffer::Input, 0, 3}, Region{Buffer::Output, 0, 4}},
       Step{StepKind::Send, 1, Region{Buffer::Input, 0, 3}, Region{Buffer::Output, 1, 1}},
       Step{StepKind::Finalize, 2, Region{Buffer::Input, 0, 1}, Region{Buffer::Output, 0, 1}},
       Step{static_cast<StepKind>(9), 0, Region{Buffer::Output, 1, 2}, Region{}}},
  };
  Schedule s;
  s.end_round();  // nothing added: no round
  for (const std::vector<Step>& round : rounds) {
    for (const Step& st : round) s.add(st);
    s.end_round();
    s.end_round();  // a round left empty is dropped
  }
  ASSERT_EQ(s.round_count(), rounds.size());
  EXPECT_EQ(s.step_count(), 12u);
  size_t r = 0;
  for (const Schedule::Round round : s.rounds()) {
    ASSERT_EQ(round.size(), rounds[r].size()) << r;
    size_t i = 0;
    for (const Step st : round) {
      EXPECT_TRUE(st == rounds[r][i]) << "round " << r << " step " << i;
      EXPECT_TRUE(round[i] == rounds[r][i]) << "round " << r << " step " << i;
      ++i;
    }
    ++r;
  }
  EXPECT_TRUE(s.rounds().back().back() == rounds.back().back());
  // 12 records of 32 bytes, 3 steps kept whole, 4 round ends: at least that, capacity aside.
  EXPECT_GE(s.memory_bytes(), 12 * 32 + 3 * sizeof(Step) + 4 * sizeof(uint32_t));
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
