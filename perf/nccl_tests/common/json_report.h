// The --json document: the run's parameters, the ranks, and one object per row with the
// out-of-place and in-place results. Written by rank 0 once the run is over.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "options.h"

namespace ccl::perf {

struct Measurement {
  double time_us = 0;
  double algbw = 0;              // GB/s
  double busbw = 0;              // GB/s
  std::optional<int64_t> wrong;  // empty when not checked
};

struct RowResult {
  size_t size = 0;   // bytes (the "size" column)
  size_t count = 0;  // elements (the "count" column)
  std::string type;
  std::string redop;
  int root = -1;
  Measurement out_of_place;
  Measurement in_place;
};

struct RankDesc {
  int rank = 0;
  int pid = 0;
  std::string host;
  int device = 0;  // index of the rank among the ranks on its host
};

struct RunReport {
  std::string program;     // "all_reduce_perf"
  std::string collective;  // "all_reduce"
  int ccl_version = 0;
  int nranks = 0;
  Options options;
  std::vector<RankDesc> ranks;
  std::vector<RowResult> rows;
  int64_t out_of_bounds = 0;
  double avg_busbw = 0;
};

// The whole document, indented, ending in a newline.
std::string to_json(const RunReport& report);
// A JSON string literal (with quotes) for s.
std::string json_string(const std::string& s);

}  // namespace ccl::perf
