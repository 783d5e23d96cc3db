// ccl-check's --prometheus text (tools/ccl-check/prometheus.h), read back strictly (prom_text.h):
// a run with a slow link and a failed threshold names the link's hosts, fails those hosts only,
// and gives the sweep and the per-host pair figures in base units; the file is replaced whole.
#include <gtest/gtest.h>

#include <string>

#include "prom_text.h"
#include "prometheus.h"

namespace {

using namespace ccl_check;
using ccl::test::parse_prom_text;

PrometheusReport example() {
  PrometheusReport r;
  r.host_of_rank = {"n1", "n1", "n2", "n3"};
  r.sweep = {{"allreduce", 8, 12.5, 0, 0.001, 3, true},
             {"allreduce", 64 << 20, 20000, 0, 5.5, 3, true}};
  r.pairs = {{{0, 1}, 2.0, 10.0}, {{0, 2}, 5.0, 3.0}, {{1, 3}, 4.0, 1.0}};
  r.ring = RingResult{1 << 20, 100, 2.5, 3};
  r.checks = {{.name = "allreduce 8 results"},
              {.name = "allreduce 64M busbw",
               .passed = false,
               .code = "CCL-CHECK-101",
               .reason = "busbw 5.50 GB/s < 40.00 GB/s"},
              {.name = "link n2-n3",
               .passed = false,
               .code = "CCL-CHECK-201",
               .reason = "slow link n2-n3: ...",
               .hosts = {"n2", "n3"}}};
  r.seconds = 42.5;
  r.timestamp_seconds = 1.7e9;
  return r;
}

TEST(CclCheckPrometheus, NamesTheBadLinkAndGivesBaseUnits) {
  const auto text = parse_prom_text(to_prometheus(example()));
  EXPECT_EQ(text.sum("ccl_check_passed", {}), 0);
  EXPECT_EQ(text.sum("ccl_check_ranks", {}), 4);
  EXPECT_EQ(text.sum("ccl_check_hosts", {}), 3);
  EXPECT_EQ(text.sum("ccl_check_duration_seconds", {}), 42.5);
  EXPECT_EQ(text.sum("ccl_check_last_run_timestamp_seconds", {}), 1.7e9);
  for (const auto& [family, type] : text.types) EXPECT_EQ(type, "gauge") << family;

  EXPECT_EQ(text.sum("ccl_check_check_passed", {{"check", "allreduce 8 results"}, {"code", ""}}),
            1);
  EXPECT_EQ(text.sum("ccl_check_check_passed",
                     {{"check", "allreduce 64M busbw"}, {"code", "CCL-CHECK-101"}, {"hosts", ""}}),
            0);
  EXPECT_EQ(text.sum("ccl_check_check_passed",
                     {{"check", "link n2-n3"}, {"code", "CCL-CHECK-201"}, {"hosts", "n2,n3"}}),
            0);
  EXPECT_EQ(text.sum("ccl_check_host_passed", {{"host", "n1"}}), 1);
  EXPECT_EQ(text.sum("ccl_check_host_passed", {{"host", "n2"}}), 0);
  EXPECT_EQ(text.sum("ccl_check_host_passed", {{"host", "n3"}}), 0);

  EXPECT_DOUBLE_EQ(
      text.sum("ccl_check_sweep_time_seconds", {{"collective", "allreduce"}, {"size", "8"}}),
      12.5e-6);
  EXPECT_DOUBLE_EQ(text.sum("ccl_check_sweep_busbw_bytes_per_second",
                            {{"collective", "allreduce"}, {"size", "64M"}}),
                   5.5e9);
  // n1 is in every pair: its slowest is 1-3 (1 GB/s), its worst latency 0-2 (5 us).
  EXPECT_DOUBLE_EQ(text.sum("ccl_check_host_min_pair_bandwidth_bytes_per_second", {{"host", "n1"}}),
                   1e9);
  EXPECT_DOUBLE_EQ(text.sum("ccl_check_host_max_pair_latency_seconds", {{"host", "n1"}}), 5e-6);
  EXPECT_DOUBLE_EQ(text.sum("ccl_check_host_max_pair_latency_seconds", {{"host", "n3"}}), 4e-6);
  EXPECT_DOUBLE_EQ(text.sum("ccl_check_ring_bandwidth_bytes_per_second", {}), 2.5e9);
}

TEST(CclCheckPrometheus, APassingRunWithoutPairs) {
  PrometheusReport r;
  r.host_of_rank = {"solo"};
  r.checks = {{.name = "allreduce 8 results"}};
  const auto text = parse_prom_text(to_prometheus(r));
  EXPECT_EQ(text.sum("ccl_check_passed", {}), 1);
  EXPECT_EQ(text.sum("ccl_check_host_passed", {{"host", "solo"}}), 1);
  EXPECT_TRUE(text.find("ccl_check_ring_bandwidth_bytes_per_second", {}).empty());
}

}  // namespace
