// ccl-check's verdict: the checks it made, one line per host, and the machine-readable reports
// (--json, --junit, --csv).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "measure.h"
#include "suspects.h"

namespace ccl_check {

/// One check and its outcome. Codes: CCL-CHECK-001 wrong results, 101 busbw below a threshold,
/// 102 latency above a threshold, 103 below the baseline, 201 slow link, 202 slow host.
struct Check {
  std::string name;  // "allreduce 64M busbw", "link n1-n2"
  bool passed = true;
  std::string code = "";  // when failed
  std::string reason = "";
  std::vector<std::string> hosts = {};  // the hosts it blames (empty: the whole cluster)
};

/// The threshold and baseline checks of a sweep (baseline: an earlier run's --json, or null).
std::vector<Check> sweep_checks(const std::vector<SweepPoint>& sweep,
                                const std::vector<Threshold>& thresholds,
                                const nlohmann::json& baseline, double tolerance);
/// The pairwise test's checks: one per culprit, or one passing check.
std::vector<Check> pair_checks(const std::vector<Culprit>& culprits, size_t pairs_measured);

/// "host | PASS" or "host | FAIL CCL-CHECK-NNN reason" for every host, then failures that blame
/// no host as "cluster | FAIL ...", then "ccl-check: PASS (n checks)" or "FAIL (k of n)".
std::string verdict_lines(const std::vector<std::string>& hosts, const std::vector<Check>& checks);
bool all_passed(const std::vector<Check>& checks);

nlohmann::json to_json(const std::vector<SweepPoint>& sweep);
nlohmann::json to_json(const std::vector<PairResult>& pairs,
                       const std::vector<std::string>& host_of_rank);
nlohmann::json to_json(const std::vector<Check>& checks);
/// JUnit XML: one <testsuite name="ccl-check"> with a <testcase> per check, <failure> when failed.
std::string to_junit(const std::vector<Check>& checks, double seconds);
/// collective,bytes,time_us,algbw_gbps,busbw_gbps,runs,correct
std::string to_csv(const std::vector<SweepPoint>& sweep);
/// 8 -> "8", 65536 -> "64K", 67108864 -> "64M"
std::string size_text(size_t bytes);

}  // namespace ccl_check
