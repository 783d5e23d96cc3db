#include "sweep.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ccl::perf {
namespace {

TEST(Sweep, FactorSweep) {
  const auto sizes = size_sweep(8, 64 << 20, 0, 2);
  ASSERT_EQ(sizes.size(), 24u);  // 2^3 .. 2^26
  EXPECT_EQ(sizes.front(), 8u);
  EXPECT_EQ(sizes.back(), 64u << 20);
  for (size_t i = 1; i < sizes.size(); ++i) EXPECT_EQ(sizes[i], sizes[i - 1] * 2);
  EXPECT_EQ(size_sweep(8, 100, 0, 3), (std::vector<size_t>{8, 24, 72}));
}

TEST(Sweep, StepSweep) {
  EXPECT_EQ(size_sweep(0, 10, 4, 1), (std::vector<size_t>{0, 4, 8}));
  EXPECT_EQ(size_sweep(5, 5, 1, 0), (std::vector<size_t>{5}));
  EXPECT_EQ(size_sweep(5, 5, 0, 0), (std::vector<size_t>{5}));  // zero step: one size
  EXPECT_TRUE(size_sweep(6, 5, 1, 1).empty());
}

TEST(Sweep, NeverOverflows) {
  const size_t max = ~size_t{0};
  const auto sizes = size_sweep(max / 2, max, 0, 2);
  EXPECT_EQ(sizes, (std::vector<size_t>{max / 2, max - 1}));  // then it would wrap
  EXPECT_EQ(size_sweep(max - 1, max, 5, 1).size(), 1u);
}

TEST(Sweep, WarmupDoublesFromMin) {
  EXPECT_EQ(warmup_sizes(8, 64), (std::vector<size_t>{8, 16, 32, 64}));
  EXPECT_EQ(warmup_sizes(0, 4), (std::vector<size_t>{1, 2, 4}));
  EXPECT_EQ(warmup_sizes(100, 100), (std::vector<size_t>{100}));
}

TEST(Geometry, ElementwiseCollectivesRoundDown) {
  for (Collective c :
       {Collective::AllReduce, Collective::Broadcast, Collective::Reduce, Collective::SendRecv}) {
    Geometry g = geometry(c, 8, 4, 2);
    EXPECT_EQ(g.param_count, 2u);
    EXPECT_EQ(g.send_count, 2u);
    EXPECT_EQ(g.recv_count, 2u);
    EXPECT_EQ(row_bytes(g, 4), 8u);
    g = geometry(c, 7, 4, 2);
    EXPECT_EQ(g.param_count, 1u);
    EXPECT_EQ(row_bytes(g, 4), 4u);
    EXPECT_EQ(geometry(c, 3, 4, 2).param_count, 0u);  // no row
    EXPECT_EQ(geometry(c, 3, 2, 5).param_count, 1u);
  }
}

TEST(Geometry, GatherAndScatterAlignPiecesTo16Bytes) {
  // 1 MiB of float over 3 ranks: 87381 elements each, rounded down to 4 (16 bytes).
  Geometry g = geometry(Collective::AllGather, 1 << 20, 4, 3);
  EXPECT_EQ(g.param_count, 87380u);
  EXPECT_EQ(g.send_count, 87380u);
  EXPECT_EQ(g.recv_count, 87380u * 3);
  EXPECT_EQ(g.send_inplace_offset, 87380u);
  EXPECT_EQ(g.recv_inplace_offset, 0u);

  g = geometry(Collective::ReduceScatter, 1 << 20, 4, 3);
  EXPECT_EQ(g.param_count, 87380u);
  EXPECT_EQ(g.send_count, 87380u * 3);
  EXPECT_EQ(g.recv_count, 87380u);
  EXPECT_EQ(g.recv_inplace_offset, 87380u);

  g = geometry(Collective::AlltoAll, 1000, 1, 4);  // 250 -> 240 (a multiple of 16)
  EXPECT_EQ(g.param_count, 240u);
  EXPECT_EQ(g.send_count, 960u);
  EXPECT_EQ(g.recv_count, 960u);

  EXPECT_EQ(geometry(Collective::AllGather, 8, 4, 2).param_count, 0u);   // 1 < 4: no row
  EXPECT_EQ(geometry(Collective::AllGather, 64, 8, 2).param_count, 4u);  // doubles: pairs
}

TEST(Bandwidth, BusFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(collective_info(Collective::AllReduce).bus_factor(2), 1.0);
  EXPECT_DOUBLE_EQ(collective_info(Collective::AllReduce).bus_factor(4), 1.5);
  EXPECT_DOUBLE_EQ(collective_info(Collective::AllReduce).bus_factor(8), 1.75);
  EXPECT_DOUBLE_EQ(collective_info(Collective::AllReduce).bus_factor(1), 0.0);
  for (Collective c : {Collective::Broadcast, Collective::Reduce, Collective::SendRecv}) {
    EXPECT_DOUBLE_EQ(collective_info(c).bus_factor(8), 1.0);
  }
  for (Collective c : {Collective::AllGather, Collective::ReduceScatter, Collective::AlltoAll}) {
    EXPECT_DOUBLE_EQ(collective_info(c).bus_factor(4), 0.75);
  }
}

TEST(Bandwidth, AlgorithmBandwidth) {
  // 1e9 bytes of allreduce in one second: 1 GB/s; busbw 2(n-1)/n of it.
  Geometry g = geometry(Collective::AllReduce, 1000000000, 4, 4);
  const double alg = alg_bandwidth(Collective::AllReduce, g, 4, 4, 1.0);
  EXPECT_DOUBLE_EQ(alg, 1.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth(Collective::AllReduce, alg, 4), 1.5);
  // allgather counts the whole gathered buffer.
  g = geometry(Collective::AllGather, 1600, 4, 4);
  EXPECT_EQ(g.param_count, 100u);
  EXPECT_DOUBLE_EQ(alg_bandwidth(Collective::AllGather, g, 4, 4, 1e-6), 1.6);
}

TEST(Collectives, NamesAndFlags) {
  // nccl-tests' binaries: which print and loop over ops (-o) and roots (-r).
  struct Want {
    Collective coll;
    const char* binary;
    bool has_op, has_root;
  };
  const Want want[] = {
      {Collective::AllReduce, "all_reduce_perf", true, false},
      {Collective::Broadcast, "broadcast_perf", false, true},
      {Collective::Reduce, "reduce_perf", true, true},
      {Collective::AllGather, "all_gather_perf", false, false},
      {Collective::ReduceScatter, "reduce_scatter_perf", true, false},
      {Collective::AlltoAll, "alltoall_perf", false, false},
      {Collective::SendRecv, "sendrecv_perf", false, false},
  };
  for (const Want& w : want) {
    const CollectiveInfo& info = collective_info(w.coll);
    EXPECT_EQ(info.coll, w.coll);
    EXPECT_STREQ(info.binary, w.binary);
    EXPECT_EQ(std::string(info.name) + "_perf", w.binary);
    EXPECT_EQ(info.has_op, w.has_op) << w.binary;
    EXPECT_EQ(info.has_root, w.has_root) << w.binary;
  }
}

TEST(Bandwidth, PiecesCountOncePerRank) {
  // reducescatter and alltoall: algbw on the whole (nranks-piece) buffer, as allgather; the
  // elementwise ones on the count itself.
  for (Collective c : {Collective::ReduceScatter, Collective::AlltoAll}) {
    const Geometry g = geometry(c, 1600, 4, 4);
    EXPECT_EQ(g.param_count, 100u);
    EXPECT_DOUBLE_EQ(alg_bandwidth(c, g, 4, 4, 1e-6), 1.6);
    EXPECT_DOUBLE_EQ(bus_bandwidth(c, 1.6, 4), 1.2);
  }
  for (Collective c : {Collective::Reduce, Collective::SendRecv, Collective::Broadcast}) {
    const Geometry g = geometry(c, 1600, 4, 4);
    EXPECT_DOUBLE_EQ(alg_bandwidth(c, g, 4, 4, 1e-6), 1.6);
    EXPECT_DOUBLE_EQ(bus_bandwidth(c, 1.6, 4), 1.6);
  }
}

}  // namespace
}  // namespace ccl::perf
