// prepare_check: the data, expected results and in-place layouts of every collective's check,
// verified against a host model of each collective run by all ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "datatype.h"
#include "pattern.h"

namespace ccl::perf {
namespace {

TEST(PrepareCheck, AllReduce) {
  const CheckSpec spec{Collective::AllReduce, cclInt32, cclSum, -1, 3, 11};
  const Geometry g = geometry(Collective::AllReduce, 40, 4, 3);
  std::vector<int32_t> send(10, -1), recv(10, -1), expected(10, -1), want(10);
  prepare_check(spec, 1, g, false, {send.data(), recv.data(), expected.data()});
  fill_reduce_input(want.data(), 10, spec, 1);
  EXPECT_EQ(send, want);
  EXPECT_EQ(recv, std::vector<int32_t>(10, 0));
  fill_reduce_expected(want.data(), 10, spec);
  EXPECT_EQ(expected, want);

  std::fill(send.begin(), send.end(), -1);
  prepare_check(spec, 1, g, true, {send.data(), recv.data(), expected.data()});
  EXPECT_EQ(send, std::vector<int32_t>(10, -1));  // in place: the send buffer is not used
  fill_reduce_input(want.data(), 10, spec, 1);
  EXPECT_EQ(recv, want);
  EXPECT_EQ(op_send_ptr(spec, 1, g, true, send.data(), recv.data()), recv.data());
  EXPECT_EQ(op_recv_ptr(spec, 1, g, true, recv.data()), recv.data());
  EXPECT_EQ(op_send_ptr(spec, 1, g, false, send.data(), recv.data()), send.data());
}

TEST(PrepareCheck, Broadcast) {
  const CheckSpec spec{Collective::Broadcast, cclFloat32, cclSum, 2, 4, 5};
  const Geometry g = geometry(Collective::Broadcast, 64, 4, 4);
  std::vector<float> send(16, -1), recv(16, -1), expected(16), want(16);
  fill_plain(want.data(), 16, cclFloat32, 2, 5);
  // The root sends its data; everyone expects it.
  prepare_check(spec, 2, g, false, {send.data(), recv.data(), expected.data()});
  EXPECT_EQ(send, want);
  EXPECT_EQ(recv, std::vector<float>(16, 0));
  EXPECT_EQ(expected, want);
  // A non-root's send buffer is not touched; in place, the root's data is in recv.
  std::fill(send.begin(), send.end(), -1);
  prepare_check(spec, 0, g, false, {send.data(), recv.data(), expected.data()});
  EXPECT_EQ(send, std::vector<float>(16, -1));
  EXPECT_EQ(expected, want);
  prepare_check(spec, 2, g, true, {send.data(), recv.data(), expected.data()});
  EXPECT_EQ(recv, want);
  prepare_check(spec, 3, g, true, {send.data(), recv.data(), expected.data()});
  EXPECT_EQ(recv, std::vector<float>(16, 0));
}

// One rank's buffers for a simulated run of all ranks.
struct RankBuffers {
  std::vector<int32_t> send, recv, expected;
};

// A host model of each collective on int32 sum, reading every rank's input where the harness
// puts it and writing where it reads the result. `mistake` models a library bug: data taken
// from the wrong rank (or, for reductions, one rank's contribution left out).
void simulate(const CheckSpec& spec, const Geometry& g, bool in_place,
              std::vector<RankBuffers>& ranks, bool mistake) {
  const int n = spec.nranks;
  const size_t base = g.param_count;
  std::vector<std::vector<int32_t>> in(n);
  for (int r = 0; r < n; ++r) {
    auto* p = static_cast<int32_t*>(
        op_send_ptr(spec, r, g, in_place, ranks[r].send.data(), ranks[r].recv.data()));
    in[r].assign(p, p + g.send_count);
  }
  const auto from = [&](int r) { return mistake ? (r + 1) % n : r; };
  const auto sum = [&](size_t i) {
    int64_t acc = 0;
    for (int r = 0; r < n - (mistake ? 1 : 0); ++r) acc += in[r][i];
    return static_cast<int32_t>(acc);
  };
  for (int r = 0; r < n; ++r) {
    auto* out = static_cast<int32_t*>(op_recv_ptr(spec, r, g, in_place, ranks[r].recv.data()));
    for (size_t i = 0; i < g.recv_count; ++i) {
      switch (spec.coll) {
        case Collective::AllReduce:
          out[i] = sum(i);
          break;
        case Collective::Reduce:
          if (r == spec.root) out[i] = sum(i);
          break;
        case Collective::Broadcast:
          out[i] = in[from(spec.root)][i];
          break;
        case Collective::AllGather:
          out[i] = in[from(static_cast<int>(i / base))][i % base];
          break;
        case Collective::ReduceScatter:
          out[i] = sum(static_cast<size_t>(r) * base + i);
          break;
        case Collective::AlltoAll:
          out[i] = in[from(static_cast<int>(i / base))][static_cast<size_t>(r) * base + i % base];
          break;
        case Collective::SendRecv:
          out[i] = in[from((r + n - 1) % n)][i];
          break;
      }
    }
  }
}

// Prepares every rank, simulates the collective, and returns the wrong elements of all ranks.
int64_t simulated_wrong(Collective coll, int n, bool in_place, bool mistake) {
  const CheckSpec spec{coll, cclInt32, cclSum, n - 1, n, 21};
  const Geometry g = geometry(coll, 1000, 4, n);
  const size_t len = std::max(g.send_count, g.recv_count);
  std::vector<RankBuffers> ranks(n);
  for (int r = 0; r < n; ++r) {
    ranks[r] = {std::vector<int32_t>(len, -1), std::vector<int32_t>(len, -1),
                std::vector<int32_t>(len, -1)};
    prepare_check(spec, r, g, in_place,
                  {ranks[r].send.data(), ranks[r].recv.data(), ranks[r].expected.data()});
  }
  simulate(spec, g, in_place, ranks, mistake);
  int64_t wrong = 0;
  for (int r = 0; r < n; ++r) {
    wrong += count_wrong(op_recv_ptr(spec, r, g, in_place, ranks[r].recv.data()),
                         ranks[r].expected.data(), g.recv_count, cclInt32);
  }
  return wrong;
}

constexpr Collective kAll[] = {
    Collective::AllReduce,     Collective::Broadcast, Collective::Reduce,  Collective::AllGather,
    Collective::ReduceScatter, Collective::AlltoAll,  Collective::SendRecv};

TEST(PrepareCheck, ACorrectCollectivePassesAndAWrongOneFails) {
  for (Collective coll : kAll) {
    for (int n : {1, 2, 3, 4}) {
      for (bool in_place : {false, true}) {
        const char* name = collective_info(coll).name;
        EXPECT_EQ(simulated_wrong(coll, n, in_place, false), 0)
            << name << " n " << n << " in place " << in_place;
        // With one rank there is no other rank to take data from (reductions still see the
        // missing contribution).
        if (n > 1 && (!in_place || checked_in_place(coll))) {
          EXPECT_GT(simulated_wrong(coll, n, in_place, true), 50)
              << name << " n " << n << " in place " << in_place;
        }
      }
    }
  }
}

TEST(PrepareCheck, ReduceLeavesNonRootBuffersAlone) {
  const CheckSpec spec{Collective::Reduce, cclInt32, cclSum, 1, 3, 8};
  const Geometry g = geometry(Collective::Reduce, 40, 4, 3);
  std::vector<int32_t> send(10, -1), recv(10, -1), expected(10, -1), want(10);
  prepare_check(spec, 0, g, false, {send.data(), recv.data(), expected.data()});
  EXPECT_EQ(expected, std::vector<int32_t>(10, 0));  // a non-root's recv must stay zero
  prepare_check(spec, 0, g, true, {send.data(), recv.data(), expected.data()});
  fill_reduce_input(want.data(), 10, spec, 0);
  EXPECT_EQ(expected, want);  // in place, its input must stay
  prepare_check(spec, 1, g, false, {send.data(), recv.data(), expected.data()});
  fill_reduce_expected(want.data(), 10, spec);
  EXPECT_EQ(expected, want);
}

TEST(PrepareCheck, InPlaceLayouts) {
  // allgather: the input at its rank's piece of recv; reducescatter: the result there.
  const CheckSpec ag{Collective::AllGather, cclInt32, cclSum, -1, 4, 2};
  const Geometry g = geometry(Collective::AllGather, 256, 4, 4);  // 16 per rank
  std::vector<int32_t> send(64, -1), recv(64, -1), expected(64, -1), want(16);
  prepare_check(ag, 2, g, true, {send.data(), recv.data(), expected.data()});
  fill_plain(want.data(), 16, cclInt32, 2, 2);
  EXPECT_EQ(std::vector<int32_t>(recv.begin() + 32, recv.begin() + 48), want);
  EXPECT_EQ(std::vector<int32_t>(recv.begin(), recv.begin() + 32), std::vector<int32_t>(32, 0));
  EXPECT_EQ(send, std::vector<int32_t>(64, -1));
  EXPECT_EQ(std::vector<int32_t>(expected.begin() + 32, expected.begin() + 48), want);

  const CheckSpec rs{Collective::ReduceScatter, cclInt32, cclSum, -1, 4, 2};
  const Geometry h = geometry(Collective::ReduceScatter, 256, 4, 4);
  EXPECT_EQ(op_recv_ptr(rs, 3, h, true, recv.data()), recv.data() + 48);
  EXPECT_EQ(op_send_ptr(rs, 3, h, true, send.data(), recv.data()), recv.data());
  std::vector<int32_t> whole(64);
  fill_reduce_expected(whole.data(), 64, rs);
  prepare_check(rs, 3, h, false, {send.data(), recv.data(), expected.data()});
  EXPECT_EQ(std::vector<int32_t>(expected.begin(), expected.begin() + 16),
            std::vector<int32_t>(whole.begin() + 48, whole.end()));
}

TEST(PrepareCheck, AlltoAllAndSendRecvAreCheckedOutOfPlaceOnly) {
  EXPECT_FALSE(checked_in_place(Collective::AlltoAll));
  EXPECT_FALSE(checked_in_place(Collective::SendRecv));
  for (Collective c : {Collective::AllReduce, Collective::Broadcast, Collective::Reduce,
                       Collective::AllGather, Collective::ReduceScatter}) {
    EXPECT_TRUE(checked_in_place(c)) << collective_info(c).name;
  }
}

}  // namespace
}  // namespace ccl::perf
