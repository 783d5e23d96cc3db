#include "json_report.h"

#include <gtest/gtest.h>

#include <string>

#include "rank_info.h"

namespace ccl::perf {
namespace {

TEST(Json, StringEscaping) {
  EXPECT_EQ(json_string("plain"), "\"plain\"");
  EXPECT_EQ(json_string("a\"b\\c\nd\te\x01"), "\"a\\\"b\\\\c\\nd\\te\\u0001\"");
}

TEST(Json, Document) {
  RunReport r;
  r.program = "all_reduce_perf";
  r.collective = "all_reduce";
  r.ccl_version = 100;
  r.nranks = 2;
  r.options.min_bytes = 8;
  r.ranks = {{0, 11, "h", 0}, {1, 12, "h", 1}};
  RowResult row;
  row.size = 8;
  row.count = 2;
  row.type = "float";
  row.redop = "sum";
  row.root = -1;
  row.out_of_place = {9.5, 0.25, 0.25, int64_t{0}};
  row.in_place = {9.0, 0.5, 0.5, std::nullopt};
  r.rows = {row};
  r.avg_busbw = 0.375;
  const std::string j = to_json(r);
  EXPECT_NE(j.find("\"program\": \"all_reduce_perf\""), std::string::npos);
  EXPECT_NE(j.find("\"minbytes\": 8"), std::string::npos);
  EXPECT_NE(j.find("\"ops\": [\"sum\"]"), std::string::npos);
  EXPECT_NE(j.find("\"datatypes\": [\"float\"]"), std::string::npos);
  EXPECT_NE(j.find("\"time_us\": 9.5"), std::string::npos);
  EXPECT_NE(j.find("\"wrong\": 0"), std::string::npos);
  EXPECT_NE(j.find("\"wrong\": null"), std::string::npos);
  EXPECT_NE(j.find("\"avg_busbw\": 0.375"), std::string::npos);
  EXPECT_NE(j.find("\"ok\": true"), std::string::npos);
  EXPECT_NE(j.find("\"host\": \"h\""), std::string::npos);
  // Balanced brackets, one document.
  int depth = 0;
  for (char c : j) {
    depth += (c == '{' || c == '[') - (c == '}' || c == ']');
    ASSERT_GE(depth, 0);
  }
  EXPECT_EQ(depth, 0);
  EXPECT_EQ(j.back(), '\n');
}

TEST(RankInfo, TableRoundTripAndDeviceIndex) {
  std::vector<unsigned char> table(4 * kRankRecordBytes, 0);
  encode_rank_record(100, "a", &table[0]);
  encode_rank_record(101, "b", &table[kRankRecordBytes]);
  encode_rank_record(102, "a", &table[2 * kRankRecordBytes]);
  encode_rank_record(103, std::string(500, 'x'), &table[3 * kRankRecordBytes]);
  const auto ranks = decode_rank_table(table.data(), 4);
  ASSERT_EQ(ranks.size(), 4u);
  EXPECT_EQ(ranks[0].pid, 100);
  EXPECT_EQ(ranks[2].host, "a");
  EXPECT_EQ(ranks[0].device, 0);
  EXPECT_EQ(ranks[1].device, 0);
  EXPECT_EQ(ranks[2].device, 1);
  EXPECT_EQ(ranks[3].host.size(), kRankRecordBytes - 5);  // truncated, still terminated
  EXPECT_FALSE(local_hostname().empty());
}

}  // namespace
}  // namespace ccl::perf
