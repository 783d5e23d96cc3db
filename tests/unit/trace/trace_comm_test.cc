// CCL_TRACE_FILE end to end, ranks as threads of this process: 2 and 3 ranks run an allreduce, a
// broadcast, a send/recv group and a lone send and receive; after cclCommDestroy every rank's file
// is parsed back (nlohmann::json) and checked: one per rank, the metadata, one slice per call with
// its name and bytes, rounds nested in their operation with valid peers, nothing dropped. Then
// CCL_TRACE_MAX_EVENTS drops, an unwritable path, finalize, split and exit with communicators
// alive. Every wait is bounded (30 s timeouts).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "../support/scoped_env.h"
#include "../support/temp_file.h"
#include "ccl/ccl.h"

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr size_t kCount = 1000;   // floats per call
constexpr double kSlackUs = 1.0;  // ts near 1.7e15 us parse into doubles 0.25 us apart

using ccl::test::ScopedEnv;
using ccl::test::TempDir;

// Joins its threads when it goes out of scope, also when an ASSERT returns early.
struct JoinAll {
  std::vector<std::thread> threads;
  ~JoinAll() {
    for (auto& t : threads) {
      if (t.joinable()) t.join();
    }
  }
};

// Runs body(rank, comm) on `nranks` threads, each a rank of one communicator named `name` (its
// waits bounded by `timeout_ms`); then `finish` on each (cclCommDestroy unless told otherwise).
void with_ranks(int nranks, const std::function<void(int, cclComm_t)>& body,
                const std::function<cclResult_t(cclComm_t)>& finish = cclCommDestroy,
                const char* name = "trace_test", int timeout_ms = 30000) {
  cclUniqueId id;
  ASSERT_EQ(cclGetUniqueId(&id), cclSuccess);
  std::vector<cclComm_t> comms(static_cast<size_t>(nranks), nullptr);
  {
    JoinAll all;
    for (int r = 0; r < nranks; ++r) {
      all.threads.emplace_back([&, r] {
        cclConfig_t config = CCL_CONFIG_INITIALIZER;
        config.timeoutMs = timeout_ms;
        config.commName = name;
        ASSERT_EQ(cclCommInitRankConfig(&comms[static_cast<size_t>(r)], nranks, id, r, &config),
                  cclSuccess);
        body(r, comms[static_cast<size_t>(r)]);
      });
    }
  }
  for (cclComm_t c : comms) {
    if (c != nullptr) {
      EXPECT_EQ(finish(c), cclSuccess);
    }
  }
}

std::vector<fs::path> files_in(const std::string& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

json parse_file(const fs::path& path) {
  std::ifstream in(path);
  return json::parse(in);  // throws (failing the test) if it is not JSON
}

// Every rank's trace in `dir`, by rank; expects exactly one file per rank.
std::vector<json> read_traces(const std::string& dir, int nranks) {
  std::vector<json> traces(static_cast<size_t>(nranks));
  const auto files = files_in(dir);
  EXPECT_EQ(files.size(), static_cast<size_t>(nranks));
  for (const fs::path& f : files) {
    json t = parse_file(f);
    const int rank = t["otherData"]["rank"].get<int>();
    EXPECT_GE(rank, 0);
    EXPECT_LT(rank, nranks);
    if (rank < 0 || rank >= nranks) continue;
    EXPECT_TRUE(traces[static_cast<size_t>(rank)].is_null()) << "two files of rank " << rank;
    traces[static_cast<size_t>(rank)] = std::move(t);
  }
  return traces;
}

std::vector<json> slices(const json& trace, const char* category) {
  std::vector<json> out;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] == category) out.push_back(e);
  }
  return out;
}

const json* metadata(const json& trace, const char* name) {
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == name) return &e;
  }
  return nullptr;
}

void fill(std::vector<float>& v, float value) { std::fill(v.begin(), v.end(), value); }

// The calls every rank makes: allreduce, broadcast from 0, a ring exchange in one group, then
// rank 0 sends alone to the last rank.
void run_calls(int rank, int nranks, cclComm_t comm) {
  std::vector<float> a(kCount), b(kCount);
  fill(a, static_cast<float>(rank + 1));
  ASSERT_EQ(cclAllReduce(a.data(), b.data(), kCount, cclFloat32, cclSum, comm, nullptr),
            cclSuccess);
  EXPECT_EQ(b[kCount - 1], static_cast<float>(nranks * (nranks + 1) / 2));
  fill(a, rank == 0 ? 7.0f : 0.0f);
  ASSERT_EQ(cclBroadcast(a.data(), a.data(), kCount, cclFloat32, 0, comm, nullptr), cclSuccess);
  EXPECT_EQ(a[0], 7.0f);
  fill(a, static_cast<float>(rank));
  const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  ASSERT_EQ(cclGroupStart(), cclSuccess);
  ASSERT_EQ(cclSend(a.data(), kCount, cclFloat32, next, comm, nullptr), cclSuccess);
  ASSERT_EQ(cclRecv(b.data(), kCount, cclFloat32, prev, comm, nullptr), cclSuccess);
  ASSERT_EQ(cclGroupEnd(), cclSuccess);
  EXPECT_EQ(b[0], static_cast<float>(prev));
  if (rank == 0) {
    ASSERT_EQ(cclSend(a.data(), kCount, cclFloat32, nranks - 1, comm, nullptr), cclSuccess);
  } else if (rank == nranks - 1) {
    ASSERT_EQ(cclRecv(b.data(), kCount, cclFloat32, 0, comm, nullptr), cclSuccess);
    EXPECT_EQ(b[0], 0.0f);
  }
}

// The checks of one rank's trace of run_calls().
void check_trace(const json& t, int rank, int nranks, bool rounds_for_collectives) {
  SCOPED_TRACE("rank " + std::to_string(rank));
  ASSERT_TRUE(t.is_object());
  EXPECT_EQ(t["displayTimeUnit"], "ns");
  EXPECT_EQ(t["otherData"]["nranks"], nranks);
  EXPECT_EQ(t["otherData"]["dropped_events"], 0);
  EXPECT_TRUE(t["otherData"]["ccl_version"].is_string());

  const json* name = metadata(t, "process_name");
  ASSERT_NE(name, nullptr);
  EXPECT_EQ((*name)["pid"], rank);
  const std::string process = (*name)["args"]["name"].get<std::string>();
  EXPECT_EQ(process.rfind("rank " + std::to_string(rank) + " (host ", 0), 0u) << process;
  const json* sort = metadata(t, "process_sort_index");
  ASSERT_NE(sort, nullptr);
  EXPECT_EQ((*sort)["args"]["sort_index"], rank);

  std::vector<std::string> expected = {"allreduce", "broadcast", "send/recv"};
  std::vector<uint64_t> bytes = {4 * kCount, 4 * kCount, 8 * kCount};
  if (rank == 0) expected.push_back("send"), bytes.push_back(4 * kCount);
  if (rank == nranks - 1) expected.push_back("recv"), bytes.push_back(4 * kCount);
  const std::vector<json> ops = slices(t, "op");
  ASSERT_EQ(ops.size(), expected.size());
  uint64_t last_seq = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const json& op = ops[i];
    SCOPED_TRACE(op.dump());
    EXPECT_EQ(op["name"], expected[i]);
    EXPECT_EQ(op["pid"], rank);
    EXPECT_EQ(op["tid"], 0);
    EXPECT_GE(op["dur"].get<double>(), 0.0);
    const json& args = op["args"];
    EXPECT_EQ(args["bytes"], bytes[i]);
    EXPECT_GT(args["seq"].get<uint64_t>(), last_seq);
    last_seq = args["seq"].get<uint64_t>();
    EXPECT_EQ(args["result"], "cclSuccess");
    EXPECT_EQ(args["comm"], "trace_test");
  }
  EXPECT_EQ(ops[0]["args"]["count"], kCount);
  EXPECT_EQ(ops[0]["args"]["datatype"], "float");
  EXPECT_EQ(ops[0]["args"]["op"], "sum");
  EXPECT_TRUE(ops[0]["args"]["algorithm"].is_string());
  EXPECT_TRUE(ops[0]["args"]["protocol"].is_string());
  EXPECT_EQ(ops[1]["args"]["root"], 0);
  EXPECT_TRUE(ops[1]["args"]["algorithm"].is_string());
  EXPECT_EQ(ops[2]["args"]["peer"], (rank + 1) % nranks);
  if (rank == 0) {
    EXPECT_EQ(ops[3]["args"]["peer"], nranks - 1);
  }
  if (rank == nranks - 1) {
    EXPECT_EQ(ops.back()["args"]["peer"], 0);
  }

  // Every round lies within one operation; sum what each operation's rounds moved.
  std::vector<uint64_t> sent(ops.size()), received(ops.size());
  std::vector<int> rounds_of(ops.size());
  for (const json& round : slices(t, "round")) {
    SCOPED_TRACE(round.dump());
    EXPECT_EQ(round["pid"], rank);
    EXPECT_EQ(round["tid"], 0);
    EXPECT_EQ(round["name"].get<std::string>().rfind("round ", 0), 0u);
    const double ts = round["ts"].get<double>(), end = ts + round["dur"].get<double>();
    int owner = -1;
    for (size_t i = 0; i < ops.size(); ++i) {
      const double op_ts = ops[i]["ts"].get<double>();
      const double op_end = op_ts + ops[i]["dur"].get<double>();
      if (ts >= op_ts - kSlackUs && end <= op_end + kSlackUs) owner = static_cast<int>(i);
    }
    ASSERT_GE(owner, 0) << "a round outside every operation";
    ++rounds_of[static_cast<size_t>(owner)];
    sent[static_cast<size_t>(owner)] += round["args"]["bytes_sent"].get<uint64_t>();
    received[static_cast<size_t>(owner)] += round["args"]["bytes_received"].get<uint64_t>();
    for (const json& peer : round["args"]["peers"]) {
      EXPECT_GE(peer.get<int>(), 0);
      EXPECT_LT(peer.get<int>(), nranks);
      EXPECT_NE(peer.get<int>(), rank);
    }
    EXPECT_FALSE(round["args"].contains("completed"));
  }
  // The group: one round, the ring exchange's two messages.
  EXPECT_EQ(rounds_of[2], 1);
  EXPECT_EQ(sent[2], 4 * kCount);
  EXPECT_EQ(received[2], 4 * kCount);
  if (rank == 0) {
    EXPECT_EQ(sent[3], 4 * kCount);
  }
  if (rank == nranks - 1) {
    EXPECT_EQ(received.back(), 4 * kCount);
  }
  if (rounds_for_collectives) {
    EXPECT_GT(rounds_of[0], 0) << "allreduce";
    EXPECT_GT(sent[0], 0u);
    EXPECT_GT(received[0], 0u);
  }
}

// Every rank's file in `dir` (exactly one each) passes check_trace.
void check_traces(const std::string& dir, int nranks, bool rounds_for_collectives) {
  const std::vector<json> traces = read_traces(dir, nranks);
  for (int r = 0; r < nranks; ++r) {
    check_trace(traces[static_cast<size_t>(r)], r, nranks, rounds_for_collectives);
  }
}

struct Case {
  int nranks;
  const char* algo;  // CCL_ALGO; nullptr: the tuner's choice (small messages: the direct path)
};

class TraceComm : public ::testing::TestWithParam<Case> {};

TEST_P(TraceComm, EveryRankWritesOneFileOfItsCalls) {
  const Case c = GetParam();
  TempDir dir("ccl_trace");
  const std::string pattern = dir.path() + "/trace.json";
  {
    ScopedEnv file("CCL_TRACE_FILE", pattern.c_str());
    ScopedEnv algo("CCL_ALGO", c.algo);
    with_ranks(c.nranks, [&](int rank, cclComm_t comm) { run_calls(rank, c.nranks, comm); });
  }
  check_traces(dir.path(), c.nranks, c.algo != nullptr);
  // The file names carry the rank (trace.<rank>.json, or trace.<rank>.<tag>.json when another
  // communicator of this process came first).
  for (const fs::path& f : files_in(dir.path())) {
    const std::string name = f.filename().string();
    const json t = parse_file(f);
    const std::string rank = std::to_string(t["otherData"]["rank"].get<int>());
    EXPECT_EQ(name.rfind("trace." + rank + ".", 0), 0u) << name;
    EXPECT_EQ(name.substr(name.size() - 5), ".json") << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, TraceComm,
                         ::testing::Values(Case{2, nullptr}, Case{3, nullptr}, Case{2, "ring"},
                                           Case{3, "ring"}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::to_string(info.param.nranks) + "ranks_" +
                                  (info.param.algo != nullptr ? info.param.algo : "tuned");
                         });

TEST(TraceCommLimits, EventsBeyondTheMaximumAreCountedAndDropped) {
  TempDir dir("ccl_trace");
  const std::string pattern = dir.path() + "/t";  // no extension: t.<rank>
  {
    ScopedEnv file("CCL_TRACE_FILE", pattern.c_str());
    ScopedEnv max("CCL_TRACE_MAX_EVENTS", "3");
    ScopedEnv algo("CCL_ALGO", "ring");
    with_ranks(2, [&](int rank, cclComm_t comm) {
      for (int i = 0; i < 5; ++i) run_calls(rank, 2, comm);
    });
  }
  const std::vector<json> traces = read_traces(dir.path(), 2);
  for (const json& t : traces) {
    ASSERT_TRUE(t.is_object());
    const size_t kept = slices(t, "op").size() + slices(t, "round").size();
    EXPECT_EQ(kept, 3u);
    EXPECT_GT(t["otherData"]["dropped_events"].get<uint64_t>(), 0u);
    EXPECT_GE(slices(t, "op").size(), 1u);  // the first operation is kept before its rounds
  }
  for (const fs::path& f : files_in(dir.path())) {
    const std::string name = f.filename().string();
    EXPECT_TRUE(name.rfind("t.0", 0) == 0 || name.rfind("t.1", 0) == 0) << name;
  }
}

TEST(TraceCommLimits, AnUnwritablePathFailsNothing) {
  testing::internal::CaptureStderr();
  {
    ScopedEnv file("CCL_TRACE_FILE", "/nonexistent/dir/t.json");
    with_ranks(2, [&](int rank, cclComm_t comm) { run_calls(rank, 2, comm); });
  }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("/nonexistent/dir/t."), std::string::npos) << err;
  EXPECT_NE(err.find("No such file or directory"), std::string::npos) << err;
}

TEST(TraceCommLimits, AMalformedMaximumFailsInit) {
  ScopedEnv file("CCL_TRACE_FILE", "/tmp/never_written.json");
  ScopedEnv max("CCL_TRACE_MAX_EVENTS", "-1");
  cclUniqueId id;
  ASSERT_EQ(cclGetUniqueId(&id), cclSuccess);
  cclComm_t comm = nullptr;
  EXPECT_EQ(cclCommInitRank(&comm, 1, id, 0), cclInvalidUsage);
  EXPECT_EQ(comm, nullptr);
}

TEST(TraceCommLifecycle, FinalizeWritesTheFile) {
  TempDir dir("ccl_trace");
  const std::string pattern = dir.path() + "/trace.json";
  ScopedEnv file("CCL_TRACE_FILE", pattern.c_str());
  with_ranks(
      2, [&](int rank, cclComm_t comm) { run_calls(rank, 2, comm); },
      [&](cclComm_t comm) {
        const cclResult_t result = cclCommFinalize(comm);
        int rank = -1;
        EXPECT_EQ(cclCommUserRank(comm, &rank), cclSuccess);
        bool found = false;
        for (const fs::path& f : files_in(dir.path())) {
          found |= parse_file(f)["otherData"]["rank"] == rank;
        }
        EXPECT_TRUE(found) << "no file of rank " << rank << " after cclCommFinalize";
        EXPECT_EQ(cclCommDestroy(comm), cclSuccess);
        return result;
      });
  check_traces(dir.path(), 2, false);
}

TEST(TraceCommLifecycle, AbortWritesTheFile) {
  TempDir dir("ccl_trace");
  const std::string pattern = dir.path() + "/trace.json";
  {
    ScopedEnv file("CCL_TRACE_FILE", pattern.c_str());
    with_ranks(
        2, [&](int rank, cclComm_t comm) { run_calls(rank, 2, comm); }, cclCommAbort);
  }
  check_traces(dir.path(), 2, false);
}

// The step a rank hangs in is what a trace is for: a receive that times out shows as a failed
// operation and, inside it, its round, not completed.
TEST(TraceCommLifecycle, ATimedOutOperationShowsItsUnfinishedRound) {
  TempDir dir("ccl_trace");
  const std::string pattern = dir.path() + "/trace.json";
  {
    ScopedEnv file("CCL_TRACE_FILE", pattern.c_str());
    with_ranks(
        2,
        [&](int rank, cclComm_t comm) {
          if (rank != 0) return;  // rank 1 never sends
          std::vector<float> b(kCount);
          EXPECT_EQ(cclRecv(b.data(), kCount, cclFloat32, 1, comm, nullptr), cclTimeout);
        },
        // The timeout bounds the init too: 2 s, which a TSan build on a loaded machine needs.
        cclCommDestroy, "trace_test", 2000);
  }
  const std::vector<json> traces = read_traces(dir.path(), 2);
  ASSERT_TRUE(traces[0].is_object());
  const std::vector<json> ops = slices(traces[0], "op");
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0]["name"], "recv");
  EXPECT_EQ(ops[0]["args"]["result"], "cclTimeout");
  EXPECT_GE(ops[0]["dur"].get<double>(), 1900000.0);  // the 2 s timeout, in us
  const std::vector<json> rounds = slices(traces[0], "round");
  ASSERT_EQ(rounds.size(), 1u);
  EXPECT_EQ(rounds[0]["args"]["completed"], false);
  EXPECT_EQ(rounds[0]["args"]["peers"], json::array({1}));
  EXPECT_EQ(rounds[0]["args"]["bytes_received"], 4 * kCount);
  EXPECT_TRUE(slices(traces[1], "op").empty());
}

// A split's files sit beside its parent's: named after the child's name and tag, one per rank.
TEST(TraceCommLifecycle, SplitCommunicatorsDoNotCollide) {
  TempDir dir("ccl_trace");
  const std::string pattern = dir.path() + "/trace.json";
  ScopedEnv file("CCL_TRACE_FILE", pattern.c_str());
  std::vector<cclComm_t> children(2, nullptr);
  with_ranks(2, [&](int rank, cclComm_t comm) {
    cclConfig_t config = CCL_CONFIG_INITIALIZER;
    config.commName = "child";
    cclComm_t child = nullptr;
    ASSERT_EQ(cclCommSplit(comm, 0, rank, &child, &config), cclSuccess);
    std::vector<float> a(kCount, 1.0f);
    ASSERT_EQ(cclAllReduce(a.data(), a.data(), kCount, cclFloat32, cclSum, child, nullptr),
              cclSuccess);
    children[static_cast<size_t>(rank)] = child;
  });
  for (cclComm_t c : children) EXPECT_EQ(cclCommDestroy(c), cclSuccess);
  const auto files = files_in(dir.path());
  ASSERT_EQ(files.size(), 4u);
  std::map<std::string, int> tags;  // the child's tag -> files
  for (const fs::path& f : files) {
    const json t = parse_file(f);
    const std::string name = f.filename().string();
    if (t["otherData"]["comm"] == "child") {
      const size_t at = name.find(".child-");
      ASSERT_NE(at, std::string::npos) << name;
      ++tags[name.substr(at)];
      EXPECT_EQ(slices(t, "op").size(), 1u);
    } else {
      EXPECT_EQ(name.find("child"), std::string::npos) << name;
      EXPECT_EQ(slices(t, "op").size(), 2u);  // the split's two allgathers
    }
  }
  ASSERT_EQ(tags.size(), 1u);  // both ranks of the child carry one tag
  EXPECT_EQ(tags.begin()->second, 2);
}

// Communicators never destroyed: their traces are written when the process exits. The process is
// this test binary run again (a fork of a process with threads would inherit their objects and
// not the threads, which its exit then trips over), running only the test below.
constexpr const char* kExitChildEnv = "CCL_TRACE_TEST_EXIT_CHILD";

TEST(TraceCommLifecycle, ExitWritesTheTracesOfLiveCommunicators) {
  TempDir dir("ccl_trace");
  const std::string pattern = dir.path() + "/trace.json";
  // Everything the child needs is made before the fork: after it, only exec.
  std::vector<std::string> env = {std::string(kExitChildEnv) + "=" + pattern};
  // The child leaves its communicators alive on purpose: LeakSanitizer (ASan builds) would
  // report them and fail its exit status.
  std::string asan = "ASAN_OPTIONS=detect_leaks=0";
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string_view(*e).starts_with("ASAN_OPTIONS=")) {
      asan = std::string(*e) + ":detect_leaks=0";
    } else {
      env.emplace_back(*e);
    }
  }
  env.push_back(asan);
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string arg0 = "trace_comm_test", arg1 = "--gtest_also_run_disabled_tests",
              arg2 = "--gtest_filter=TraceCommExitChild.DISABLED_LeavesCommunicatorsAlive";
  char* argv[] = {arg0.data(), arg1.data(), arg2.data(), nullptr};
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    execve("/proc/self/exe", argv, envp.data());
    _exit(127);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  check_traces(dir.path(), 2, false);
}

// The child of the test above (disabled, and skipped unless it is that child): exits with its
// communicators alive.
TEST(TraceCommExitChild, DISABLED_LeavesCommunicatorsAlive) {
  const char* pattern = getenv(kExitChildEnv);
  if (pattern == nullptr) GTEST_SKIP() << "run by ExitWritesTheTracesOfLiveCommunicators";
  ScopedEnv file("CCL_TRACE_FILE", pattern);
  with_ranks(
      2, [&](int rank, cclComm_t comm) { run_calls(rank, 2, comm); },
      [](cclComm_t) { return cclSuccess; });  // left alive
  exit(::testing::Test::HasFailure() ? 1 : 0);
}

}  // namespace
