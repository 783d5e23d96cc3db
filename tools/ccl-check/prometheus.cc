#include "prometheus.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "core/diagnostics/metrics_text.h"  // the library's writer, compiled in (CMakeLists.txt)

namespace ccl_check {

namespace {

using ccl::metrics::MetricType;
using ccl::metrics::TextWriter;

double flag(bool value) { return value ? 1.0 : 0.0; }

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : ",") + w;
  return out;
}

void gauge(TextWriter& w, const char* name, const char* help, double value) {
  w.family(name, MetricType::Gauge, help);
  w.sample(name, {}, value);
}

}  // namespace

std::string to_prometheus(const PrometheusReport& r) {
  TextWriter w;
  std::set<std::string> hosts(r.host_of_rank.begin(), r.host_of_rank.end());
  gauge(w, "ccl_check_passed", "1 when every check of the last ccl-check run passed, else 0.",
        flag(all_passed(r.checks)));
  gauge(w, "ccl_check_last_run_timestamp_seconds", "When the last ccl-check run ended (Unix time).",
        r.timestamp_seconds);
  gauge(w, "ccl_check_duration_seconds", "How long the last ccl-check run took.", r.seconds);
  gauge(w, "ccl_check_ranks", "Ranks of the last ccl-check run.",
        static_cast<double>(r.host_of_rank.size()));
  gauge(w, "ccl_check_hosts", "Hosts of the last ccl-check run.",
        static_cast<double>(hosts.size()));

  w.family("ccl_check_check_passed", MetricType::Gauge,
           "1 when the check passed, else 0; code: its CCL-CHECK code when it failed, hosts: the "
           "hosts it blames (empty: the whole cluster).");
  for (const Check& c : r.checks) {
    w.sample("ccl_check_check_passed",
             {{"check", c.name}, {"code", c.passed ? "" : c.code}, {"hosts", joined(c.hosts)}},
             flag(c.passed));
  }
  // As the verdict lines: a host fails when a failed check blames it.
  w.family("ccl_check_host_passed", MetricType::Gauge,
           "1 when no failed check of the last run blames the host, else 0.");
  for (const std::string& h : hosts) {
    bool passed = true;
    for (const Check& c : r.checks) {
      if (!c.passed && std::find(c.hosts.begin(), c.hosts.end(), h) != c.hosts.end()) {
        passed = false;
      }
    }
    w.sample("ccl_check_host_passed", {{"host", h}}, flag(passed));
  }

  w.family("ccl_check_sweep_time_seconds", MetricType::Gauge,
           "Time per call of a collective at a size (nccl-tests' size), as the slowest rank saw "
           "it, median of the repeats.");
  for (const SweepPoint& p : r.sweep) {
    w.sample("ccl_check_sweep_time_seconds",
             {{"collective", p.collective}, {"size", size_text(p.bytes)}}, p.time_us / 1e6);
  }
  w.family("ccl_check_sweep_busbw_bytes_per_second", MetricType::Gauge,
           "Bus bandwidth of a collective at a size, as nccl-tests computes it.");
  for (const SweepPoint& p : r.sweep) {
    w.sample("ccl_check_sweep_busbw_bytes_per_second",
             {{"collective", p.collective}, {"size", size_text(p.bytes)}}, p.busbw_gbps * 1e9);
  }

  // The pairs, per host: its slowest link's bandwidth and its slowest latency.
  struct Worst {
    double bandwidth = std::numeric_limits<double>::infinity();
    double latency = 0;
  };
  std::map<std::string, Worst> worst;
  for (const PairResult& p : r.pairs) {
    for (const int rank : {p.ranks.first, p.ranks.second}) {
      if (rank < 0 || static_cast<size_t>(rank) >= r.host_of_rank.size()) continue;
      Worst& h = worst[r.host_of_rank[static_cast<size_t>(rank)]];
      h.bandwidth = std::min(h.bandwidth, p.bandwidth_gbps * 1e9);
      h.latency = std::max(h.latency, p.latency_us / 1e6);
    }
  }
  w.family("ccl_check_host_min_pair_bandwidth_bytes_per_second", MetricType::Gauge,
           "The lowest bandwidth (each direction, both at once) of the pairs of ranks that "
           "include a rank of the host.");
  for (const auto& [host, h] : worst) {
    w.sample("ccl_check_host_min_pair_bandwidth_bytes_per_second", {{"host", host}}, h.bandwidth);
  }
  w.family("ccl_check_host_max_pair_latency_seconds", MetricType::Gauge,
           "The highest one-way latency (8-byte ping-pong, median) of the pairs of ranks that "
           "include a rank of the host.");
  for (const auto& [host, h] : worst) {
    w.sample("ccl_check_host_max_pair_latency_seconds", {{"host", host}}, h.latency);
  }
  if (r.ring) {
    gauge(w, "ccl_check_ring_bandwidth_bytes_per_second",
          "Per-rank bandwidth of a ring of all ranks sending at once (the slowest rank's median).",
          r.ring->bandwidth_gbps * 1e9);
  }
  return w.text();
}

}  // namespace ccl_check
