// ccl-check's verdict as Prometheus text (--prometheus FILE), for node_exporter's textfile
// collector: one gauge per check, per host, per swept size, and the pairs summed up per host
// (every pair is in --json). docs/ccl-check.md lists the series.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "measure.h"
#include "report.h"
#include "suspects.h"

namespace ccl_check {

struct PrometheusReport {
  std::vector<std::string> host_of_rank;
  std::vector<SweepPoint> sweep;
  std::vector<PairResult> pairs;
  std::optional<RingResult> ring;
  std::vector<Check> checks;
  double seconds = 0;            // the run's duration
  double timestamp_seconds = 0;  // its end, Unix time
};

/// The text: ccl_check_passed, ccl_check_last_run_timestamp_seconds,
/// ccl_check_duration_seconds, ccl_check_ranks, ccl_check_hosts, ccl_check_check_passed{check,
/// code, hosts}, ccl_check_host_passed{host}, ccl_check_sweep_time_seconds{collective, size},
/// ccl_check_sweep_busbw_bytes_per_second{collective, size}, ccl_check_host_min_pair_bandwidth_
/// bytes_per_second{host}, ccl_check_host_max_pair_latency_seconds{host} and
/// ccl_check_ring_bandwidth_bytes_per_second.
std::string to_prometheus(const PrometheusReport& report);

}  // namespace ccl_check
