// --explain's critical path on runs timed by hand: a chain across ranks, a message queued behind
// another on its connection, bytes that arrived before their receive, and the breakdown that
// adds up to the run's time. Times in us; 1 GB/s moves 1000 bytes a us.
#include "explain.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine.h"
#include "sim_testing.h"

namespace ccl::sim {
namespace {

// The line of `text` that holds `what` ("" when none).
std::string line_of(const std::string& text, const std::string& what) {
  const size_t at = text.find(what);
  if (at == std::string::npos) return "";
  const size_t begin = text.rfind('\n', at) + 1;
  return text.substr(begin, text.find('\n', at) - begin);
}

TEST(SimExplain, TheCriticalPathFollowsTheChainThatEndsLast) {
  // Rank 0 sends 1000 B to rank 1 (2 + 1 + 5 = 8 us), which then sends 2000 B to rank 2
  // (8 + 2 + 5 = 15 us). Rank 2's 100-byte copy in its first round is off the path.
  const PortNetwork net(3, 5.0, 1.0, 1.0, 2.0);
  const std::vector<Program> p = {program({{{OpKind::Send, 1, 1000}}}),
                                  program({{{OpKind::Recv, 0, 1000}}, {{OpKind::Send, 2, 2000}}}),
                                  program({{{OpKind::Copy, -1, 100}}, {{OpKind::Recv, 1, 2000}}})};
  const SimResult r = simulate(net, p, {.explain = true});
  // Rank 1 is done when its bytes left (10); rank 2 has them at 15.
  EXPECT_DOUBLE_EQ(r.time_us, 15.0);
  EXPECT_EQ(r.last_rank, 2);
  EXPECT_DOUBLE_EQ(r.finish_us[1], 10.0);
  ASSERT_EQ(r.critical_path.size(), 2u);
  const PathStep& a = r.critical_path[0];
  EXPECT_EQ(a.rank, 0);
  EXPECT_EQ(a.kind, OpKind::Send);
  EXPECT_EQ(a.peer, 1);
  EXPECT_DOUBLE_EQ(a.begin_us, 2.0);
  EXPECT_DOUBLE_EQ(a.end_us, 8.0);
  EXPECT_DOUBLE_EQ(a.latency_us, 5.0);
  EXPECT_STREQ(a.link, "test");
  EXPECT_EQ(net.resources()[size_t(a.bottleneck)].name, "rank 0 tx");
  const PathStep& b = r.critical_path[1];
  EXPECT_EQ(b.rank, 1);
  EXPECT_EQ(b.round, 1u);
  EXPECT_EQ(b.bytes, 2000u);
  EXPECT_DOUBLE_EQ(b.begin_us, 8.0);
  EXPECT_DOUBLE_EQ(b.end_us, 15.0);
  // Without explain, no path and the same times.
  const SimResult plain = simulate(net, p);
  EXPECT_TRUE(plain.critical_path.empty());
  EXPECT_EQ(plain.finish_us, r.finish_us);
}

TEST(SimExplain, AMessageQueuedBehindAnotherWaitsForIt) {
  // Two messages of one round on one connection leave one after the other (2..3, 3..4) and
  // arrive 5 us later (8, 9). The second waited for the first's bytes to leave, not for its
  // round: the path is the first's bytes, then the second's bytes and latency.
  const PortNetwork net(2, 5.0, 1.0, 1.0, 2.0);
  const std::vector<Program> p = {program({{{OpKind::Send, 1, 1000}, {OpKind::Send, 1, 1000}}}),
                                  program({{{OpKind::Recv, 0, 1000}, {OpKind::Recv, 0, 1000}}})};
  const SimResult r = simulate(net, p, {.explain = true});
  EXPECT_DOUBLE_EQ(r.time_us, 9.0);
  ASSERT_EQ(r.critical_path.size(), 2u);
  EXPECT_DOUBLE_EQ(r.critical_path[0].begin_us, 2.0);
  EXPECT_DOUBLE_EQ(r.critical_path[0].end_us, 3.0);
  EXPECT_DOUBLE_EQ(r.critical_path[0].latency_us, 0.0);
  EXPECT_DOUBLE_EQ(r.critical_path[1].begin_us, 3.0);
  EXPECT_DOUBLE_EQ(r.critical_path[1].end_us, 9.0);
  EXPECT_DOUBLE_EQ(r.critical_path[1].latency_us, 5.0);
  EXPECT_EQ(r.critical_path[1].round, 0u);
}

TEST(SimExplain, BytesThatArrivedFirstAreReducedAfterTheReceiversRound) {
  // Rank 1 copies 20000 B first (copy at 2 GB/s: 10 us, 2..12); rank 0's 1000 B arrived at 8.
  // The reduction of them runs 12..13 on rank 1's core: the path is the copy, then it.
  const PortNetwork net(2, 5.0, 1.0, 1.0, 2.0);
  const std::vector<Program> p = {
      program({{{OpKind::Send, 1, 1000}}}),
      program({{{OpKind::Copy, -1, 20000}}, {{OpKind::RecvReduce, 0, 1000}}})};
  const SimResult r = simulate(net, p, {.explain = true});
  EXPECT_DOUBLE_EQ(r.time_us, 13.0);
  ASSERT_EQ(r.critical_path.size(), 2u);
  EXPECT_EQ(r.critical_path[0].kind, OpKind::Copy);
  EXPECT_DOUBLE_EQ(r.critical_path[0].begin_us, 2.0);
  EXPECT_DOUBLE_EQ(r.critical_path[0].end_us, 12.0);
  EXPECT_EQ(r.critical_path[1].kind, OpKind::RecvReduce);
  EXPECT_DOUBLE_EQ(r.critical_path[1].begin_us, 12.0);
  EXPECT_DOUBLE_EQ(r.critical_path[1].end_us, 13.0);
  EXPECT_EQ(net.resources()[size_t(r.critical_path[1].bottleneck)].name, "rank 1 core");
}

TEST(SimExplain, TheBreakdownAddsUpToTheRunsTime) {
  const PortNetwork net(3, 5.0, 1.0, 1.0, 2.0);
  const std::vector<Program> p = {program({{{OpKind::Send, 1, 1000}}}),
                                  program({{{OpKind::Recv, 0, 1000}}, {{OpKind::Send, 2, 2000}}}),
                                  program({{{OpKind::Copy, -1, 100}}, {{OpKind::Recv, 1, 2000}}})};
  const std::string text = describe_path(simulate(net, p, {.explain = true}), net, 40);
  EXPECT_NE(text.find("2 steps, ends on rank 2 at 15.000 us"), std::string::npos) << text;
  // 2 + latency 10 + bytes 3 = 15.
  EXPECT_NE(line_of(text, "start (the call's fixed overhead)").find(" 2.000 us"), std::string::npos)
      << text;
  EXPECT_NE(line_of(text, "latency (test)").find(" 10.000 us"), std::string::npos) << text;
  EXPECT_NE(line_of(text, "bytes held by rank tx").find(" 3.000 us"), std::string::npos) << text;
  EXPECT_NE(text.find("send 2000 B to rank 2 over test"), std::string::npos) << text;
  for (size_t at = 0; at < text.size(); at = text.find('\n', at) + 1) {
    EXPECT_EQ(text[at], '#') << "every line is a comment: " << text;
  }
  // Long paths print their two ends.
  const std::string cut = describe_path(simulate(net, p, {.explain = true}), net, 0);
  EXPECT_NE(cut.find("... 2 steps ..."), std::string::npos) << cut;
}

TEST(SimExplain, AResourcesKindDropsItsNumber) {
  EXPECT_EQ(resource_kind("rank 12 tx"), "rank tx");
  EXPECT_EQ(resource_kind("nic 0 rx"), "nic rx");
  EXPECT_EQ(resource_kind("leaf 3 up"), "leaf up");
  EXPECT_EQ(resource_kind("core"), "core");
}

}  // namespace
}  // namespace ccl::sim
