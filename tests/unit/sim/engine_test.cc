// The engine on tiny cases whose times are computed by hand: one message, a ring allreduce of the
// library's own schedule, shared ports, a reduction bounded by the core, eager sends, a deadlock,
// and every rank's program of the registry's builders running to the end. Times in us.
#include "engine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "algorithms/ring.h"
#include "base/error.h"
#include "program.h"
#include "sim_testing.h"

namespace ccl::sim {
namespace {

TEST(SimEngine, OneMessageIsOverheadPlusAlphaPlusBytesOverBandwidth) {
  // 1 GB/s = 1000 B/us: 1 MB takes 1000 us after 2 us of call overhead, and arrives 5 us of
  // latency later; the sender is done when its bytes left.
  const PortNetwork net(2, 5.0, 1.0, 1000.0, 2.0);
  const std::vector<Program> p = {program({{{OpKind::Send, 1, 1000000}}}),
                                  program({{{OpKind::Recv, 0, 1000000}}})};
  const SimResult r = simulate(net, p);
  EXPECT_DOUBLE_EQ(r.time_us, 1007.0);
  EXPECT_DOUBLE_EQ(r.finish_us[0], 1002.0);
  EXPECT_DOUBLE_EQ(r.finish_us[1], 1007.0);
  EXPECT_EQ(r.messages, 1u);
}

TEST(SimEngine, MemoryBoundResourcesRunAtTheCallsMemoryScale) {
  // 1 MB at 1 GB/s, at half the rate when the call's buffers do not fit in cache: 2000 us.
  const std::vector<Program> p = {program({{{OpKind::Send, 1, 1000000}}}),
                                  program({{{OpKind::Recv, 0, 1000000}}})};
  const PortNetwork cpu(2, 5.0, 1.0, 1000.0, 2.0, true);
  EXPECT_DOUBLE_EQ(simulate(cpu, p, {.memory_scale = 0.5}).time_us, 2007.0);
  // Resources that are not a CPU's copies keep their rate.
  const PortNetwork links(2, 5.0, 1.0, 1000.0, 2.0, false);
  EXPECT_DOUBLE_EQ(simulate(links, p, {.memory_scale = 0.5}).time_us, 1007.0);
}

TEST(SimEngine, TheSendersShareOfAlphaIsPaidPerMessageInSeries) {
  // alpha 5, of which the sender spends 2 per message: three 1000 B messages on one connection
  // leave at 2+2..5, 5+2..8, 8+2..11 (bytes 1 us each) and arrive 3 us later: 8, 11, 14. With no
  // sender share they would leave back to back (3, 4, 5) and arrive at 8, 9, 10.
  PortNetwork net(2, 5.0, 1.0, 1.0, 2.0);
  const std::vector<Program> p = {
      program({{{OpKind::Send, 1, 1000}, {OpKind::Send, 1, 1000}, {OpKind::Send, 1, 1000}}}),
      program({{{OpKind::Recv, 0, 1000}, {OpKind::Recv, 0, 1000}, {OpKind::Recv, 0, 1000}}})};
  EXPECT_DOUBLE_EQ(simulate(net, p).time_us, 10.0);
  net.set_send_us(2.0);
  const SimResult r = simulate(net, p);
  EXPECT_DOUBLE_EQ(r.time_us, 14.0);
  EXPECT_DOUBLE_EQ(r.finish_us[0], 11.0);  // the sender: done when its last bytes left
}

TEST(SimEngine, TwoSendersShareTheReceiversPort) {
  // Ranks 0 and 1 each send 1 MB to rank 2: its receive port is shared, 2000 us for both.
  const PortNetwork net(3, 0.0, 1.0, 1000.0);
  const std::vector<Program> p = {
      program({{{OpKind::Send, 2, 1000000}}}), program({{{OpKind::Send, 2, 1000000}}}),
      program({{{OpKind::Recv, 0, 1000000}, {OpKind::Recv, 1, 1000000}}})};
  EXPECT_DOUBLE_EQ(simulate(net, p).time_us, 2000.0);
  // One sender finishes early: the other then gets the whole port. 0.5 MB and 1 MB: the small
  // one ends at 1000 us (half rate), the large one has 0.5 MB left at full rate: 1500 us.
  const std::vector<Program> q = {
      program({{{OpKind::Send, 2, 500000}}}), program({{{OpKind::Send, 2, 1000000}}}),
      program({{{OpKind::Recv, 0, 500000}, {OpKind::Recv, 1, 1000000}}})};
  const SimResult r = simulate(net, q);
  EXPECT_DOUBLE_EQ(r.finish_us[0], 1000.0);
  EXPECT_DOUBLE_EQ(r.time_us, 1500.0);
}

TEST(SimEngine, AReductionIsBoundByTheReceiversCore) {
  // Port 2 GB/s, core 1 GB/s: a RecvReduce posted before the bytes flows at the core's rate.
  const PortNetwork net(2, 0.0, 2.0, 1.0);
  const std::vector<Program> p = {program({{{OpKind::Send, 1, 1000000}}}),
                                  program({{{OpKind::RecvReduce, 0, 1000000}}})};
  EXPECT_DOUBLE_EQ(simulate(net, p).time_us, 1000.0);
}

TEST(SimEngine, EagerBytesWaitForALateReceive) {
  // Rank 1 is busy with a 2 MB copy (copy at 2 GB/s: 1000 us) before it posts its receive; the
  // message (500 us at 2 GB/s) arrived meanwhile, and the send completed then. The receive then
  // copies it out of the transport's buffer: 1 MB at 2 GB/s, 500 us more.
  const PortNetwork net(2, 0.0, 2.0, 1.0);
  const std::vector<Program> p = {
      program({{{OpKind::Send, 1, 1000000}}}),
      program({{{OpKind::Copy, -1, 2000000}}, {{OpKind::Recv, 0, 1000000}}})};
  const SimResult r = simulate(net, p);
  EXPECT_DOUBLE_EQ(r.finish_us[0], 500.0);
  EXPECT_DOUBLE_EQ(r.finish_us[1], 1500.0);
}

TEST(SimEngine, RingAllreduceTakesTwoTimesNMinusOneSteps) {
  // The library's ring allreduce, not chunked, 4 ranks, 4 MB of floats: 6 steps of 1 MB at
  // 1 GB/s plus 3 us each, the reduce-scatter's reductions bounded by a fast core.
  constexpr int n = 4;
  constexpr size_t count = 1000000;  // floats: 4 MB
  const PortNetwork net(n, 3.0, 1.0, 1000.0);
  std::vector<Program> programs;
  for (int r = 0; r < n; ++r) {
    const algo::Schedule s = algo::ring_allreduce(
        {.nranks = n, .rank = r, .count = count, .chunk_elems = 0, .order = {}});
    programs.push_back(program_of(s, 4, true, false));
  }
  const SimResult result = simulate(net, programs);
  EXPECT_NEAR(result.time_us, 2 * (n - 1) * (3.0 + 1000.0), 1e-6);
  EXPECT_EQ(result.messages, uint64_t(n * 2 * (n - 1)));
}

TEST(SimEngine, ADeadlockIsAnErrorNamingTheRanks) {
  const PortNetwork net(2, 0.0, 1.0, 1.0);
  const std::vector<Program> p = {program({{{OpKind::Recv, 1, 8}}}),
                                  program({{{OpKind::Recv, 0, 8}}})};
  try {
    simulate(net, p);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 in round 0"), std::string::npos) << e.what();
  }
}

TEST(SimEngine, TheSameRunGivesTheSameTimes) {
  constexpr int n = 5;
  const PortNetwork net(n, 2.0, 3.0, 4.0);
  std::vector<Program> programs;
  for (int r = 0; r < n; ++r) {
    programs.push_back(
        program_of(algo::ring_allreduce(
                       {.nranks = n, .rank = r, .count = 12345, .chunk_elems = 1000, .order = {}}),
                   4, false, true));
  }
  const SimResult a = simulate(net, programs);
  const SimResult b = simulate(net, programs);
  EXPECT_EQ(a.finish_us, b.finish_us);
  EXPECT_EQ(a.events, b.events);
}

TEST(SimEngine, BackToBackCallsOverlapAlongAChain) {
  // A chain 0 -> 1 -> 2 of 1000 B (1 us of bytes at 1 GB/s, then 5 us of latency), overhead 2.
  // One call: 2 + 6 + 6 = 14. Three back to back (a 2 us Delay between calls): rank 0's bytes
  // leave at 2..3, 5..6, 8..9; rank 1 has the first at 8, forwards it 8..9, and after its Delay
  // (9..11) posts the second receive as those bytes land (11): forwards it 11..12, then the
  // third (landed at 14, as its Delay ends) 14..15, which rank 2 has at 20: (20 - 14) / 2 = 3 us
  // a call in the steady state, not 14.
  const PortNetwork net(3, 5.0, 1.0, 1.0, 2.0);
  const std::vector<Program> one = {program({{{OpKind::Send, 1, 1000}}}),
                                    program({{{OpKind::Recv, 0, 1000}}, {{OpKind::Send, 2, 1000}}}),
                                    program({{{OpKind::Recv, 1, 1000}}})};
  std::vector<Program> three;
  for (const Program& p : one) three.push_back(repeated(p, 3, net.call_overhead_us()));
  EXPECT_DOUBLE_EQ(simulate(net, one).time_us, 14.0);
  const SimResult r = simulate(net, three);
  EXPECT_DOUBLE_EQ(r.finish_us[0], 9.0);
  EXPECT_DOUBLE_EQ(r.finish_us[1], 15.0);
  EXPECT_DOUBLE_EQ(r.time_us, 20.0);
  EXPECT_EQ(r.last_rank, 2);
}

TEST(SimProgram, RepeatedPutsADelayBetweenCalls) {
  const Program p =
      program({{{OpKind::Send, 1, 8}, {OpKind::Recv, 1, 8}}, {{OpKind::Copy, -1, 8}}});
  const Program r = repeated(p, 3, 1.5);
  ASSERT_EQ(r.rounds(), 8u);  // 2 + (1 + 2) + (1 + 2)
  EXPECT_EQ(r.round_end, (std::vector<uint32_t>{2, 3, 4, 6, 7, 8, 10, 11}));
  EXPECT_EQ(r.ops[3].kind, OpKind::Delay);
  EXPECT_EQ(r.ops[3].bytes, 1500u);  // nanoseconds
  EXPECT_EQ(r.ops[4].kind, OpKind::Send);
  EXPECT_EQ(repeated(p, 1, 1.5).round_end, p.round_end);
  EXPECT_EQ(repeated(p, 2, 0).rounds(), 4u);  // no overhead, no Delay round
}

}  // namespace
}  // namespace ccl::sim
