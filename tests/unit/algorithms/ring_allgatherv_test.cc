// Ring allgatherv proven correct by symbolic execution over nranks 1..16 x ring order x uneven
// counts (zeros included) x scattered displacements x chunk x in-place, with rendezvous sends;
// and ring_allgather checked to be exactly allgatherv with equal counts.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <tuple>

#include "algorithms/ring.h"
#include "base/error.h"
#include "schedule_verifier.h"
#include "test_util.h"

namespace ccl::algo {
namespace {

using test::OrderKind;

std::vector<Schedule> build_allgatherv(int n, const std::vector<size_t>& counts,
                                       const std::vector<size_t>& displs, size_t chunk,
                                       const std::vector<int>& order) {
  return test::build_ring([&](const RingParams& p) { return ring_allgatherv(p, counts, displs); },
                          n, 0, chunk, order);
}

// Layouts for one rank count: uneven counts with zeros (several seeds), a single non-empty
// piece, all empty, and counts that make some pieces need more chunks than their neighbours.
std::vector<std::vector<size_t>> count_sets(int n) {
  std::vector<std::vector<size_t>> sets;
  for (unsigned seed = 0; seed < 3; ++seed) {
    std::mt19937 rng(1000u * static_cast<unsigned>(n) + seed);
    std::vector<size_t> counts(n);
    for (size_t& c : counts) c = rng() % 4 == 0 ? 0 : rng() % 200;
    sets.push_back(counts);
  }
  std::vector<size_t> one(n, 0);
  one[n / 2] = 37;
  sets.push_back(one);
  sets.push_back(std::vector<size_t>(n, 0));
  std::vector<size_t> steps(n);
  for (int q = 0; q < n; ++q) steps[q] = (q % 3) * 2500 + 1;
  sets.push_back(steps);
  return sets;
}

class RingAllgatherv : public ::testing::TestWithParam<std::tuple<int, OrderKind>> {};

TEST_P(RingAllgatherv, VerifiedForUnevenCountsAndScatteredPieces) {
  const auto [n, kind] = GetParam();
  const std::vector<int> order = test::make_order(kind, n);
  std::mt19937 rng(77u + static_cast<unsigned>(n));
  for (const std::vector<size_t>& counts : count_sets(n)) {
    const std::vector<size_t> displs = test::random_layout(counts, rng);
    const size_t largest = *std::max_element(counts.begin(), counts.end());
    for (size_t chunk : {size_t{0}, size_t{1}, size_t{3}, size_t{64}, size_t{1024}}) {
      if (chunk < 64 && largest > 200) continue;  // rounds grow as count / chunk
      const std::vector<Schedule> s = build_allgatherv(n, counts, displs, chunk, order);
      ASSERT_FALSE(test::has_empty_round(s)) << n << " " << chunk;
      ASSERT_FALSE(test::has_empty_message(s)) << n << " " << chunk;
      for (bool in_place : {false, true}) {
        verify::Problem problem = verify::allgatherv_problem(n, counts, displs, in_place);
        problem.rendezvous = true;
        ASSERT_EQ(verify::verify(s, problem), "")
            << "n=" << n << " chunk=" << chunk << " in_place=" << in_place
            << " order=" << test::order_name(kind) << " largest=" << largest;
      }
    }
  }
}

TEST_P(RingAllgatherv, EqualCountsAreRingAllgather) {
  const auto [n, kind] = GetParam();
  const std::vector<int> order = test::make_order(kind, n);
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}}) {
    const std::vector<size_t> counts(n, count);
    std::vector<size_t> displs(n);
    for (int q = 0; q < n; ++q) displs[q] = q * count;
    for (size_t chunk : {size_t{0}, size_t{3}, size_t{256}}) {
      const std::vector<Schedule> v = build_allgatherv(n, counts, displs, chunk, order);
      const std::vector<Schedule> g = test::build_ring(ring_allgather, n, count, chunk, order);
      for (int r = 0; r < n; ++r) ASSERT_EQ(v[r].describe(), g[r].describe()) << r;
      for (bool in_place : {false, true}) {
        EXPECT_EQ(verify::verify(v, verify::allgather_problem(n, count, in_place)), "");
        EXPECT_EQ(verify::verify(v, verify::allgatherv_problem(n, counts, displs, in_place)), "");
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sweep, RingAllgatherv, test::ring_sweep(), test::RingSweepName());

TEST(RingAllgathervShape, ExactSchedulesForThreeRanks) {
  // counts 3,0,2 at displs 2,0,0 (rank 1's empty piece may sit anywhere), chunks of at most 2.
  // Rank 1 has nothing to send or copy, and nobody sends its empty piece.
  const std::vector<size_t> counts = {3, 0, 2}, displs = {2, 0, 0};
  const std::vector<Schedule> s = build_allgatherv(3, counts, displs, 2, {});
  EXPECT_EQ(s[0].describe(),
            "round 0: Send peer=1 src=Input[0,2)\n"
            "round 0: Recv peer=2 dst=Output[0,2)\n"
            "round 0: Copy src=Input[0,3) dst=Output[2,5)\n"
            "round 1: Send peer=1 src=Input[2,3)\n"
            "round 2: Send peer=1 src=Output[0,2)\n");
  EXPECT_EQ(s[1].describe(),
            "round 0: Recv peer=0 dst=Output[2,4)\n"
            "round 1: Recv peer=0 dst=Output[4,5)\n"
            "round 2: Send peer=2 src=Output[2,4)\n"
            "round 2: Recv peer=0 dst=Output[0,2)\n"
            "round 3: Send peer=2 src=Output[4,5)\n");
  EXPECT_EQ(s[2].describe(),
            "round 0: Send peer=0 src=Input[0,2)\n"
            "round 0: Copy src=Input[0,2) dst=Output[0,2)\n"
            "round 1: Recv peer=1 dst=Output[2,4)\n"
            "round 2: Recv peer=1 dst=Output[4,5)\n");
  EXPECT_EQ(verify::verify(s, verify::allgatherv_problem(3, counts, displs, false)), "");
}

TEST(RingAllgathervShape, WritingAGapIsCaught) {
  // The problem expects Output[0,1) untouched; a schedule for displs {0} writes it.
  const std::vector<size_t> counts = {2}, built_for = {0}, displs = {1};
  const std::vector<Schedule> s = build_allgatherv(1, counts, built_for, 0, {});
  EXPECT_NE(verify::verify(s, verify::allgatherv_problem(1, counts, displs, false)), "");
  const std::vector<Schedule> right = build_allgatherv(1, counts, displs, 0, {});
  EXPECT_EQ(verify::verify(right, verify::allgatherv_problem(1, counts, displs, false)), "");
}

TEST(RingAllgathervShape, RejectsBadArguments) {
  RingParams p;
  p.nranks = 3;
  p.rank = 0;
  const std::vector<size_t> two = {1, 1}, three = {1, 1, 1};
  EXPECT_THROW(ring_allgatherv(p, two, three), Error);
  EXPECT_THROW(ring_allgatherv(p, three, two), Error);
  const std::vector<size_t> huge = {0, SIZE_MAX, 0};
  EXPECT_THROW(ring_allgatherv(p, three, huge), Error);
  p.rank = 3;
  EXPECT_THROW(ring_allgatherv(p, three, three), Error);
}

}  // namespace
}  // namespace ccl::algo
