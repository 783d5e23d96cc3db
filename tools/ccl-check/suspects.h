// Which pairs of the pairwise test are slow, and what is to blame: a host whose every pair is slow
// (its NIC, its cable, its switch port), or a single link between two hosts.
#pragma once

#include <string>
#include <vector>

#include "pair_rounds.h"

namespace ccl_check {

/// One pair's measurement: the median one-way latency of small messages and the bandwidth of
/// large ones (both directions at once, GB/s per direction).
struct PairResult {
  RankPair ranks;
  double latency_us = 0;
  double bandwidth_gbps = 0;
};

/// A pair is suspect when its latency exceeds latency_factor times the fastest pair's, or its
/// bandwidth is below bandwidth_fraction of the best pair's (ClusterKit's 2.1x and 93%).
struct SuspectRule {
  double latency_factor = 2.1;
  double bandwidth_fraction = 0.93;
};

/// Indices into `pairs` of the suspects, with the reason of each ("latency 41.2 us > 2.1 x 9.8
/// us", "bandwidth 0.41 GB/s < 93% of 2.95 GB/s").
struct Suspect {
  size_t index;
  std::string reason;
};
std::vector<Suspect> find_suspects(const std::vector<PairResult>& pairs, const SuspectRule& rule);

/// What the confirmed suspects point at. Pairs are grouped by the hosts of their ranks
/// (host_of_rank); a host is to blame when every pair between it and another host is
/// confirmed slow while a pair between two other hosts is fine; otherwise each slow pair of
/// hosts is a link to blame (both hosts named: with two hosts a slow host and a slow link look
/// alike). A slow pair inside one host is a link of that host to itself. A slow host's link is
/// named as well when its bandwidth is below rule.bandwidth_fraction of the median of that host's
/// other links (a link at a fifth behind a host at four fifths).
struct Culprit {
  enum Kind { Host, Link } kind;
  std::string host;       // the slow host, or one end of the link
  std::string peer_host;  // the other end of the link (empty for a host)
  std::string reason;
};
std::vector<Culprit> blame(const std::vector<PairResult>& pairs,
                           const std::vector<size_t>& confirmed_slow,
                           const std::vector<std::string>& host_of_rank,
                           const SuspectRule& rule = {});

}  // namespace ccl_check
