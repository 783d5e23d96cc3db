#include "report.h"

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <vector>

namespace ccl::perf {
namespace {

std::string printf_string(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string printf_string(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  va_list copy;
  va_copy(copy, ap);
  const int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::vector<char> buf(static_cast<size_t>(n > 0 ? n : 0) + 1);
  std::vsnprintf(buf.data(), buf.size(), fmt, ap);
  va_end(ap);
  return std::string(buf.data(), static_cast<size_t>(n > 0 ? n : 0));
}

}  // namespace

std::string format_number(double value, int width) {
  int digits = 0;  // digits before the decimal point (0 for values below 1)
  if (std::isfinite(value)) {
    for (double limit = 1; value >= limit && digits < 40; limit *= 10) ++digits;
  } else if (value > 0) {
    digits = 40;  // inf
  }
  if (digits < width - 2) return printf_string("%*.2f", width, value);
  if (digits < width - 1) return printf_string("%*.1f", width, value);
  if (digits < width + 1) return printf_string("%*.0f", width, value);
  if (width >= 7) return printf_string("%*.1e", width, value);
  return printf_string("%*.0e", width, value);
}

std::string run_header(const Options& o) {
  const bool factor = o.step_factor > 1;
  std::string s = printf_string(
      "# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d "
      "agg iters: %d validation: %d graph: %d\n",
      o.nthreads, o.ngpus, o.min_bytes, o.max_bytes, factor ? o.step_factor : o.step_bytes,
      factor ? "factor" : "bytes", o.warmup_iters, o.iters, o.agg_iters, o.check, o.cuda_graph);
  if (o.blocking == 1) {
    s += "# Blocking Enabled: wait for completion and barrier after each collective \n";
  } else if (o.blocking > 1) {
    s += "# Blocking Enabled: wait for completion after each collective (no barrier) \n";
  }
  s += "#\n";
  return s;
}

std::string rank_line(int rank, int group, int pid, const std::string& host, int device) {
  return printf_string("#  Rank %2d Group %2d Pid %6d on %10s device %2d [host] CPU\n", rank, group,
                       pid, host.c_str(), device);
}

std::string column_header(bool cputime) {
  const char* t = cputime ? "cputime" : "time";
  std::string s = "#\n";
  s += printf_string(
      "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          "
      "\n",
      "", "", "", "", "");
  s += printf_string("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size",
                     "count", "type", "redop", "root", t, "algbw", "busbw", "#wrong", t, "algbw",
                     "busbw", "#wrong");
  s += printf_string("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)",
                     "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
                     "(GB/s)", "");
  return s;
}

std::string row_preamble(size_t bytes, size_t count, const char* type, const char* redop,
                         int root) {
  return printf_string("%12zu  %12zu  %8s  %6s  %6i", bytes, count, type, redop, root);
}

std::string row_body(double time_us, double algbw, double busbw, std::optional<int64_t> wrong) {
  const std::string w = wrong ? std::to_string(*wrong) : std::string("N/A");
  return printf_string("  %7s  %6s  %6s  %5s", format_number(time_us, 7).c_str(),
                       format_number(algbw, 6).c_str(), format_number(busbw, 6).c_str(), w.c_str());
}

std::string footer(int64_t errors, double avg_busbw) {
  std::string s = printf_string("# %-20s : %lld %s\n", "Out of bounds values",
                                static_cast<long long>(errors), errors ? "FAILED" : "OK");
  s += printf_string("# %-20s : %g \n", "Avg bus bandwidth", avg_busbw);
  s += "#\n";
  return s;
}

}  // namespace ccl::perf
