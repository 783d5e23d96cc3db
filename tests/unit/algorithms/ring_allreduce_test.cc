// Ring allreduce proven correct by symbolic execution over nranks x count x chunk x in-place x
// ring order, plus exact checks of its shape (rounds, bytes sent).
#include <gtest/gtest.h>

#include <tuple>

#include "algorithms/ring.h"
#include "schedule_verifier.h"
#include "test_util.h"

namespace ccl::algo {
namespace {

using test::OrderKind;

constexpr size_t kBig = 1000003;  // 1M+3: odd, not divisible by any nranks tested

std::vector<Schedule> build_allreduce(int n, size_t count, size_t chunk,
                                      const std::vector<int>& order) {
  return test::build_ring(ring_allreduce, n, count, chunk, order);
}

// Chunk sizes whose symbolic run stays cheap for this count (rounds grow as count / chunk).
std::vector<size_t> chunks_for(size_t count) {
  if (count <= 1000) return {0, 1, 3, 1024, 65536};
  return {0, 1024, 65536};
}

class RingAllreduce : public ::testing::TestWithParam<std::tuple<int, OrderKind>> {};

TEST_P(RingAllreduce, VerifiedForAllCountsChunksAndInPlace) {
  const auto [n, kind] = GetParam();
  const std::vector<int> order = test::make_order(kind, n);
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, kBig}) {
    for (size_t chunk : chunks_for(count)) {
      // The 1M+3 x 1024 runs are the slowest; the other orders add little there.
      if (count == kBig && chunk == 1024 && kind != OrderKind::Identity && n % 4 != 3) continue;
      const std::vector<Schedule> s = build_allreduce(n, count, chunk, order);
      ASSERT_FALSE(test::has_empty_round(s)) << n << " " << count << " " << chunk;
      ASSERT_EQ(verify::verify_allreduce(s, n, count), "")
          << "n=" << n << " count=" << count << " chunk=" << chunk
          << " order=" << test::order_name(kind);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sweep, RingAllreduce, test::ring_sweep(), test::RingSweepName());

TEST(RingAllreduceShape, EmptyCountIsAnEmptySchedule) {
  for (int n : {1, 2, 5}) {
    for (const Schedule& s : build_allreduce(n, 0, 0, {})) EXPECT_TRUE(s.rounds().empty());
  }
}

TEST(RingAllreduceShape, SingleRankCopiesThenFinalizes) {
  const Schedule s = build_allreduce(1, 7, 3, {})[0];
  EXPECT_EQ(s.describe(),
            "round 0: Copy src=Input[0,7) dst=Output[0,7)\n"
            "round 1: Finalize dst=Output[0,7)\n");
}

TEST(RingAllreduceShape, ExactScheduleForThreeRanks) {
  // count 7 over 3 ranks: pieces [0,3) [3,5) [5,7). Rank 1 sends piece 1 first and ends up
  // owning piece 2.
  const Schedule s = build_allreduce(3, 7, 0, {})[1];
  EXPECT_EQ(s.describe(),
            "round 0: Send peer=2 src=Input[3,5)\n"
            "round 0: RecvReduce peer=0 src=Input[0,3) dst=Output[0,3)\n"
            "round 1: Send peer=2 src=Output[0,3)\n"
            "round 1: RecvReduce peer=0 src=Input[5,7) dst=Output[5,7)\n"
            "round 2: Finalize dst=Output[5,7)\n"
            "round 3: Send peer=2 src=Output[5,7)\n"
            "round 3: Recv peer=0 dst=Output[3,5)\n"
            "round 4: Send peer=2 src=Output[3,5)\n"
            "round 4: Recv peer=0 dst=Output[0,3)\n");
}

TEST(RingAllreduceShape, RoundsAndTrafficAreExact) {
  for (int n = 2; n <= 16; ++n) {
    for (size_t count : {size_t{1000}, kBig}) {
      for (size_t chunk : {size_t{0}, size_t{1024}}) {
        const std::vector<int> order = test::make_order(OrderKind::Shuffled, n);
        const std::vector<Schedule> all = build_allreduce(n, count, chunk, order);
        const size_t largest = split_even(count, n, 0).count;
        const size_t nchunks = chunk ? (largest + chunk - 1) / chunk : 1;
        for (int r = 0; r < n; ++r) {
          int pos = 0;
          while (order[pos] != r) ++pos;
          const auto piece = [&](int p) { return split_even(count, n, (p % n + n) % n).count; };
          size_t sent = 0, max_msg = 0;
          for (const Schedule::Round round : all[r].rounds()) {
            for (const Step st : round) {
              if (st.kind != StepKind::Send) continue;
              sent += st.src.count;
              max_msg = std::max(max_msg, st.src.count);
              EXPECT_EQ(st.peer, order[(pos + 1) % n]);
            }
          }
          // 2(n-1) piece transfers: every piece but the owned one in reduce-scatter, every
          // piece but the next rank's in allgather.
          EXPECT_EQ(sent, 2 * count - piece(pos + 1) - piece(pos + 2)) << n << " " << r;
          EXPECT_LE(max_msg, chunk ? chunk : largest);
          // count >= n: no empty pieces, so every round is used, plus the Finalize round.
          EXPECT_EQ(all[r].round_count(), 2 * (n - 1) * nchunks + 1);
        }
      }
    }
  }
}

}  // namespace
}  // namespace ccl::algo
