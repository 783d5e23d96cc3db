// Hierarchical allreduce proven correct by symbolic execution (rendezvous sends) for every
// (hosts H, ranks per host L) with H * L <= 64, hosts as contiguous blocks of ranks, interleaved
// (host r % H) and shuffled, x count x chunk x in place; its results shown bit-identical on every
// rank with real doubles; its cost (bytes across hosts, rounds) counted and its shape checked
// exactly for 2 x 2 ranks.
#include "algorithms/hierarchical.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "base/error.h"
#include "numeric_run.h"
#include "schedule_verifier.h"
#include "test_util.h"

namespace ccl::algo {
namespace {

enum class Layout { Blocks, Interleaved, Shuffled };

const char* layout_name(Layout l) {
  return l == Layout::Blocks ? "blocks" : l == Layout::Interleaved ? "interleaved" : "shuffled";
}

std::vector<int> hosts_of(Layout layout, int hosts, int local) {
  const int n = hosts * local;
  std::vector<int> host(n);
  for (int r = 0; r < n; ++r) host[r] = layout == Layout::Interleaved ? r % hosts : r / local;
  if (layout == Layout::Shuffled) {
    std::mt19937 rng(777u + static_cast<unsigned>(n));  // raw output: the same everywhere
    for (int i = n - 1; i > 0; --i) std::swap(host[i], host[rng() % (i + 1)]);
  }
  return host;
}

std::vector<Schedule> build(const std::vector<int>& host, size_t count, size_t chunk) {
  const int n = static_cast<int>(host.size());
  return test::for_all_ranks(n, [&](int r) {
    return hierarchical_allreduce(HierarchicalParams{n, r, count, chunk, host});
  });
}

// Every (hosts, ranks per host) with n = hosts * ranks ranks; one test per n, so that each stays
// short (the whole sweep is minutes under the sanitizers).
class HierarchicalShapes : public ::testing::TestWithParam<int> {};

TEST_P(HierarchicalShapes, VerifiedForEveryHostShape) {
  const int n = GetParam();
  for (int hosts = 1; hosts <= n; ++hosts) {
    if (n % hosts != 0) continue;
    const int local = n / hosts;
    for (Layout layout : {Layout::Blocks, Layout::Interleaved, Layout::Shuffled}) {
      if (layout != Layout::Blocks && (hosts == 1 || local == 1)) continue;  // the same
      const std::vector<int> host = hosts_of(layout, hosts, local);
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1003}}) {
        for (size_t chunk : {size_t{0}, size_t{1}, size_t{3}, size_t{64}}) {
          if (chunk == 1 && count > 7) continue;  // rounds grow as count / chunk
          if (chunk == 3 && count > 7 && n > 16) continue;
          const std::vector<Schedule> s = build(host, count, chunk);
          ASSERT_FALSE(test::has_empty_round(s)) << hosts << "x" << local;
          ASSERT_FALSE(test::has_empty_message(s)) << hosts << "x" << local;
          ASSERT_EQ(verify::verify_allreduce(s, n, count), "")
              << hosts << " hosts x " << local << " ranks, " << layout_name(layout)
              << ", count=" << count << " chunk=" << chunk;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, HierarchicalShapes, ::testing::Range(1, 65));

TEST(Hierarchical, VerifiedForLargeCounts) {
  for (auto [hosts, local] : {std::pair{2, 2}, {3, 5}, {4, 8}, {8, 4}, {2, 32}, {16, 4}}) {
    for (Layout layout : {Layout::Blocks, Layout::Interleaved}) {
      for (size_t chunk : {size_t{0}, size_t{8192}}) {
        const size_t count = 100003;
        const std::vector<Schedule> s = build(hosts_of(layout, hosts, local), count, chunk);
        ASSERT_EQ(verify::verify_allreduce(s, hosts * local, count), "")
            << hosts << "x" << local << " " << layout_name(layout) << " chunk=" << chunk;
      }
    }
  }
}

TEST(Hierarchical, ResultsAreBitIdenticalOnEveryRank) {
  for (auto [hosts, local] :
       {std::pair{1, 4}, {4, 1}, {2, 2}, {2, 3}, {3, 2}, {3, 5}, {4, 4}, {2, 8}, {8, 3}}) {
    for (Layout layout : {Layout::Blocks, Layout::Interleaved, Layout::Shuffled}) {
      for (size_t chunk : {size_t{0}, size_t{7}}) {
        for (bool in_place : {false, true}) {
          const int n = hosts * local;
          const size_t count = 101;
          std::vector<std::vector<double>> inputs;
          for (int r = 0; r < n; ++r) inputs.push_back(test::spread_values(r, count));
          const test::NumericRun run = test::run_numeric_allreduce(
              build(hosts_of(layout, hosts, local), count, chunk), inputs, in_place);
          ASSERT_EQ(run.error, "") << hosts << "x" << local;
          for (size_t i = 0; i < count; ++i) {
            double exact = 0;  // summed in rank order: close to, not always equal to, the result
            for (int r = 0; r < n; ++r) exact += inputs[r][i];
            EXPECT_NEAR(run.output[0][i], exact / n, 1e-9) << n << " " << i;
          }
          for (int r = 1; r < n; ++r) {
            EXPECT_EQ(
                std::memcmp(run.output[r].data(), run.output[0].data(), count * sizeof(double)), 0)
                << hosts << "x" << local << " " << layout_name(layout) << ": rank " << r
                << " differs from rank 0";
          }
        }
      }
    }
  }
}

TEST(HierarchicalShape, BytesAcrossHostsAndRounds) {
  // count = H * L * m, chunks of c: every piece and sub-piece is whole. Per rank, 2 (H-1) m
  // elements go to other hosts and 2 (L-1) H m stay inside; the rounds are 2 (L-1) K1 +
  // 2 (H-1) K2 + 1 with K1 = ceil(H m / c), K2 = ceil(m / c).
  for (int hosts = 1; hosts <= 8; ++hosts) {
    for (int local = 1; local <= 8; ++local) {
      if (hosts * local == 1) continue;  // one rank: a copy and a finalize
      const size_t m = 6, chunk = 4;
      const size_t count = hosts * local * m;
      const std::vector<int> host = hosts_of(Layout::Interleaved, hosts, local);
      const std::vector<Schedule> s = build(host, count, chunk);
      const size_t k1 = (hosts * m + chunk - 1) / chunk, k2 = (m + chunk - 1) / chunk;
      for (int r = 0; r < hosts * local; ++r) {
        size_t across = 0, inside = 0;
        for (const Schedule::Round round : s[r].rounds()) {
          for (const Step st : round) {
            if (st.kind != StepKind::Send) continue;
            (host[st.peer] == host[r] ? inside : across) += st.src.count;
          }
        }
        EXPECT_EQ(across, 2 * (hosts - 1) * m) << hosts << "x" << local << " rank " << r;
        EXPECT_EQ(inside, 2 * (local - 1) * hosts * m) << hosts << "x" << local << " rank " << r;
        EXPECT_EQ(s[r].round_count(), 2 * (local - 1) * k1 + 2 * (hosts - 1) * k2 + 1)
            << hosts << "x" << local << " rank " << r;
        EXPECT_EQ(s[r].scratch_elems, 0u);
      }
    }
  }
}

TEST(HierarchicalShape, ExactSchedulesForTwoHostsOfTwo) {
  // Hosts interleaved: host 0 = {0, 2}, host 1 = {1, 3}. count 8: pieces [0,4) (local index 0:
  // ranks 0, 1) and [4,8) (local index 1: ranks 2, 3); sub-pieces [0,2) [2,4) and [4,6) [6,8).
  const std::vector<Schedule> s = build({0, 1, 0, 1}, 8, 0);
  EXPECT_EQ(s[0].describe(),
            "round 0: Send peer=2 src=Input[4,8)\n"
            "round 0: RecvReduce peer=2 src=Input[0,4) dst=Output[0,4)\n"
            "round 1: Send peer=1 src=Output[2,4)\n"
            "round 1: RecvReduce peer=1 src=Output[0,2) dst=Output[0,2)\n"
            "round 2: Finalize dst=Output[0,2)\n"
            "round 3: Send peer=1 src=Output[0,2)\n"
            "round 3: Recv peer=1 dst=Output[2,4)\n"
            "round 4: Send peer=2 src=Output[0,4)\n"
            "round 4: Recv peer=2 dst=Output[4,8)\n");
  EXPECT_EQ(s[3].describe(),
            "round 0: Send peer=1 src=Input[0,4)\n"
            "round 0: RecvReduce peer=1 src=Input[4,8) dst=Output[4,8)\n"
            "round 1: Send peer=2 src=Output[4,6)\n"
            "round 1: RecvReduce peer=2 src=Output[6,8) dst=Output[6,8)\n"
            "round 2: Finalize dst=Output[6,8)\n"
            "round 3: Send peer=2 src=Output[6,8)\n"
            "round 3: Recv peer=2 dst=Output[4,6)\n"
            "round 4: Send peer=1 src=Output[4,8)\n"
            "round 4: Recv peer=1 dst=Output[0,4)\n");
}

TEST(HierarchicalShape, EmptyCountAndOneRank) {
  for (const Schedule& s : build({0, 0, 1, 1}, 0, 0)) EXPECT_TRUE(s.rounds().empty());
  EXPECT_EQ(build({0}, 9, 4)[0].describe(),
            "round 0: Copy src=Input[0,9) dst=Output[0,9)\n"
            "round 1: Finalize dst=Output[0,9)\n");
}

TEST(HierarchicalShape, RejectsBadHostMaps) {
  const auto build_rank0 = [](const std::vector<int>& host) {
    return hierarchical_allreduce(
        HierarchicalParams{static_cast<int>(host.size()), 0, 10, 0, host});
  };
  EXPECT_THROW(build_rank0({0, 0, 0, 1}), Error);  // 3 + 1 ranks
  EXPECT_THROW(build_rank0({0, 0, 2, 2}), Error);  // host 1 empty
  EXPECT_THROW(build_rank0({0, -1, 0, -1}), Error);
  EXPECT_THROW(build_rank0({0, 4, 0, 4}), Error);  // beyond nranks
  EXPECT_NO_THROW(build_rank0({1, 0, 1, 0}));
  const std::vector<int> two_hosts = {0, 1, 0, 1};
  EXPECT_THROW(hierarchical_allreduce(HierarchicalParams{4, 0, 10, 0, {}}), Error);
  EXPECT_THROW(hierarchical_allreduce(HierarchicalParams{3, 0, 10, 0, two_hosts}), Error);
  EXPECT_THROW(hierarchical_allreduce(HierarchicalParams{4, 4, 10, 0, two_hosts}), Error);
  EXPECT_THROW(hierarchical_allreduce(HierarchicalParams{0, 0, 10, 0, {}}), Error);
}

}  // namespace
}  // namespace ccl::algo
