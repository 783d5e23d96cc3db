// Pairwise alltoallv proven correct by symbolic execution for nranks 1..16: equal counts (also
// against the plain alltoall problem), random uneven counts with zeros and scattered blocks, with
// eager and rendezvous sends; plus its shape and argument checks.
#include <gtest/gtest.h>

#include <random>

#include "algorithms/alltoall.h"
#include "base/error.h"
#include "schedule_verifier.h"
#include "test_util.h"

namespace ccl::algo {
namespace {

using verify::Matrix;

// One rank's view: its row of sendcounts/sdispls, and its recvcounts (the column of sendcounts).
struct Layout {
  Matrix sendcounts, sdispls, rdispls;
  std::vector<size_t> recvcounts(int r) const {
    std::vector<size_t> out;
    for (const auto& row : sendcounts) out.push_back(row[r]);
    return out;
  }
};

std::vector<Schedule> build(const Layout& l) {
  const int n = static_cast<int>(l.sendcounts.size());
  return test::for_all_ranks(n, [&](int r) {
    const std::vector<size_t> recvcounts = l.recvcounts(r);
    return pairwise_alltoallv(n, r, l.sendcounts[r], l.sdispls[r], recvcounts, l.rdispls[r]);
  });
}

Layout equal_layout(int n, size_t count) {
  Layout l;
  std::vector<size_t> displs(n);
  for (int q = 0; q < n; ++q) displs[q] = q * count;
  l.sendcounts.assign(n, std::vector<size_t>(n, count));
  l.sdispls.assign(n, displs);
  l.rdispls.assign(n, displs);
  return l;
}

// Counts up to `max` (about a third of them zero), blocks in random order with gaps.
Layout random_layout(int n, size_t max, unsigned seed) {
  std::mt19937 rng(seed);
  Layout l;
  l.sendcounts.assign(n, std::vector<size_t>(n));
  for (auto& row : l.sendcounts) {
    for (size_t& c : row) c = rng() % 3 == 0 ? 0 : 1 + rng() % max;
  }
  for (int r = 0; r < n; ++r) {
    l.sdispls.push_back(test::random_layout(l.sendcounts[r], rng));
    l.rdispls.push_back(test::random_layout(l.recvcounts(r), rng));
  }
  return l;
}

std::string check(const Layout& l, bool rendezvous) {
  const std::vector<Schedule> s = build(l);
  if (test::has_empty_round(s)) return "empty round";
  if (test::has_empty_message(s)) return "zero-element message";
  for (const Schedule& one : s) {
    if (one.round_count() > std::max<size_t>(l.sendcounts.size() - 1, 1)) return "too many rounds";
  }
  verify::Problem problem = verify::alltoallv_problem(l.sendcounts, l.sdispls, l.rdispls);
  problem.rendezvous = rendezvous;
  return verify::verify(s, problem);
}

class PairwiseAlltoallv : public ::testing::TestWithParam<int> {};

TEST_P(PairwiseAlltoallv, EqualCountsAreAlltoall) {
  const int n = GetParam();
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}}) {
    const Layout l = equal_layout(n, count);
    for (bool rendezvous : {false, true}) {
      EXPECT_EQ(check(l, rendezvous), "") << "n=" << n << " count=" << count;
      verify::Problem plain = verify::alltoall_problem(n, count);
      plain.rendezvous = rendezvous;
      EXPECT_EQ(verify::verify(build(l), plain), "") << "n=" << n << " count=" << count;
    }
  }
}

TEST_P(PairwiseAlltoallv, VerifiedForUnevenCountsAndScatteredBlocks) {
  const int n = GetParam();
  for (unsigned seed = 0; seed < 8; ++seed) {
    const Layout l = random_layout(n, seed < 6 ? 20 : 5000, 31u * static_cast<unsigned>(n) + seed);
    for (bool rendezvous : {false, true}) {
      EXPECT_EQ(check(l, rendezvous), "") << "n=" << n << " seed=" << seed;
    }
  }
}

TEST_P(PairwiseAlltoallv, SparsePatterns) {
  // Only rank 0 sends (to everyone), or each rank only to its successor, or nothing at all.
  const int n = GetParam();
  Layout l = equal_layout(n, 0);
  for (int q = 0; q < n; ++q) l.sendcounts[0][q] = 3;
  for (int r = 0; r < n; ++r) l.rdispls[r][0] = 0;
  for (int q = 0; q < n; ++q) l.sdispls[0][q] = 3 * q;
  EXPECT_EQ(check(l, true), "") << "root scatter n=" << n;

  Layout ring = equal_layout(n, 0);
  for (int r = 0; r < n; ++r) ring.sendcounts[r][(r + 1) % n] = 5;
  EXPECT_EQ(check(ring, true), "") << "successor n=" << n;

  const std::vector<Schedule> none = build(equal_layout(n, 0));
  for (const Schedule& s : none) EXPECT_TRUE(s.rounds().empty());
}

INSTANTIATE_TEST_SUITE_P(Sweep, PairwiseAlltoallv, ::testing::Range(1, 17),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

TEST(PairwiseAlltoallvShape, ExactScheduleForThreeRanks) {
  // Rank 1 of 3 sends 2 to rank 0 and 0 to rank 2, keeps 1; receives 4 from rank 0 and 3 from
  // rank 2. Distance 1: send to 2 (empty), receive from 0; distance 2: send to 0, receive from 2.
  const std::vector<size_t> sendcounts = {2, 1, 0}, sdispls = {1, 0, 3};
  const std::vector<size_t> recvcounts = {4, 1, 3}, rdispls = {0, 7, 4};
  const Schedule s = pairwise_alltoallv(3, 1, sendcounts, sdispls, recvcounts, rdispls);
  EXPECT_EQ(s.describe(),
            "round 0: Recv peer=0 dst=Output[0,4)\n"
            "round 0: Copy src=Input[0,1) dst=Output[7,8)\n"
            "round 1: Send peer=0 src=Input[1,3)\n"
            "round 1: Recv peer=2 dst=Output[4,7)\n");
}

TEST(PairwiseAlltoallvShape, OneRankOnlyCopies) {
  const std::vector<size_t> counts = {6}, sdispls = {2}, rdispls = {1};
  EXPECT_EQ(pairwise_alltoallv(1, 0, counts, sdispls, counts, rdispls).describe(),
            "round 0: Copy src=Input[2,8) dst=Output[1,7)\n");
}

TEST(PairwiseAlltoallvShape, WrongPeerBlockIsCaught) {
  // The sweep can fail: swapping two of rank 0's send displacements delivers the wrong blocks.
  Layout l = equal_layout(3, 4);
  const std::vector<Schedule> good = build(l);
  std::swap(l.sdispls[0][1], l.sdispls[0][2]);
  const std::vector<Schedule> bad = build(l);
  const Layout original = equal_layout(3, 4);
  verify::Problem problem =
      verify::alltoallv_problem(original.sendcounts, original.sdispls, original.rdispls);
  EXPECT_EQ(verify::verify(good, problem), "");
  EXPECT_NE(verify::verify(bad, problem), "");
}

TEST(PairwiseAlltoallvShape, RejectsBadArguments) {
  const std::vector<size_t> two = {1, 1}, three = {1, 1, 1}, self = {1, 2, 1};
  EXPECT_THROW(pairwise_alltoallv(3, 0, two, three, three, three), Error);
  EXPECT_THROW(pairwise_alltoallv(3, 0, three, three, three, two), Error);
  EXPECT_THROW(pairwise_alltoallv(3, 1, three, three, self, three), Error);  // 1 to self, 2 back
  EXPECT_THROW(pairwise_alltoallv(3, 3, three, three, three, three), Error);
  EXPECT_THROW(pairwise_alltoallv(0, 0, {}, {}, {}, {}), Error);
  const std::vector<size_t> huge = {SIZE_MAX, 0, 0};
  EXPECT_THROW(pairwise_alltoallv(3, 0, three, huge, three, three), Error);
}

}  // namespace
}  // namespace ccl::algo
