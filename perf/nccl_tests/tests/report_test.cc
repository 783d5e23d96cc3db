#include "report.h"

#include <gtest/gtest.h>

#include <string>

namespace ccl::perf {
namespace {

std::string rstrip_lines(const std::string& s) {
  std::string out, line;
  for (char c : s) {
    if (c == '\n') {
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out += line + "\n";
      line.clear();
    } else {
      line += c;
    }
  }
  return out + line;
}

TEST(Report, NumbersAsNcclTests) {
  EXPECT_EQ(format_number(9.02, 7), "   9.02");
  EXPECT_EQ(format_number(0.0, 7), "   0.00");
  EXPECT_EQ(format_number(1037.3, 7), "1037.30");
  EXPECT_EQ(format_number(12345.67, 7), "12345.7");
  EXPECT_EQ(format_number(123456.7, 7), " 123457");
  EXPECT_EQ(format_number(1234567.0, 7), "1234567");
  EXPECT_EQ(format_number(12345678.0, 7), "1.2e+07");
  EXPECT_EQ(format_number(242.61, 6), "242.61");
  EXPECT_EQ(format_number(4.6, 6), "  4.60");
  EXPECT_EQ(format_number(1234.5, 6), "1234.5");
  EXPECT_EQ(format_number(123456.0, 6), "123456");
  EXPECT_EQ(format_number(1234567.0, 6), " 1e+06");
}

TEST(Report, ColumnHeaderMatchesNcclTests) {
  const std::string expected =
      "#\n"
      "#                                                              out-of-place                 "
      "      in-place\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
      "time   algbw   busbw #wrong\n"
      "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            "
      "(us)  (GB/s)  (GB/s)\n";
  EXPECT_EQ(rstrip_lines(column_header(false)), expected);
  EXPECT_NE(column_header(true).find("cputime"), std::string::npos);
}

TEST(Report, RowMatchesNcclTests) {
  const std::string row = row_preamble(8, 2, "float", "sum", -1) +
                          row_body(9.02, 0.000887, 0.000887, 0) + row_body(8.81, 0.0009, 0.0009, 0);
  EXPECT_EQ(row,
            "           8             2     float     sum      -1     9.02    0.00    0.00      0"
            "     8.81    0.00    0.00      0");
  EXPECT_EQ(row_preamble(134217728, 33554432, "float", "sum", -1) +
                row_body(1037.3, 129.39, 242.61, std::nullopt),
            "   134217728      33554432     float     sum      -1  1037.30  129.39  242.61    N/A");
  EXPECT_EQ(row_preamble(1024, 512, "bfloat16", "none", 3),
            "        1024           512  bfloat16    none       3");
  EXPECT_EQ(row_body(5, 1, 1, 123).substr(25), "    123");
}

TEST(Report, HeaderAndRankLines) {
  Options o;
  o.min_bytes = 8;
  o.max_bytes = 64 << 20;
  o.step_factor = 2;
  o.warmup_iters = 5;
  EXPECT_EQ(run_header(o),
            "# nThread 1 nGpus 1 minBytes 8 maxBytes 67108864 step: 2(factor) warmup iters: 5 "
            "iters: 20 agg iters: 1 validation: 1 graph: 0\n#\n");
  o.step_factor = 1;
  o.blocking = 1;
  const std::string h = run_header(o);
  EXPECT_NE(h.find("step: 1048576(bytes)"), std::string::npos);
  EXPECT_NE(h.find("# Blocking Enabled: wait for completion and barrier after each collective"),
            std::string::npos);
  EXPECT_EQ(rank_line(0, 0, 12345, "node1", 0),
            "#  Rank  0 Group  0 Pid  12345 on      node1 device  0 [host] CPU\n");
}

TEST(Report, Footer) {
  EXPECT_EQ(footer(0, 4.61234),
            "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 4.61234 \n#\n");
  EXPECT_EQ(footer(3, 0).substr(0, 38), "# Out of bounds values : 3 FAILED\n# Av");
}

}  // namespace
}  // namespace ccl::perf
