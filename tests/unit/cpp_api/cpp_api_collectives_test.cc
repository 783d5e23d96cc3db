// The C++ API over the other collectives (reduce, all-gather, reduce-scatter, all-to-all and
// their uneven forms), send/recv in a group, split, PreMulSum and finalize, for 1..4 ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "../support/rank_threads.h"
#include "ccl/ccl.hpp"

namespace {

using ccl_test::run_ranks;

class CppApiCollectives : public testing::TestWithParam<int> {};

INSTANTIATE_TEST_SUITE_P(Ranks, CppApiCollectives, testing::Values(1, 2, 3, 4),
                         ccl_test::ranks_name);

TEST_P(CppApiCollectives, ReduceToEveryRoot) {
  run_ranks(GetParam(), [](ccl::Communicator& comm) {
    const int n = comm.size(), me = comm.rank();
    for (int root = 0; root < n; ++root) {
      std::vector<int32_t> send(11, me + 1), recv;
      if (me == root) recv.resize(11, -1);  // non-roots receive nothing
      comm.reduce(send, recv, cclSum, root);
      if (me == root) {
        EXPECT_EQ(recv, std::vector<int32_t>(11, n * (n + 1) / 2));
      }
      std::vector<float> data(5, float(me + 1));
      comm.reduce(data, cclMax, root);  // in place
      if (me == root) {
        EXPECT_EQ(data, std::vector<float>(5, float(n)));
      }
    }
  });
}

TEST_P(CppApiCollectives, AllGather) {
  run_ranks(GetParam(), [](ccl::Communicator& comm) {
    const int n = comm.size(), me = comm.rank();
    std::vector<int64_t> mine = {me * 10, me * 10 + 1, me * 10 + 2}, all(3 * size_t(n)), want;
    for (int q = 0; q < n; ++q) want.insert(want.end(), {q * 10, q * 10 + 1, q * 10 + 2});
    comm.all_gather(mine, all);
    EXPECT_EQ(all, want);
    std::vector<int64_t> in_place(3 * size_t(n), -1);
    std::copy(mine.begin(), mine.end(), in_place.begin() + 3 * me);
    comm.all_gather(in_place);
    EXPECT_EQ(in_place, want);
  });
}

TEST_P(CppApiCollectives, ReduceScatter) {
  run_ranks(GetParam(), [](ccl::Communicator& comm) {
    const int n = comm.size(), me = comm.rank();
    // Element j of block b is b * 100 + j on every rank: the sum of block b is n times that.
    std::vector<int32_t> send;
    for (int b = 0; b < n; ++b)
      for (int j = 0; j < 4; ++j) send.push_back(b * 100 + j);
    std::vector<int32_t> recv(4), want;
    for (int j = 0; j < 4; ++j) want.push_back(n * (me * 100 + j));
    comm.reduce_scatter(send, recv);
    EXPECT_EQ(recv, want);
    std::span<int32_t> block = comm.reduce_scatter(send, cclSum);  // in place
    EXPECT_EQ(std::vector<int32_t>(block.begin(), block.end()), want);
    EXPECT_EQ(block.data(), send.data() + 4 * me);
  });
}

TEST_P(CppApiCollectives, AllToAll) {
  run_ranks(GetParam(), [](ccl::Communicator& comm) {
    const int n = comm.size(), me = comm.rank();
    std::vector<int32_t> send, recv(2 * size_t(n)), want;
    for (int p = 0; p < n; ++p)
      send.insert(send.end(), {me * 1000 + p * 10, me * 1000 + p * 10 + 1});
    for (int q = 0; q < n; ++q)
      want.insert(want.end(), {q * 1000 + me * 10, q * 1000 + me * 10 + 1});
    comm.all_to_all(send, recv);
    EXPECT_EQ(recv, want);
  });
}

TEST_P(CppApiCollectives, AllGatherV) {
  run_ranks(GetParam(), [](ccl::Communicator& comm) {
    const int n = comm.size(), me = comm.rank();
    std::vector<size_t> counts, displs;
    std::vector<double> want;
    for (int q = 0; q < n; ++q) {  // rank q sends q + 1 elements
      displs.push_back(want.size());
      counts.push_back(size_t(q) + 1);
      for (int j = 0; j <= q; ++j) want.push_back(q * 10 + j);
    }
    std::vector<double> mine, all(want.size(), -1);
    for (int j = 0; j <= me; ++j) mine.push_back(me * 10 + j);
    comm.all_gather_v(mine, all, counts, displs);
    EXPECT_EQ(all, want);
  });
}

TEST_P(CppApiCollectives, AllToAllV) {
  run_ranks(GetParam(), [](ccl::Communicator& comm) {
    const int n = comm.size(), me = comm.rank();
    auto count = [](int from, int to) { return size_t((from + to) % 3 + 1); };
    std::vector<size_t> scounts, sdispls, rcounts, rdispls;
    std::vector<int32_t> send, want;
    for (int p = 0; p < n; ++p) {
      sdispls.push_back(send.size());
      scounts.push_back(count(me, p));
      for (size_t j = 0; j < count(me, p); ++j) send.push_back(me * 100 + p * 10 + int(j));
      rdispls.push_back(want.size());
      rcounts.push_back(count(p, me));
      for (size_t j = 0; j < count(p, me); ++j) want.push_back(p * 100 + me * 10 + int(j));
    }
    std::vector<int32_t> recv(want.size(), -1);
    comm.all_to_all_v(send, scounts, sdispls, recv, rcounts, rdispls);
    EXPECT_EQ(recv, want);
  });
}

TEST_P(CppApiCollectives, SendRecvRingInAGroup) {
  run_ranks(GetParam(), [](ccl::Communicator& comm) {
    const int n = comm.size(), me = comm.rank();
    const int next = (me + 1) % n, prev = (me + n - 1) % n;
    std::vector<uint64_t> out(9, uint64_t(me)), in(9);
    {
      ccl::Group group;
      comm.send(out, next);
      comm.recv(in, prev);
      group.end();
      try {
        group.end();
        ADD_FAILURE() << "a second end() did not throw";
      } catch (const ccl::Error& e) {
        EXPECT_EQ(e.code(), cclInvalidUsage) << e.what();
      }
    }
    EXPECT_EQ(in, std::vector<uint64_t>(9, uint64_t(prev)));
    {
      ccl::Group group;  // left without end(): the destructor issues the operations
      comm.recv(std::span(in).first(4), prev);
      comm.send(std::span(out).first(4), next);
    }
    comm.barrier();
  });
}

TEST_P(CppApiCollectives, Split) {
  run_ranks(GetParam(), [](ccl::Communicator& comm) {
    const int n = comm.size(), me = comm.rank();
    // Even and odd ranks, ordered by descending parent rank (key = -rank).
    std::optional<ccl::Communicator> half = comm.split(me % 2, -me);
    ASSERT_TRUE(half.has_value());
    int same_parity = 0, above = 0;
    for (int r = me % 2; r < n; r += 2) {
      ++same_parity;
      if (r > me) ++above;
    }
    EXPECT_EQ(half->size(), same_parity);
    EXPECT_EQ(half->rank(), above);
    int32_t sum = me;
    half->all_reduce(std::span(&sum, 1));
    int32_t want = 0;
    for (int r = me % 2; r < n; r += 2) want += r;
    EXPECT_EQ(sum, want);

    // Rank 0 opts out: it gets no communicator, the others one of n - 1 ranks.
    std::optional<ccl::Communicator> rest =
        comm.split(me == 0 ? CCL_SPLIT_NOCOLOR : 7, me, ccl_test::test_config());
    EXPECT_EQ(rest.has_value(), me != 0);
    if (rest) {
      EXPECT_EQ(rest->size(), n - 1);
    }
  });
}

TEST_P(CppApiCollectives, PreMulSum) {
  run_ranks(GetParam(), [](ccl::Communicator& comm) {
    const int n = comm.size(), me = comm.rank();
    ccl::RedOp twice = ccl::make_premul_sum(comm, 2.0f);  // destroyed before comm
    EXPECT_TRUE(twice);
    std::vector<float> x(6, float(me + 1));
    comm.all_reduce(x, twice);
    EXPECT_EQ(x, std::vector<float>(6, float(n * (n + 1))));
    ccl::RedOp half = ccl::make_premul_sum(comm, 0.5);
    std::vector<double> y(3, 2.0);
    comm.all_reduce(y, half);
    EXPECT_EQ(y, std::vector<double>(3, double(n)));
  });
}

TEST_P(CppApiCollectives, Finalize) {
  run_ranks(GetParam(), [](ccl::Communicator& comm) {
    const int n = comm.size();
    std::vector<int32_t> x(4, 1);
    comm.all_reduce(x);
    comm.finalize();
    EXPECT_EQ(x, std::vector<int32_t>(4, n));
  });
}

}  // namespace
