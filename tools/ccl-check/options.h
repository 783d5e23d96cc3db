// ccl-check's command line.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "suspects.h"

namespace ccl_check {

/// A limit on one collective at one size: busbw at least `min_busbw_gbps`, or latency at most
/// `max_latency_us` ("allreduce:64M=40", "allreduce:8=20us").
struct Threshold {
  std::string collective;
  size_t bytes = 0;
  std::optional<double> min_busbw_gbps;
  std::optional<double> max_latency_us;
  std::string text;  // as given, for the report
};

struct Options {
  size_t min_bytes = 8, max_bytes = size_t{64} << 20;
  size_t factor = 2;
  int warmup = 5, iters = 20, repeats = 3;
  double self_tolerance = 0.25;  // a size's repeats may differ by this much before it reruns
  std::vector<std::string> collectives = {"allreduce", "broadcast",     "reduce",
                                          "allgather", "reducescatter", "alltoall"};
  bool sweep = true, pairs = true;
  size_t pair_bytes = size_t{4} << 20;
  int pair_iters = 10;
  SuspectRule rule;
  // Rounds a suspect pair is retested in, beside a reference pair; confirmed slow only if it
  // breaks the rule in every one (main.cc, confirm_slow_pairs).
  int confirm_rounds = 5;
  std::vector<Threshold> thresholds;
  std::string baseline;  // an earlier run's --json
  double baseline_tolerance = 0.10;
  std::string json, junit, csv;
  std::string prometheus;  // Prometheus text for node_exporter's textfile collector
  bool quiet = false;
};

/// Parses argv; throws std::invalid_argument naming the flag and the bad value.
Options parse_options(int argc, char** argv);
/// "64M" / "8" / "1K" / "2G" (powers of 1024) -> bytes; throws std::invalid_argument.
size_t parse_bytes(const std::string& text);
/// "allreduce:64M=40" (GB/s busbw) or "allreduce:8=20us"; throws std::invalid_argument.
Threshold parse_threshold(const std::string& text, bool latency);
/// One threshold per line ("min-busbw allreduce:64M=40" / "max-latency allreduce:8=20us"), '#'
/// comments: the per-machine-type file of --thresholds.
std::vector<Threshold> read_threshold_file(const std::string& path);
/// The usage text.
std::string usage();

}  // namespace ccl_check
