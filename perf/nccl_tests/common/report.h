// The text the *_perf binaries print, in nccl-tests' layout (column widths, number formats,
// header and footer lines), so that scripts written for nccl-tests parse it unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "options.h"

namespace ccl::perf {

// A number right-aligned in `width` columns with as many decimals as fit: 2 below
// 10^(width-3), then 1, then 0, then exponent notation (nccl-tests' rule).
std::string format_number(double value, int width);

// "# nThread 1 nGpus 1 minBytes ... graph: 0" and the "# Blocking Enabled" line if any, then "#".
std::string run_header(const Options& o);
// "#  Rank  0 Group  0 Pid  12345 on   hostname device  0 [host] CPU"
std::string rank_line(int rank, int group, int pid, const std::string& host, int device);
// "#", then the three column-header lines.
std::string column_header(bool cputime);
// The left part of a row: size, count, type, redop, root.
std::string row_preamble(size_t bytes, size_t count, const char* type, const char* redop, int root);
// One half of a row (out-of-place or in-place): time, algbw, busbw, #wrong ("N/A" unchecked).
std::string row_body(double time_us, double algbw, double busbw, std::optional<int64_t> wrong);
// "# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 1.23 " and "#".
std::string footer(int64_t errors, double avg_busbw);

}  // namespace ccl::perf
