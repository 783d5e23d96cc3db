// Double binary tree: the tree shapes checked as graphs, the allreduce proven correct by symbolic
// execution for 1..64 ranks x counts x chunking x in place (rendezvous sends), its results shown
// bit-identical on every rank with real doubles, and its shape checked exactly for 4 ranks.
#include "algorithms/double_binary_tree.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "numeric_run.h"
#include "schedule_verifier.h"
#include "test_util.h"

namespace ccl::algo {
namespace {

constexpr size_t kBig = 100003;

std::vector<Schedule> build(int n, size_t count, size_t chunk) {
  return test::for_all_ranks(n, [&](int r) {
    return double_binary_tree_allreduce(TreeParams{n, r, count, chunk, {}});
  });
}

// Floor(log2 n) + 1 for n >= 1: the most edges from a root to a leaf.
int max_depth(int n) { return std::bit_width(static_cast<unsigned>(n)); }

// Checks tree `t` over n ranks is a spanning tree with consistent links and at most max_depth(n)
// edges deep. Returns the number of children of each rank.
std::vector<int> check_tree(int n, int t) {
  const int root = double_binary_tree_root(n, t);
  std::vector<TreeLinks> links;
  for (int r = 0; r < n; ++r) links.push_back(double_binary_tree_links(n, r, t));
  std::vector<int> children(n, 0);
  int edges = 0;
  for (int r = 0; r < n; ++r) {
    const TreeLinks& l = links[r];
    EXPECT_EQ(l.parent < 0, r == root) << "n=" << n << " tree=" << t << " rank=" << r;
    if (l.children[0] < 0) {
      EXPECT_LT(l.children[1], 0) << "present children come first";
    }
    EXPECT_NE(l.children[0], l.children[1] >= 0 ? l.children[1] : -2);
    for (int c : l.children) {
      if (c < 0) continue;
      EXPECT_LT(c, n);
      EXPECT_NE(c, r);
      if (c < n) {
        EXPECT_EQ(links[c].parent, r) << "n=" << n << " tree=" << t;
      }
      ++children[r];
      ++edges;
    }
    if (l.parent >= 0) {
      EXPECT_LT(l.parent, n);
      const auto& pc = links[l.parent].children;
      EXPECT_TRUE(pc[0] == r || pc[1] == r) << "n=" << n << " tree=" << t << " rank=" << r;
    }
  }
  EXPECT_EQ(edges, n - 1) << "n=" << n << " tree=" << t;
  // Every rank is reached from the root exactly once, within max_depth(n) edges.
  std::vector<int> depth(n, -1), frontier{root};
  depth[root] = 0;
  int reached = 1;
  while (!frontier.empty()) {
    const int r = frontier.back();
    frontier.pop_back();
    for (int c : links[r].children) {
      if (c < 0 || c >= n) continue;
      EXPECT_EQ(depth[c], -1) << "rank " << c << " reached twice";
      if (depth[c] != -1) continue;
      depth[c] = depth[r] + 1;
      EXPECT_LE(depth[c], max_depth(n)) << "n=" << n << " tree=" << t;
      frontier.push_back(c);
      ++reached;
    }
  }
  EXPECT_EQ(reached, n) << "n=" << n << " tree=" << t;
  return children;
}

TEST(DoubleBinaryTreeShape, SpanningTreesWithComplementaryLeaves) {
  std::vector<int> sizes;
  for (int n = 1; n <= 130; ++n) sizes.push_back(n);
  for (int n : {255, 256, 257, 1000, 1023, 1024, 1025, 4097}) sizes.push_back(n);
  for (int n : sizes) {
    const std::vector<int> c0 = check_tree(n, 0), c1 = check_tree(n, 1);
    EXPECT_EQ(double_binary_tree_root(n, 0), 0);
    EXPECT_EQ(double_binary_tree_root(n, 1), n % 2 == 0 ? n - 1 : (n > 1 ? 1 : 0));
    if (n < 2) continue;
    for (int r = 0; r < n; ++r) {
      // Over both trees a rank has at most two children: the load of a single binary tree.
      EXPECT_LE(c0[r] + c1[r], 2) << "n=" << n << " rank=" << r;
      const int leaf_in = (c0[r] == 0) + (c1[r] == 0);
      if (n % 2 == 1 && r == 0) {
        // n odd: the trees have n+1 inner nodes between them, so one rank is inner in both;
        // it is rank 0, with one child in each.
        EXPECT_EQ(leaf_in, 0) << "n=" << n;
        EXPECT_EQ(c0[r], 1);
        EXPECT_EQ(c1[r], 1);
      } else {
        EXPECT_EQ(leaf_in, 1) << "n=" << n << " rank=" << r;
      }
    }
  }
}

TEST(DoubleBinaryTreeShape, ExactLinksForSixAndFiveRanks) {
  // Tree 0 over 6: 0 -> 4 -> {2, 5}, 2 -> {1, 3}. Tree 1 is its mirror r -> 5-r:
  // 5 -> 1 -> {3, 0}, 3 -> {4, 2}.
  const std::vector<int> parent6_0 = {-1, 2, 4, 2, 0, 4}, parent6_1 = {1, 5, 3, 1, 3, -1};
  // Tree 0 over 5: 0 -> 4 -> 2 -> {1, 3}. Tree 1 shifts it by one: 1 -> 0 -> 3 -> {2, 4}.
  const std::vector<int> parent5_0 = {-1, 2, 4, 2, 0}, parent5_1 = {1, -1, 3, 0, 3};
  for (int r = 0; r < 6; ++r) {
    EXPECT_EQ(double_binary_tree_links(6, r, 0).parent, parent6_0[r]) << r;
    EXPECT_EQ(double_binary_tree_links(6, r, 1).parent, parent6_1[r]) << r;
  }
  for (int r = 0; r < 5; ++r) {
    EXPECT_EQ(double_binary_tree_links(5, r, 0).parent, parent5_0[r]) << r;
    EXPECT_EQ(double_binary_tree_links(5, r, 1).parent, parent5_1[r]) << r;
  }
  const TreeLinks four = double_binary_tree_links(6, 4, 0);
  EXPECT_EQ(four.children[0], 2);
  EXPECT_EQ(four.children[1], 5);
  const TreeLinks three = double_binary_tree_links(6, 3, 1);
  EXPECT_EQ(three.children[0], 4);
  EXPECT_EQ(three.children[1], 2);
}

TEST(DoubleBinaryTreeShape, RejectsBadArguments) {
  EXPECT_THROW(double_binary_tree_links(0, 0, 0), Error);
  EXPECT_THROW(double_binary_tree_links(4, 4, 0), Error);
  EXPECT_THROW(double_binary_tree_links(4, 0, 2), Error);
  EXPECT_THROW(double_binary_tree_links(4, 0, -1), Error);
  EXPECT_THROW(double_binary_tree_root(0, 0), Error);
  EXPECT_THROW(double_binary_tree_root(4, 2), Error);
  EXPECT_THROW(double_binary_tree_allreduce(TreeParams{4, -1, 10, 0, {}}), Error);
  EXPECT_THROW(double_binary_tree_allreduce(TreeParams{0, 0, 10, 0, {}}), Error);
}

class DoubleBinaryTree : public ::testing::TestWithParam<int> {};

TEST_P(DoubleBinaryTree, VerifiedForCountsChunksAndInPlace) {
  const int n = GetParam();
  const auto un = static_cast<size_t>(n);
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, un - 1, un + 1, size_t{1000}, kBig}) {
    for (size_t chunk : {size_t{0}, size_t{1}, size_t{3}, size_t{64}, size_t{8192}}) {
      if (count > 1000 && chunk < 64) continue;  // rounds grow as count / chunk
      const std::vector<Schedule> s = build(n, count, chunk);
      ASSERT_FALSE(test::has_empty_round(s)) << n << " " << count << " " << chunk;
      // A chunk moves one edge per round, two per level on the way up: K + about 3 log2(n).
      const size_t half = (count + 1) / 2;
      const size_t k = chunk == 0 || half == 0 ? 1 : (half + chunk - 1) / chunk;
      for (const Schedule& r : s) EXPECT_LE(r.round_count(), k + 3 * max_depth(n)) << n;
      ASSERT_EQ(verify::verify_allreduce(s, n, count), "")
          << "n=" << n << " count=" << count << " chunk=" << chunk;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sweep, DoubleBinaryTree,
                         ::testing::Values(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                           17, 24, 31, 32, 33, 48, 63, 64),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

TEST(DoubleBinaryTreeShape, ResultsAreBitIdenticalOnEveryRank) {
  for (int n : {2, 3, 5, 6, 8, 13, 16, 31}) {
    for (size_t chunk : {size_t{0}, size_t{7}}) {
      for (bool in_place : {false, true}) {
        const size_t count = 101;
        std::vector<std::vector<double>> inputs;
        for (int r = 0; r < n; ++r) inputs.push_back(test::spread_values(r, count));
        const test::NumericRun run =
            test::run_numeric_allreduce(build(n, count, chunk), inputs, in_place);
        ASSERT_EQ(run.error, "") << n;
        for (size_t i = 0; i < count; ++i) {
          double exact = 0;  // summed in rank order: close to, not always equal to, the result
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
}

TEST(DoubleBinaryTreeShape, BytesOnTheWire) {
  // Every tree edge carries its half once up and once down: 2 (n-1) count in all; a rank sends
  // at most one half up per tree and one per child (at most two children over both trees).
  for (int n = 2; n <= 40; ++n) {
    const size_t count = 1001;
    const std::vector<Schedule> s = build(n, count, 64);
    size_t total = 0;
    for (int r = 0; r < n; ++r) {
      const size_t sent = test::traffic_of(s[r]).sent;
      EXPECT_LE(sent, 4 * ((count + 1) / 2)) << n << " " << r;
      EXPECT_EQ(s[r].scratch_elems, 0u);
      total += sent;
    }
    EXPECT_EQ(total, 2 * (n - 1) * count) << n;
  }
}

TEST(DoubleBinaryTreeShape, ExactSchedulesForFourRanks) {
  // Tree 0: 0 -> 2 -> {1, 3}; tree 1: 3 -> 1 -> {2, 0}. count 6: half 0 is [0,3), half 1 [3,6),
  // each in chunks of at most 2 ([0,2) [2,3) and [3,5) [5,6)). Up: the first child sends chunk c
  // in round c, the second in round c+1; the middle node forwards in round c+2; the root
  // finalizes in round c+3 and sends in round c+4; the leaves receive in round c+5.
  const std::vector<Schedule> s = build(4, 6, 2);
  // Rank 1: a leaf of tree 0, the middle of tree 1 (children 2, then 0).
  EXPECT_EQ(s[1].describe(),
            "round 0: Send peer=2 src=Input[0,2)\n"
            "round 0: RecvReduce peer=2 src=Input[3,5) dst=Output[3,5)\n"
            "round 1: Send peer=2 src=Input[2,3)\n"
            "round 1: RecvReduce peer=0 src=Output[3,5) dst=Output[3,5)\n"
            "round 1: RecvReduce peer=2 src=Input[5,6) dst=Output[5,6)\n"
            "round 2: Send peer=3 src=Output[3,5)\n"
            "round 2: RecvReduce peer=0 src=Output[5,6) dst=Output[5,6)\n"
            "round 3: Send peer=3 src=Output[5,6)\n"
            "round 4: Recv peer=3 dst=Output[3,5)\n"
            "round 5: Recv peer=2 dst=Output[0,2)\n"
            "round 5: Send peer=2 src=Output[3,5)\n"
            "round 5: Send peer=0 src=Output[3,5)\n"
            "round 5: Recv peer=3 dst=Output[5,6)\n"
            "round 6: Recv peer=2 dst=Output[2,3)\n"
            "round 6: Send peer=2 src=Output[5,6)\n"
            "round 6: Send peer=0 src=Output[5,6)\n");
  // Rank 0: the root of tree 0, the second leaf of tree 1. It has nothing to do in the first
  // round, which is dropped, so its rounds are one lower than the rounds above.
  EXPECT_EQ(s[0].describe(),
            "round 0: Send peer=1 src=Input[3,5)\n"
            "round 1: RecvReduce peer=2 src=Input[0,2) dst=Output[0,2)\n"
            "round 1: Send peer=1 src=Input[5,6)\n"
            "round 2: Finalize dst=Output[0,2)\n"
            "round 2: RecvReduce peer=2 src=Input[2,3) dst=Output[2,3)\n"
            "round 3: Send peer=2 src=Output[0,2)\n"
            "round 3: Finalize dst=Output[2,3)\n"
            "round 4: Send peer=2 src=Output[2,3)\n"
            "round 4: Recv peer=1 dst=Output[3,5)\n"
            "round 5: Recv peer=1 dst=Output[5,6)\n");
}

}  // namespace
}  // namespace ccl::algo
