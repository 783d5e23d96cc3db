#include "suspects.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

namespace ccl_check {

namespace {

std::string format(const char* fmt, double a, double b, double c) {
  char buf[160];
  std::snprintf(buf, sizeof buf, fmt, a, b, c);
  return buf;
}

}  // namespace

std::vector<Suspect> find_suspects(const std::vector<PairResult>& pairs, const SuspectRule& rule) {
  std::vector<Suspect> out;
  if (pairs.empty()) return out;
  double fastest = pairs.front().latency_us, best = pairs.front().bandwidth_gbps;
  for (const PairResult& p : pairs) {
    fastest = std::min(fastest, p.latency_us);
    best = std::max(best, p.bandwidth_gbps);
  }
  for (size_t i = 0; i < pairs.size(); ++i) {
    const PairResult& p = pairs[i];
    std::string reason;
    if (p.latency_us > rule.latency_factor * fastest) {
      reason = format("latency %.1f us > %.2g x the fastest pair's %.1f us", p.latency_us,
                      rule.latency_factor, fastest);
    }
    if (p.bandwidth_gbps < rule.bandwidth_fraction * best) {
      if (!reason.empty()) reason += "; ";
      reason += format("bandwidth %.3g GB/s < %.0f%% of the best pair's %.3g GB/s",
                       p.bandwidth_gbps, rule.bandwidth_fraction * 100, best);
    }
    if (!reason.empty()) out.push_back({i, reason});
  }
  return out;
}

std::vector<Culprit> blame(const std::vector<PairResult>& pairs,
                           const std::vector<size_t>& confirmed_slow,
                           const std::vector<std::string>& host_of_rank, const SuspectRule& rule) {
  using HostPair = std::pair<std::string, std::string>;  // ordered
  auto hosts_of = [&](const PairResult& p) {
    const std::string& a = host_of_rank.at(static_cast<size_t>(p.ranks.first));
    const std::string& b = host_of_rank.at(static_cast<size_t>(p.ranks.second));
    return a < b ? HostPair{a, b} : HostPair{b, a};
  };
  // Per pair of hosts: slow if any of its rank pairs is confirmed slow; its worst bandwidth.
  struct HostLink {
    bool slow = false;
    double gbps = 0;
  };
  std::map<HostPair, HostLink> links;
  for (const PairResult& p : pairs) {
    auto [it, fresh] = links.emplace(hosts_of(p), HostLink{false, p.bandwidth_gbps});
    if (!fresh) it->second.gbps = std::min(it->second.gbps, p.bandwidth_gbps);
  }
  for (const size_t i : confirmed_slow) links[hosts_of(pairs.at(i))].slow = true;

  std::set<std::string> hosts(host_of_rank.begin(), host_of_rank.end());
  std::vector<Culprit> out;
  std::map<HostPair, std::set<std::string>> explained;  // by the slow hosts at either end
  for (const std::string& h : hosts) {
    size_t mine = 0, mine_slow = 0;
    bool some_other_fine = false;
    for (const auto& [hp, link] : links) {
      if (hp.first == hp.second) continue;  // inside one host: says nothing about its links
      if (hp.first == h || hp.second == h) {
        ++mine;
        mine_slow += link.slow ? 1 : 0;
      } else if (!link.slow) {
        some_other_fine = true;  // a link between two other hosts is fine
      }
    }
    if (mine > 0 && mine_slow == mine && some_other_fine) {
      out.push_back({Culprit::Host, h, "",
                     "every one of its " + std::to_string(mine) +
                         " links to other hosts is slow, other hosts' links are not"});
      for (const auto& [hp, link] : links) {
        if (hp.first == h || hp.second == h) explained[hp].insert(h);
      }
    }
  }
  for (const auto& [hp, link] : links) {
    if (!link.slow) continue;
    if (explained.count(hp) == 0) {
      out.push_back({Culprit::Link, hp.first, hp.second,
                     hp.first == hp.second ? "slow between ranks of this host"
                                           : "slow between these two hosts"});
      continue;
    }
    // A slow host's link that is slower still than that host's other links is a fault of its
    // own too (a host whose every link runs at 80% hides a link at 20% otherwise).
    std::vector<double> others;
    const std::set<std::string>& slow_ends = explained[hp];
    for (const auto& [other, other_link] : links) {
      if (other == hp || other.first == other.second) continue;
      if (slow_ends.count(other.first) != 0 || slow_ends.count(other.second) != 0) {
        others.push_back(other_link.gbps);
      }
    }
    if (others.empty()) continue;
    std::nth_element(others.begin(), others.begin() + others.size() / 2, others.end());
    const double median = others[others.size() / 2];
    if (link.gbps < rule.bandwidth_fraction * median) {
      char reason[160];
      std::snprintf(reason, sizeof(reason),
                    "slower still than the slow host's other links: %.3g GB/s < %.0f%% of "
                    "their median %.3g GB/s",
                    link.gbps, 100 * rule.bandwidth_fraction, median);
      out.push_back({Culprit::Link, hp.first, hp.second, reason});
    }
  }
  return out;
}

}  // namespace ccl_check
