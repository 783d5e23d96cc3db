#include "suspects.h"

#include <gtest/gtest.h>

namespace {

using namespace ccl_check;

// 4 hosts of one rank each: every pair at 10 us and 3 GB/s, but for what a test slows.
std::vector<PairResult> clean4() {
  std::vector<PairResult> pairs;
  for (const auto& round : pair_rounds(4)) {
    for (const auto& p : round) pairs.push_back({p, 10.0, 3.0});
  }
  return pairs;
}

const std::vector<std::string> kHosts = {"n0", "n1", "n2", "n3"};

size_t index_of(const std::vector<PairResult>& pairs, int a, int b) {
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (pairs[i].ranks == RankPair{a, b}) return i;
  }
  return pairs.size();
}

std::vector<size_t> indices(const std::vector<Suspect>& s) {
  std::vector<size_t> out;
  for (const auto& x : s) out.push_back(x.index);
  return out;
}

TEST(Suspects, ACleanClusterHasNone) {
  EXPECT_TRUE(find_suspects(clean4(), {}).empty());
  EXPECT_TRUE(blame(clean4(), {}, kHosts).empty());
}

TEST(Suspects, TheThresholdsAreClusterKits) {
  auto pairs = clean4();
  pairs[index_of(pairs, 0, 1)].latency_us = 21.5;      // > 2.1 x 10
  pairs[index_of(pairs, 0, 2)].latency_us = 20.9;      // not
  pairs[index_of(pairs, 1, 3)].bandwidth_gbps = 2.78;  // < 93% of 3
  pairs[index_of(pairs, 2, 3)].bandwidth_gbps = 2.80;  // not
  const auto s = find_suspects(pairs, {});
  EXPECT_EQ(indices(s), (std::vector<size_t>{index_of(pairs, 0, 1), index_of(pairs, 1, 3)}));
  EXPECT_NE(s[0].reason.find("latency 21.5 us"), std::string::npos) << s[0].reason;
  EXPECT_NE(s[1].reason.find("bandwidth 2.78 GB/s < 93%"), std::string::npos) << s[1].reason;
  EXPECT_EQ(find_suspects(pairs, {.latency_factor = 2.0, .bandwidth_fraction = 0.93}).size(), 3u);
}

TEST(Suspects, OneSlowLinkIsNamedAsThatLink) {
  auto pairs = clean4();
  const size_t slow = index_of(pairs, 1, 2);
  pairs[slow].bandwidth_gbps = 0.5;
  const auto culprits = blame(pairs, indices(find_suspects(pairs, {})), kHosts);
  ASSERT_EQ(culprits.size(), 1u);
  EXPECT_EQ(culprits[0].kind, Culprit::Link);
  EXPECT_EQ(culprits[0].host, "n1");
  EXPECT_EQ(culprits[0].peer_host, "n2");
}

TEST(Suspects, AHostWhoseEveryLinkIsSlowIsNamedAsTheHost) {
  auto pairs = clean4();
  for (auto& p : pairs) {
    if (p.ranks.first == 3 || p.ranks.second == 3) p.latency_us = 50;
  }
  const auto culprits = blame(pairs, indices(find_suspects(pairs, {})), kHosts);
  ASSERT_EQ(culprits.size(), 1u);
  EXPECT_EQ(culprits[0].kind, Culprit::Host);
  EXPECT_EQ(culprits[0].host, "n3");
}

// A host whose every link is slow hides nothing: one of its links far slower than the others of
// its two hosts is named too (as a tc-shaped link shows, whose shaping slows its hosts' ports).
TEST(Suspects, ALinkFarSlowerThanItsSlowHostsOtherLinksIsNamedToo) {
  auto pairs = clean4();
  for (auto& p : pairs) {
    if (p.ranks.first == 2 || p.ranks.second == 2) p.bandwidth_gbps = 2.4;  // host n2: 80%
  }
  pairs[index_of(pairs, 2, 3)].bandwidth_gbps = 0.6;  // and its link to n3: 20%
  const auto culprits = blame(pairs, indices(find_suspects(pairs, {})), kHosts);
  ASSERT_EQ(culprits.size(), 2u);
  EXPECT_EQ(culprits[0].kind, Culprit::Host);
  EXPECT_EQ(culprits[0].host, "n2");
  EXPECT_EQ(culprits[1].kind, Culprit::Link);
  EXPECT_EQ(culprits[1].host, "n2");
  EXPECT_EQ(culprits[1].peer_host, "n3");
  EXPECT_NE(culprits[1].reason.find("0.6 GB/s < 93%"), std::string::npos) << culprits[1].reason;
  // The host's other links, as slow as each other, are not.
  pairs[index_of(pairs, 2, 3)].bandwidth_gbps = 2.4;
  EXPECT_EQ(blame(pairs, indices(find_suspects(pairs, {})), kHosts).size(), 1u);
}

TEST(Suspects, TwoHostsCannotTellAHostFromTheLink) {
  const std::vector<PairResult> pairs = {{{0, 1}, 10, 3}, {{0, 2}, 10, 0.1}, {{1, 2}, 10, 3}};
  const std::vector<std::string> hosts = {"a", "a", "b"};  // ranks 0, 1 on host a
  const auto culprits = blame(pairs, {1}, hosts);
  ASSERT_EQ(culprits.size(), 1u);
  EXPECT_EQ(culprits[0].kind, Culprit::Link);
  EXPECT_EQ(culprits[0].host, "a");
  EXPECT_EQ(culprits[0].peer_host, "b");
}

}  // namespace
