// The trace's JSON (src/core/trace/trace_writer.h), parsed back with nlohmann::json: escaping of
// any name, the metadata, the events and their times in microseconds.
#include "core/trace/trace_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "ccl/ccl.h"

namespace ccl::trace {
namespace {

using nlohmann::json;

std::string as_json(std::string_view text) {
  std::string out;
  append_json_string(out, text);
  return out;
}

TEST(TraceJson, EscapesWhatJsonNeeds) {
  EXPECT_EQ(as_json("plain"), "\"plain\"");
  EXPECT_EQ(as_json("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(as_json("l1\nl2\t\r"), "\"l1\\nl2\\t\\r\"");
  EXPECT_EQ(as_json(std::string("\x01\x1f\x7f", 3)), "\"\\u0001\\u001f\\u007f\"");
  EXPECT_EQ(as_json(std::string("nul\0x", 5)), "\"nul\\u0000x\"");
  // Valid UTF-8 stays; invalid bytes become U+FFFD, so the result is always valid JSON.
  EXPECT_EQ(as_json("h\xc3\xa9te"), "\"h\xc3\xa9te\"");
  EXPECT_EQ(as_json("\xe2\x82\xac \xf0\x9f\x98\x80"), "\"\xe2\x82\xac \xf0\x9f\x98\x80\"");
  EXPECT_EQ(as_json("bad\xff"), "\"bad\\ufffd\"");
  EXPECT_EQ(as_json("\xc3"), "\"\\ufffd\"");                        // truncated
  EXPECT_EQ(as_json("\xc0\xaf"), "\"\\ufffd\\ufffd\"");             // overlong
  EXPECT_EQ(as_json("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");  // surrogate
  for (const char* text : {"a\"b\\c\n", "\x01\xff\xc3", "h\xc3\xa9te"}) {
    const json parsed = json::parse(as_json(text));
    EXPECT_TRUE(parsed.is_string()) << text;
  }
  EXPECT_EQ(json::parse(as_json("a\"b\\c\n\x01")).get<std::string>(), "a\"b\\c\n\x01");
}

TraceData sample() {
  TraceData d;
  d.rank = 1;
  d.nranks = 3;
  d.host = "node\"7";
  d.comm_name = "tp \xff";
  d.dropped = 5;
  d.clock_offset_ns = 1'700'000'000'000'000'000;  // system time, in ns
  OpEvent op;
  op.seq = 4;
  op.name = "allreduce";
  op.bytes = 4000;
  op.count = 1000;
  op.datatype = cclFloat32;
  op.op = cclSum;
  op.algorithm = "ring";
  op.protocol = "Simple";
  op.start_ns = 1'000'500;
  op.end_ns = 1'010'750;
  d.ops.push_back(op);
  OpEvent send;
  send.seq = 5;
  send.name = "send";
  send.bytes = 8;
  send.count = 1;
  send.peer = 2;
  send.result = cclTimeout;
  send.start_ns = 2'000'000;
  send.end_ns = 2'000'000;
  d.ops.push_back(send);
  d.peers = {0, 2, 2};
  RoundEvent r0;
  r0.index = 0;
  r0.bytes_sent = 1000;
  r0.bytes_received = 2000;
  r0.peers_begin = 0;
  r0.npeers = 2;
  r0.start_ns = 1'001'000;
  r0.end_ns = 1'005'000;
  RoundEvent r1 = r0;
  r1.index = 1;
  r1.completed = false;
  r1.peers_begin = 2;
  r1.npeers = 1;
  r1.start_ns = 1'005'000;
  r1.end_ns = 1'010'000;
  d.rounds = {r0, r1};
  return d;
}

TEST(TraceJson, FileParsesWithMetadataOpsAndRounds) {
  const json t = json::parse(format_trace(sample()));
  EXPECT_EQ(t["displayTimeUnit"], "ns");
  const json& other = t["otherData"];
  EXPECT_EQ(other["rank"], 1);
  EXPECT_EQ(other["nranks"], 3);
  EXPECT_EQ(other["dropped_events"], 5);
  EXPECT_EQ(other["ccl_version"], std::to_string(CCL_MAJOR) + "." + std::to_string(CCL_MINOR) +
                                      "." + std::to_string(CCL_PATCH));
  const json& events = t["traceEvents"];
  ASSERT_EQ(events.size(), 3u + 2u + 2u);
  EXPECT_EQ(events[0]["ph"], "M");
  EXPECT_EQ(events[0]["name"], "process_name");
  EXPECT_EQ(events[0]["pid"], 1);
  EXPECT_EQ(events[0]["args"]["name"], "rank 1 (host node\"7)");
  EXPECT_EQ(events[1]["name"], "process_sort_index");
  EXPECT_EQ(events[1]["args"]["sort_index"], 1);
  EXPECT_EQ(events[2]["name"], "thread_name");
  // Merged by start: the operation, its two rounds, then the send.
  EXPECT_EQ(events[3]["name"], "allreduce");
  EXPECT_EQ(events[4]["name"], "round 0");
  EXPECT_EQ(events[5]["name"], "round 1");
  EXPECT_EQ(events[6]["name"], "send");
  for (size_t i = 3; i < events.size(); ++i) {
    EXPECT_EQ(events[i]["ph"], "X");
    EXPECT_EQ(events[i]["pid"], 1);
    EXPECT_EQ(events[i]["tid"], 0);
  }
  const json& op = events[3];
  EXPECT_EQ(op["cat"], "op");
  EXPECT_DOUBLE_EQ(op["ts"].get<double>(), 1'700'000'000'000'000.0 + 1000.5);
  EXPECT_DOUBLE_EQ(op["dur"].get<double>(), 10.25);
  EXPECT_EQ(op["args"]["seq"], 4);
  EXPECT_EQ(op["args"]["bytes"], 4000);
  EXPECT_EQ(op["args"]["count"], 1000);
  EXPECT_EQ(op["args"]["datatype"], "float");
  EXPECT_EQ(op["args"]["op"], "sum");
  EXPECT_EQ(op["args"]["algorithm"], "ring");
  EXPECT_EQ(op["args"]["protocol"], "Simple");
  EXPECT_EQ(op["args"]["comm"], "tp \xef\xbf\xbd");
  EXPECT_EQ(op["args"]["result"], "cclSuccess");
  EXPECT_FALSE(op["args"].contains("root"));
  EXPECT_FALSE(op["args"].contains("peer"));
  const json& r0 = events[4];
  EXPECT_EQ(r0["cat"], "round");
  EXPECT_DOUBLE_EQ(r0["dur"].get<double>(), 4.0);
  EXPECT_EQ(r0["args"]["bytes_sent"], 1000);
  EXPECT_EQ(r0["args"]["bytes_received"], 2000);
  EXPECT_EQ(r0["args"]["peers"], json::array({0, 2}));
  EXPECT_FALSE(r0["args"].contains("completed"));
  EXPECT_EQ(events[5]["args"]["peers"], json::array({2}));
  EXPECT_EQ(events[5]["args"]["completed"], false);
  const json& send = events[6];
  EXPECT_EQ(send["args"]["peer"], 2);
  EXPECT_EQ(send["args"]["result"], "cclTimeout");
  EXPECT_DOUBLE_EQ(send["dur"].get<double>(), 0.0);
  EXPECT_FALSE(send["args"].contains("algorithm"));
  EXPECT_FALSE(send["args"].contains("datatype"));
}

TEST(TraceJson, EmptyTraceParses) {
  TraceData d;
  const json t = json::parse(format_trace(d));
  EXPECT_EQ(t["traceEvents"].size(), 3u);
  EXPECT_EQ(t["otherData"]["dropped_events"], 0);
}

TEST(TraceJson, WritesTheFileOrSaysWhy) {
  const std::string path = "/tmp/ccl_trace_writer_" + std::to_string(getpid()) + ".json";
  EXPECT_EQ(write_trace_file(path, sample()), "");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), format_trace(sample()));
  std::remove(path.c_str());
  EXPECT_EQ(write_trace_file("/nonexistent/dir/t.json", sample()), "No such file or directory");
}

// A trace larger than the writer's 1 MiB pieces comes out whole.
TEST(TraceJson, LargeTraceIsWrittenInPiecesAndParses) {
  TraceData d = sample();
  const OpEvent op = d.ops[0];
  d.ops.clear();
  d.rounds.clear();
  // About 1.6 MB: more than the writer's 1 MiB piece, few enough events for nlohmann's parser
  // under TSan at -O0 (20,000 took minutes there).
  constexpr int kOps = 6000;
  for (int i = 0; i < kOps; ++i) {
    OpEvent e = op;
    e.seq = static_cast<uint64_t>(i);
    e.start_ns = i * 1000;
    e.end_ns = i * 1000 + 500;
    d.ops.push_back(e);
  }
  const std::string path = "/tmp/ccl_trace_writer_large_" + std::to_string(getpid()) + ".json";
  ASSERT_EQ(write_trace_file(path, d), "");
  std::ifstream in(path);
  in.seekg(0, std::ios::end);
  EXPECT_GT(static_cast<size_t>(in.tellg()), size_t{1} << 20) << "smaller than one piece";
  in.seekg(0);
  const json t = json::parse(in);
  EXPECT_EQ(t["traceEvents"].size(), 3u + kOps);
  EXPECT_EQ(t["traceEvents"].back()["args"]["seq"], kOps - 1);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ccl::trace
