// Rooted binary-tree broadcast and reduce proven correct by symbolic execution (rendezvous sends)
// for 1..16 ranks x every root x rank order x count x chunk x in place, and 17..64 ranks with a
// few roots; their tree checked against double_binary_tree_links, their cost counted, their shape
// checked exactly for 4 ranks. Also the rank order of the double binary tree allreduce.
#include "algorithms/tree_rooted.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <tuple>
#include <vector>

#include "algorithms/double_binary_tree.h"
#include "base/error.h"
#include "numeric_run.h"
#include "schedule_verifier.h"
#include "test_util.h"

namespace ccl::algo {
namespace {

using test::OrderKind;

constexpr size_t kBig = 100003;

enum class Kind { Broadcast, Reduce };

std::vector<Schedule> build(Kind kind, int n, int root, size_t count, size_t chunk,
                            const std::vector<int>& order) {
  return test::for_all_ranks(n, [&](int r) {
    const TreeParams p{n, r, count, chunk, order};
    return kind == Kind::Broadcast ? tree_broadcast(p, root) : tree_reduce(p, root);
  });
}

std::string check(Kind kind, int n, int root, size_t count, size_t chunk,
                  const std::vector<int>& order) {
  const std::vector<Schedule> s = build(kind, n, root, count, chunk, order);
  if (test::has_empty_round(s)) return "empty round";
  if (test::has_empty_message(s)) return "empty message";
  for (bool in_place : {false, true}) {
    verify::Problem problem = kind == Kind::Broadcast
                                  ? verify::broadcast_problem(n, count, root, in_place)
                                  : verify::reduce_problem(n, count, root, in_place);
    problem.rendezvous = true;  // also proves that no send relies on buffering
    const std::string err = verify::verify(s, problem);
    if (!err.empty()) return (in_place ? "in place: " : "") + err;
  }
  return "";
}

// Floor(log2 n) + 1 for n >= 1: a bound on the edges from the root to a leaf.
int max_depth(int n) { return std::bit_width(static_cast<unsigned>(n)); }

class TreeRooted : public ::testing::TestWithParam<std::tuple<int, OrderKind>> {};

TEST_P(TreeRooted, VerifiedForAllRootsCountsChunksAndInPlace) {
  const auto [n, order_kind] = GetParam();
  const std::vector<int> order = test::make_order(order_kind, n);
  for (Kind kind : {Kind::Broadcast, Kind::Reduce}) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1003}, kBig}) {
      for (size_t chunk : {size_t{0}, size_t{1}, size_t{3}, size_t{64}, size_t{8192}}) {
        if (count > 7 && chunk == 1) continue;  // rounds grow as count / chunk
        if (count > 1003 && chunk == 3) continue;
        for (int root = 0; root < n; ++root) {
          ASSERT_EQ(check(kind, n, root, count, chunk, order), "")
              << (kind == Kind::Broadcast ? "broadcast" : "reduce") << " n=" << n
              << " root=" << root << " count=" << count << " chunk=" << chunk
              << " order=" << test::order_name(order_kind);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sweep, TreeRooted, test::ring_sweep(), test::RingSweepName());

TEST(TreeRootedLarge, VerifiedUpTo64RanksForAFewRoots) {
  for (int n : {17, 24, 31, 32, 33, 48, 63, 64}) {
    for (OrderKind order_kind : {OrderKind::Identity, OrderKind::Shuffled}) {
      const std::vector<int> order = test::make_order(order_kind, n);
      for (int root : {0, 1, n / 2, n - 1}) {
        for (Kind kind : {Kind::Broadcast, Kind::Reduce}) {
          for (size_t count : {size_t{7}, size_t{1003}}) {
            for (size_t chunk : {size_t{0}, size_t{64}}) {
              ASSERT_EQ(check(kind, n, root, count, chunk, order), "")
                  << (kind == Kind::Broadcast ? "broadcast" : "reduce") << " n=" << n
                  << " root=" << root << " count=" << count << " chunk=" << chunk
                  << " order=" << test::order_name(order_kind);
            }
          }
        }
      }
    }
  }
}

// The tree is tree 0 of double_binary_tree_links relabelled: the rank at position p of the order
// is node (p - position of root) mod n. Each message goes along an edge of that tree, in the
// right direction, and the rounds stay within K chunks + the tree's depth (reduce: twice it).
TEST(TreeRootedShape, FollowsRelabelledTreeZero) {
  for (int n = 1; n <= 40; ++n) {
    const std::vector<int> order = test::make_order(OrderKind::Shuffled, n);
    std::vector<int> position(n);
    for (int p = 0; p < n; ++p) position[order[p]] = p;
    for (int root : {0, n / 3, n - 1}) {
      const auto node = [&](int r) { return (position[r] - position[root] + n) % n; };
      const size_t count = 100, chunk = 16, k = 7;
      for (Kind kind : {Kind::Broadcast, Kind::Reduce}) {
        const std::vector<Schedule> s = build(kind, n, root, count, chunk, order);
        for (int r = 0; r < n; ++r) {
          const TreeLinks links = double_binary_tree_links(n, node(r), 0);
          size_t rounds_bound = k + max_depth(n) * (kind == Kind::Broadcast ? 1 : 2) + 1;
          EXPECT_LE(s[r].round_count(), rounds_bound) << n << " " << r;
          for (const Schedule::Round round : s[r].rounds()) {
            for (const Step st : round) {
              if (st.peer < 0) continue;
              const int u = node(st.peer);
              const bool to_child = u == links.children[0] || u == links.children[1];
              const bool to_parent = u == links.parent;
              const bool down = kind == Kind::Broadcast;
              if (st.kind == StepKind::Send) {
                EXPECT_TRUE(down ? to_child : to_parent) << n << " " << root << " " << r;
              } else {
                EXPECT_TRUE(down ? to_parent : to_child) << n << " " << root << " " << r;
              }
            }
          }
        }
      }
    }
  }
}

TEST(TreeRootedShape, BytesAndScratch) {
  for (int n = 1; n <= 40; ++n) {
    for (size_t chunk : {size_t{0}, size_t{10}}) {
      const size_t count = 1001;
      const int root = n / 2;
      for (Kind kind : {Kind::Broadcast, Kind::Reduce}) {
        const std::vector<Schedule> s = build(kind, n, root, count, chunk, {});
        size_t total = 0;
        for (int r = 0; r < n; ++r) {
          const auto [sent, received] = test::traffic_of(s[r]);
          // A tree: a rank talks to its parent once and to each of at most two children once.
          const size_t parent_side = r == root ? 0 : count;
          EXPECT_EQ(kind == Kind::Broadcast ? received : sent, parent_side) << n << " " << r;
          EXPECT_LE(kind == Kind::Broadcast ? sent : received, 2 * count) << n << " " << r;
          total += sent;
          if (kind == Kind::Broadcast) {
            EXPECT_EQ(s[r].scratch_elems, 0u);
          }
          // Reduce: a ring of chunk slots, at most about 2h + 1 of them, never over count.
          EXPECT_LE(s[r].scratch_elems, count);
          if (chunk != 0) {
            EXPECT_LE(s[r].scratch_elems, (2 * max_depth(n) + 1) * chunk);
          }
        }
        EXPECT_EQ(total, (n - 1) * count) << n;
      }
    }
  }
}

TEST(TreeRootedShape, ExactSchedulesForFourRanks) {
  // Root 2, identity order: nodes are (r - 2) mod 4, so rank 2 is node 0, rank 0 node 2, rank 3
  // node 1, rank 1 node 3. Tree 0 over 4: 0 -> 2 -> {1, 3}, i.e. rank 2 -> rank 0 -> {3, 1}.
  // count 5 in chunks of at most 2: [0,2) [2,4) [4,5).
  const std::vector<Schedule> b = build(Kind::Broadcast, 4, 2, 5, 2, {});
  EXPECT_EQ(b[2].describe(),
            "round 0: Copy src=Input[0,5) dst=Output[0,5)\n"
            "round 0: Send peer=0 src=Input[0,2)\n"
            "round 1: Send peer=0 src=Input[2,4)\n"
            "round 2: Send peer=0 src=Input[4,5)\n");
  EXPECT_EQ(b[0].describe(),
            "round 0: Recv peer=2 dst=Output[0,2)\n"
            "round 1: Send peer=3 src=Output[0,2)\n"
            "round 1: Send peer=1 src=Output[0,2)\n"
            "round 1: Recv peer=2 dst=Output[2,4)\n"
            "round 2: Send peer=3 src=Output[2,4)\n"
            "round 2: Send peer=1 src=Output[2,4)\n"
            "round 2: Recv peer=2 dst=Output[4,5)\n"
            "round 3: Send peer=3 src=Output[4,5)\n"
            "round 3: Send peer=1 src=Output[4,5)\n");
  // Reduce: the leaves (ranks 3, 1) send chunk c in rounds c and c+1; rank 0 reduces the first
  // into Scratch, the second into that, and sends in round c+2 (three chunks in flight: three
  // slots of 2); the root reduces in round c+2 and finalizes in round c+3 (it has nothing to do
  // in rounds 0 and 1, which are dropped, so its rounds read two lower).
  const std::vector<Schedule> r = build(Kind::Reduce, 4, 2, 5, 2, {});
  EXPECT_EQ(r[3].describe(),
            "round 0: Send peer=0 src=Input[0,2)\n"
            "round 1: Send peer=0 src=Input[2,4)\n"
            "round 2: Send peer=0 src=Input[4,5)\n");
  EXPECT_EQ(r[0].scratch_elems, 6u);
  EXPECT_EQ(r[0].describe(),
            "scratch 6 elems\n"
            "round 0: RecvReduce peer=3 src=Input[0,2) dst=Scratch[0,2)\n"
            "round 1: RecvReduce peer=1 src=Scratch[0,2) dst=Scratch[0,2)\n"
            "round 1: RecvReduce peer=3 src=Input[2,4) dst=Scratch[2,4)\n"
            "round 2: Send peer=2 src=Scratch[0,2)\n"
            "round 2: RecvReduce peer=1 src=Scratch[2,4) dst=Scratch[2,4)\n"
            "round 2: RecvReduce peer=3 src=Input[4,5) dst=Scratch[4,5)\n"
            "round 3: Send peer=2 src=Scratch[2,4)\n"
            "round 3: RecvReduce peer=1 src=Scratch[4,5) dst=Scratch[4,5)\n"
            "round 4: Send peer=2 src=Scratch[4,5)\n");
  EXPECT_EQ(r[2].describe(),
            "round 0: RecvReduce peer=0 src=Input[0,2) dst=Output[0,2)\n"
            "round 1: Finalize dst=Output[0,2)\n"
            "round 1: RecvReduce peer=0 src=Input[2,4) dst=Output[2,4)\n"
            "round 2: Finalize dst=Output[2,4)\n"
            "round 2: RecvReduce peer=0 src=Input[4,5) dst=Output[4,5)\n"
            "round 3: Finalize dst=Output[4,5)\n");
}

TEST(TreeRootedShape, ReduceMatchesTheRealSum) {
  for (int n : {2, 3, 5, 8, 13}) {
    for (size_t chunk : {size_t{0}, size_t{7}}) {
      const size_t count = 101;
      const int root = n - 1;
      std::vector<std::vector<double>> inputs;
      for (int r = 0; r < n; ++r) inputs.push_back(test::spread_values(r, count));
      const test::NumericRun run = test::run_numeric_allreduce(
          build(Kind::Reduce, n, root, count, chunk, {}), inputs, false);
      ASSERT_EQ(run.error, "") << n;
      for (size_t i = 0; i < count; ++i) {
        double exact = 0;
        for (int r = 0; r < n; ++r) exact += inputs[r][i];
        EXPECT_NEAR(run.output[root][i], exact / n, 1e-9) << n << " " << i;
      }
    }
  }
}

TEST(TreeRootedShape, EmptyCountAndOneRank) {
  for (Kind kind : {Kind::Broadcast, Kind::Reduce}) {
    for (const Schedule& s : build(kind, 5, 3, 0, 0, {})) EXPECT_TRUE(s.rounds().empty());
  }
  EXPECT_EQ(tree_broadcast(TreeParams{1, 0, 9, 4, {}}, 0).describe(),
            "round 0: Copy src=Input[0,9) dst=Output[0,9)\n");
  EXPECT_EQ(tree_reduce(TreeParams{1, 0, 9, 4, {}}, 0).describe(),
            "round 0: Copy src=Input[0,9) dst=Output[0,9)\n"
            "round 1: Finalize dst=Output[0,9)\n");
}

TEST(TreeRootedShape, RejectsBadArguments) {
  const std::vector<int> not_a_permutation = {0, 1, 1, 3};
  for (auto* builder : {&tree_broadcast, &tree_reduce}) {
    EXPECT_THROW(builder(TreeParams{4, 0, 10, 0, {}}, 4), Error);
    EXPECT_THROW(builder(TreeParams{4, 0, 10, 0, {}}, -1), Error);
    EXPECT_THROW(builder(TreeParams{4, 4, 10, 0, {}}, 0), Error);
    EXPECT_THROW(builder(TreeParams{0, 0, 10, 0, {}}, 0), Error);
    EXPECT_THROW(builder(TreeParams{4, 0, 10, 0, not_a_permutation}, 0), Error);
  }
  EXPECT_THROW(double_binary_tree_allreduce(TreeParams{4, 0, 10, 0, not_a_permutation}), Error);
}

// The double binary tree allreduce over an order is the identity's schedule with position p
// played by rank order[p]: every peer mapped through the order.
TEST(DoubleBinaryTreeOrder, IsTheIdentityScheduleRelabelled) {
  for (int n = 1; n <= 33; ++n) {
    for (OrderKind kind : {OrderKind::Reversed, OrderKind::Shuffled}) {
      const std::vector<int> order = test::make_order(kind, n);
      for (int p = 0; p < n; ++p) {
        const Schedule identity = double_binary_tree_allreduce(TreeParams{n, p, 1001, 64, {}});
        test::PlainRounds rounds = test::unpack(identity);
        for (std::vector<Step>& round : rounds) {
          for (Step& st : round) {
            if (st.peer >= 0) st.peer = order[st.peer];
          }
        }
        const Schedule expected = test::pack(rounds, identity.scratch_elems);
        const Schedule got = double_binary_tree_allreduce(TreeParams{n, order[p], 1001, 64, order});
        EXPECT_EQ(got.describe(), expected.describe()) << n << " " << p;
      }
    }
  }
}

TEST(DoubleBinaryTreeOrder, VerifiedAndBitIdentical) {
  for (int n = 1; n <= 24; ++n) {
    for (OrderKind kind : {OrderKind::Reversed, OrderKind::Shuffled}) {
      const std::vector<int> order = test::make_order(kind, n);
      for (size_t count : {size_t{1}, size_t{7}, size_t{1003}}) {
        for (size_t chunk : {size_t{0}, size_t{3}, size_t{64}}) {
          const std::vector<Schedule> s = test::for_all_ranks(n, [&](int r) {
            return double_binary_tree_allreduce(TreeParams{n, r, count, chunk, order});
          });
          ASSERT_EQ(verify::verify_allreduce(s, n, count), "")
              << n << " " << count << " " << chunk << " " << test::order_name(kind);
          if (count != 1003 || chunk != 64) continue;
          std::vector<std::vector<double>> inputs;
          for (int r = 0; r < n; ++r) inputs.push_back(test::spread_values(r, count));
          const test::NumericRun run = test::run_numeric_allreduce(s, inputs, true);
          ASSERT_EQ(run.error, "") << n;
          for (int r = 1; r < n; ++r) {
            EXPECT_EQ(
                std::memcmp(run.output[r].data(), run.output[0].data(), count * sizeof(double)), 0)
                << "n=" << n << " rank " << r << " differs from rank 0";
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace ccl::algo
