// CCL_METRICS_FILE end to end, ranks as threads of this process: 2 and 3 ranks make known calls
// (allreduces and broadcasts of known sizes, an allgather, a send/recv ring, a lone send, a
// barrier); after cclCommDestroy the one file of the process is read back strictly (prom_text.h)
// and every rank's counters equal its calls, count and bytes. Then: finalize writes the file; the
// file is rewritten every CCL_METRICS_INTERVAL while communicators live, and a reader never sees
// a part of it; a split communicator joins the same file and its final counts stay after it is
// destroyed; a timeout and a peer's abort are counted; a bad interval fails init naming the
// variable; an unwritable path fails nothing; a process that exits with communicators alive
// writes their counts and exits promptly, and one with metrics off runs no metrics thread. Every
// wait is bounded.
#include <dirent.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <latch>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "../support/c_rank_threads.h"
#include "../support/scoped_env.h"
#include "../support/temp_file.h"
#include "ccl/ccl.h"
#include "prom_text.h"

namespace {

namespace fs = std::filesystem;
using ccl::test::parse_prom_text;
using ccl::test::PromText;
using ccl::test::ScopedEnv;
using ccl::test::TempDir;
using Labels = std::map<std::string, std::string>;

// Runs body(rank, comm) on `nranks` threads, each a rank of one communicator named `name`; the
// body destroys (or aborts) its communicator itself. Returns when every thread is joined.
void with_ranks(int nranks, const char* name, int timeout_ms,
                const std::function<void(int, cclComm_t)>& body) {
  cclConfig_t config = CCL_CONFIG_INITIALIZER;
  config.timeoutMs = timeout_ms;
  config.commName = name;
  ccl_test::run_c_ranks(nranks, config, body);
}

// The .prom files in `dir` (a leftover temporary file fails the test).
std::vector<fs::path> prom_files(const std::string& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().extension(), ".prom") << "left behind: " << entry.path();
    if (entry.path().extension() == ".prom") files.push_back(entry.path());
  }
  return files;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream all;
  all << in.rdbuf();
  return all.str();
}

// The one file of this process in `dir`, read back.
PromText read_only_file(const std::string& dir) {
  const auto files = prom_files(dir);
  EXPECT_EQ(files.size(), 1u);
  if (files.size() != 1) return {};
  return parse_prom_text(read_text(files[0]));
}

// The comm label of communicator `name` (every rank's series carry the same one), "" if none.
std::string comm_label(const PromText& text, const std::string& name, int rank) {
  std::string label;
  for (const auto* s : text.find("ccl_communicator_ranks", {{"rank", std::to_string(rank)}})) {
    const std::string& c = s->labels.at("comm");
    if (c.rfind(name + "-", 0) == 0 && c.size() == name.size() + 13) {
      EXPECT_TRUE(label.empty()) << "two communicators named " << name;
      label = c;
    }
  }
  return label;
}

constexpr size_t kLarge = 100000;  // int32s per broadcast: 400000 B, le_1MiB

// The calls of every rank, in order: 5 allreduces of one float (4 B), 3 of 1000 floats (4000 B),
// 2 broadcasts of kLarge int32 from rank 0, an allgather of 10 floats per rank (40 x nranks B),
// a ring exchange of 64 floats each way in one group (512 B), a lone send of 16 floats from rank 0
// to the last rank (64 B), a barrier.
void run_calls(int rank, int nranks, cclComm_t comm) {
  std::vector<float> a(1000, 1.0f), b(1000);
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(cclAllReduce(a.data(), b.data(), 1, cclFloat32, cclSum, comm, nullptr), cclSuccess);
  }
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(cclAllReduce(a.data(), b.data(), 1000, cclFloat32, cclSum, comm, nullptr),
              cclSuccess);
  }
  EXPECT_EQ(b[999], static_cast<float>(nranks));
  std::vector<int32_t> big(kLarge, rank == 0 ? 7 : 0);
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(cclBroadcast(big.data(), big.data(), kLarge, cclInt32, 0, comm, nullptr), cclSuccess);
  }
  EXPECT_EQ(big[kLarge - 1], 7);
  std::vector<float> gathered(10 * static_cast<size_t>(nranks));
  ASSERT_EQ(cclAllGather(a.data(), gathered.data(), 10, cclFloat32, comm, nullptr), cclSuccess);
  const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  ASSERT_EQ(cclGroupStart(), cclSuccess);
  ASSERT_EQ(cclSend(a.data(), 64, cclFloat32, next, comm, nullptr), cclSuccess);
  ASSERT_EQ(cclRecv(b.data(), 64, cclFloat32, prev, comm, nullptr), cclSuccess);
  ASSERT_EQ(cclGroupEnd(), cclSuccess);
  if (rank == 0) {
    ASSERT_EQ(cclSend(a.data(), 16, cclFloat32, nranks - 1, comm, nullptr), cclSuccess);
  } else if (rank == nranks - 1) {
    ASSERT_EQ(cclRecv(b.data(), 16, cclFloat32, 0, comm, nullptr), cclSuccess);
  }
  ASSERT_EQ(cclBarrier(comm, nullptr), cclSuccess);
}

// One rank's series of run_calls() on communicator `comm`.
void check_counts(const PromText& text, const std::string& comm, int rank, int nranks) {
  SCOPED_TRACE("rank " + std::to_string(rank));
  const Labels mine = {{"comm", comm}, {"rank", std::to_string(rank)}};
  auto at = [&](const char* collective, const char* size) {
    Labels l = mine;
    l["collective"] = collective;
    if (size != nullptr) l["size"] = size;
    return l;
  };
  EXPECT_EQ(text.sum("ccl_communicator_ranks", mine), nranks);
  EXPECT_EQ(text.sum("ccl_operations_total", at("allreduce", "le_256B")), 5);
  EXPECT_EQ(text.sum("ccl_operation_bytes_total", at("allreduce", "le_256B")), 20);
  EXPECT_EQ(text.sum("ccl_operations_total", at("allreduce", "le_4KiB")), 3);
  EXPECT_EQ(text.sum("ccl_operation_bytes_total", at("allreduce", "le_4KiB")), 12000);
  EXPECT_EQ(text.sum("ccl_operations_total", at("allreduce", nullptr)), 8);
  EXPECT_EQ(text.sum("ccl_operations_total", at("broadcast", "le_1MiB")), 2);
  EXPECT_EQ(text.sum("ccl_operation_bytes_total", at("broadcast", "le_1MiB")), 2 * 4 * kLarge);
  EXPECT_EQ(text.sum("ccl_operations_total", at("allgather", "le_256B")), 1);
  EXPECT_EQ(text.sum("ccl_operation_bytes_total", at("allgather", "le_256B")), 40 * nranks);
  const bool lone = rank == 0 || rank == nranks - 1;
  EXPECT_EQ(text.sum("ccl_operations_total", at("send/recv", nullptr)), lone ? 2 : 1);
  EXPECT_EQ(text.sum("ccl_operation_bytes_total", at("send/recv", nullptr)), 512 + (lone ? 64 : 0));
  EXPECT_EQ(text.sum("ccl_operations_total", at("barrier", "le_256B")), 1);
  EXPECT_EQ(text.sum("ccl_operation_bytes_total", at("barrier", "le_256B")), 0);
  for (const char* failure :
       {"ccl_operation_errors_total", "ccl_operation_timeouts_total", "ccl_peer_failures_total"}) {
    EXPECT_EQ(text.sum(failure, mine), 0) << failure;
  }
  // The histogram counts the same operations.
  EXPECT_EQ(text.sum("ccl_operation_seconds_count", at("allreduce", nullptr)), 8);
  EXPECT_EQ(text.sum("ccl_operation_seconds_bucket", {{"comm", comm},
                                                      {"rank", std::to_string(rank)},
                                                      {"collective", "broadcast"},
                                                      {"le", "+Inf"}}),
            2);
  EXPECT_GT(text.sum("ccl_operation_seconds_sum", at("broadcast", nullptr)), 0);
  // Nothing else ran (the tuner's probes at init are no operations).
  EXPECT_EQ(text.sum("ccl_operations_total", mine), lone ? 14 : 13);
}

class MetricsComm : public ::testing::TestWithParam<int> {};

TEST_P(MetricsComm, EveryRankCountsItsCalls) {
  const int nranks = GetParam();
  TempDir dir("ccl_metrics");
  ScopedEnv file("CCL_METRICS_FILE", (dir.path() + "/ccl.prom").c_str());
  with_ranks(nranks, "metrics_test", 30000, [&](int rank, cclComm_t comm) {
    run_calls(rank, nranks, comm);
    EXPECT_EQ(cclCommDestroy(comm), cclSuccess);
  });
  // Ranks as threads of one process: one file, named after the rank that registered first.
  const auto files = prom_files(dir.path());
  ASSERT_EQ(files.size(), 1u);
  const std::string name = files[0].filename().string();
  EXPECT_TRUE(name.size() == 10 && name.rfind("ccl.", 0) == 0 && name[4] >= '0' &&
              name[4] < '0' + nranks)
      << name;
  const PromText text = parse_prom_text(read_text(files[0]));
  const std::string comm = comm_label(text, "metrics_test", 0);
  ASSERT_FALSE(comm.empty());
  for (int rank = 0; rank < nranks; ++rank) {
    EXPECT_EQ(comm_label(text, "metrics_test", rank), comm);
    check_counts(text, comm, rank, nranks);
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, MetricsComm, ::testing::Values(2, 3));

TEST(MetricsCommLifecycle, FinalizeWritesTheFile) {
  TempDir dir("ccl_metrics");
  ScopedEnv file("CCL_METRICS_FILE", (dir.path() + "/m_%r.prom").c_str());
  ScopedEnv interval("CCL_METRICS_INTERVAL", "3600");
  // The ranks share the process's one file: rank 0 reads it once both finalizes have written it
  // and before either destroy rewrites it (a read during a write finds its temporary file).
  std::latch finalized(2);
  std::latch read(2);
  with_ranks(2, "finalized", 30000, [&](int rank, cclComm_t comm) {
    float x = 1, y = 0;
    EXPECT_EQ(cclAllReduce(&x, &y, 1, cclFloat32, cclSum, comm, nullptr), cclSuccess);
    EXPECT_EQ(cclCommFinalize(comm), cclSuccess);
    finalized.arrive_and_wait();  // bounded: both threads reach it whatever the results
    if (rank == 0) {
      // Written by finalize, not by the interval (an hour) nor by destroy (not yet).
      const PromText text = read_only_file(dir.path());
      EXPECT_EQ(text.sum("ccl_operations_total", {{"rank", "0"}, {"collective", "allreduce"}}), 1);
    }
    read.arrive_and_wait();
    EXPECT_EQ(cclCommDestroy(comm), cclSuccess);
  });
}

TEST(MetricsCommLifecycle, RewrittenEveryIntervalAndNeverSeenInPart) {
  TempDir dir("ccl_metrics");
  ScopedEnv file("CCL_METRICS_FILE", (dir.path() + "/live.prom").c_str());
  ScopedEnv interval("CCL_METRICS_INTERVAL", "1");
  with_ranks(2, "live", 30000, [&](int rank, cclComm_t comm) {
    float x = 1, y = 0;
    for (int i = 0; i < 3; ++i) {
      ASSERT_EQ(cclAllReduce(&x, &y, 1, cclFloat32, cclSum, comm, nullptr), cclSuccess);
    }
    ASSERT_EQ(cclBarrier(comm, nullptr), cclSuccess);
    if (rank == 0) {
      // Both ranks' 3 allreduces appear within a few intervals; every read parses whole.
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      double seen = 0;
      int reads = 0;
      while (seen != 6 && std::chrono::steady_clock::now() < until) {
        for (const auto& entry : fs::directory_iterator(dir.path())) {
          if (entry.path().extension() != ".prom") continue;
          const PromText text = parse_prom_text(read_text(entry.path()));
          seen = text.sum("ccl_operations_total", {{"collective", "allreduce"}});
          ++reads;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      EXPECT_EQ(seen, 6) << "after " << reads << " reads";
    }
    ASSERT_EQ(cclBarrier(comm, nullptr), cclSuccess);  // rank 1 waits for rank 0's reads
    EXPECT_EQ(cclCommDestroy(comm), cclSuccess);
  });
}

TEST(MetricsCommLifecycle, ASplitJoinsTheFileAndItsFinalCountsStay) {
  TempDir dir("ccl_metrics");
  ScopedEnv file("CCL_METRICS_FILE", (dir.path() + "/s.prom").c_str());
  with_ranks(2, "parent", 30000, [&](int rank, cclComm_t comm) {
    cclConfig_t config = CCL_CONFIG_INITIALIZER;
    config.commName = "child";
    config.timeoutMs = 30000;
    cclComm_t child = nullptr;
    ASSERT_EQ(cclCommSplit(comm, 0, rank, &child, &config), cclSuccess);
    float x = 1, y = 0;
    ASSERT_EQ(cclAllReduce(&x, &y, 1, cclFloat32, cclSum, child, nullptr), cclSuccess);
    ASSERT_EQ(cclAllReduce(&x, &y, 1, cclFloat32, cclSum, child, nullptr), cclSuccess);
    EXPECT_EQ(cclCommDestroy(child), cclSuccess);
    ASSERT_EQ(cclBroadcast(&x, &y, 1, cclFloat32, 0, comm, nullptr), cclSuccess);
    EXPECT_EQ(cclCommDestroy(comm), cclSuccess);
  });
  const PromText text = read_only_file(dir.path());
  for (int rank = 0; rank < 2; ++rank) {
    const std::string r = std::to_string(rank);
    const std::string parent = comm_label(text, "parent", rank);
    const std::string child = comm_label(text, "child", rank);
    ASSERT_FALSE(parent.empty());
    ASSERT_FALSE(child.empty());
    EXPECT_EQ(text.sum("ccl_operations_total", {{"comm", child}, {"rank", r}}), 2);
    // The split's own exchanges (allgathers) are operations of the parent.
    EXPECT_EQ(text.sum("ccl_operations_total",
                       {{"comm", parent}, {"rank", r}, {"collective", "broadcast"}}),
              1);
    EXPECT_GE(text.sum("ccl_operations_total",
                       {{"comm", parent}, {"rank", r}, {"collective", "allgather"}}),
              1);
  }
}

TEST(MetricsCommFailures, ATimeoutIsCounted) {
  TempDir dir("ccl_metrics");
  ScopedEnv file("CCL_METRICS_FILE", (dir.path() + "/t.prom").c_str());
  // Rank 1 calls nothing: rank 0's allreduce times out (rank 1 destroys only after it did).
  std::atomic<bool> timed_out{false};
  // The timeout bounds the init too: 2 s, which a TSan build on a loaded machine needs.
  with_ranks(2, "timeout", 2000, [&](int rank, cclComm_t comm) {
    if (rank == 0) {
      float x = 1, y = 0;
      EXPECT_EQ(cclAllReduce(&x, &y, 1, cclFloat32, cclSum, comm, nullptr), cclTimeout);
      timed_out = true;
    } else {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (!timed_out && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    EXPECT_EQ(cclCommDestroy(comm), cclSuccess);
  });
  const PromText text = read_only_file(dir.path());
  const Labels rank0 = {{"rank", "0"}, {"collective", "allreduce"}, {"size", "le_256B"}};
  EXPECT_EQ(text.sum("ccl_operations_total", rank0), 1);
  EXPECT_EQ(text.sum("ccl_operation_errors_total", rank0), 1);
  EXPECT_EQ(text.sum("ccl_operation_timeouts_total", rank0), 1);
  EXPECT_EQ(text.sum("ccl_peer_failures_total", rank0), 0);
  EXPECT_GE(text.sum("ccl_operation_seconds_sum", {{"rank", "0"}}), 1.9);
  EXPECT_EQ(text.sum("ccl_operations_total", {{"rank", "1"}}), 0);
}

TEST(MetricsCommFailures, APeersAbortIsAPeerFailure) {
  TempDir dir("ccl_metrics");
  ScopedEnv file("CCL_METRICS_FILE", (dir.path() + "/p.prom").c_str());
  with_ranks(2, "peer", 20000, [&](int rank, cclComm_t comm) {
    if (rank == 1) {
      EXPECT_EQ(cclCommAbort(comm), cclSuccess);  // tells rank 0, frees the handle
      return;
    }
    float x = 1, y = 0;
    EXPECT_EQ(cclAllReduce(&x, &y, 1, cclFloat32, cclSum, comm, nullptr), cclRemoteError);
    // A call on the failed communicator fails before it runs: not counted.
    EXPECT_EQ(cclAllReduce(&x, &y, 1, cclFloat32, cclSum, comm, nullptr), cclRemoteError);
    EXPECT_EQ(cclCommDestroy(comm), cclSuccess);
  });
  const PromText text = read_only_file(dir.path());
  const Labels rank0 = {{"rank", "0"}, {"collective", "allreduce"}};
  EXPECT_EQ(text.sum("ccl_operations_total", rank0), 1);
  EXPECT_EQ(text.sum("ccl_operation_errors_total", rank0), 1);
  EXPECT_EQ(text.sum("ccl_peer_failures_total", rank0), 1);
  EXPECT_EQ(text.sum("ccl_operation_timeouts_total", rank0), 0);
}

TEST(MetricsCommSettings, ABadIntervalFailsInitNamingIt) {
  TempDir dir("ccl_metrics");
  ScopedEnv file("CCL_METRICS_FILE", (dir.path() + "/bad.prom").c_str());
  for (const char* bad : {"0", "-5", "abc", "86401"}) {
    SCOPED_TRACE(bad);
    ScopedEnv interval("CCL_METRICS_INTERVAL", bad);
    cclUniqueId id;
    ASSERT_EQ(cclGetUniqueId(&id), cclSuccess);
    cclComm_t comm = nullptr;
    EXPECT_EQ(cclCommInitRank(&comm, 1, id, 0), cclInvalidUsage);
    EXPECT_NE(std::string(cclGetLastError(nullptr)).find("CCL_METRICS_INTERVAL"), std::string::npos)
        << cclGetLastError(nullptr);
  }
  EXPECT_TRUE(prom_files(dir.path()).empty());
}

TEST(MetricsCommSettings, AnUnwritablePathFailsNothing) {
  ScopedEnv file("CCL_METRICS_FILE", "/nonexistent_ccl_dir/m.prom");
  with_ranks(2, "unwritable", 30000, [&](int, cclComm_t comm) {
    float x = 1, y = 0;
    EXPECT_EQ(cclAllReduce(&x, &y, 1, cclFloat32, cclSum, comm, nullptr), cclSuccess);
    EXPECT_EQ(cclCommDestroy(comm), cclSuccess);
  });
}

// A process that exits with communicators alive, and one with metrics off: this test binary run
// again (a fork of a process with threads would inherit their objects and not the threads),
// running only the child test below.
constexpr const char* kChildEnv = "CCL_METRICS_TEST_CHILD";

// Runs the child in `mode` with `extra` environment; its exit status (-1: killed after 60 s).
int run_child(const std::string& mode, const std::vector<std::string>& extra) {
  std::vector<std::string> env = {std::string(kChildEnv) + "=" + mode};
  std::string asan = "ASAN_OPTIONS=detect_leaks=0";  // communicators left alive on purpose
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view kv(*e);
    if (kv.starts_with("ASAN_OPTIONS=")) {
      asan = std::string(kv) + ":detect_leaks=0";
    } else if (!kv.starts_with("CCL_METRICS_")) {
      env.emplace_back(kv);
    }
  }
  env.push_back(asan);
  for (const std::string& e : extra) env.push_back(e);
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string arg0 = "metrics_comm_test", arg1 = "--gtest_also_run_disabled_tests",
              arg2 = "--gtest_filter=MetricsCommChild.DISABLED_Run";
  char* argv[] = {arg0.data(), arg1.data(), arg2.data(), nullptr};
  const pid_t child = fork();
  if (child < 0) return -2;
  if (child == 0) {
    execve("/proc/self/exe", argv, envp.data());
    _exit(127);
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int status = 0;
  while (waitpid(child, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > until) {
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(MetricsCommLifecycle, ExitWritesTheCountsOfLiveCommunicators) {
  TempDir dir("ccl_metrics");
  EXPECT_EQ(run_child("alive", {"CCL_METRICS_FILE=" + dir.path() + "/exit.prom",
                                "CCL_METRICS_INTERVAL=3600"}),
            0);
  const PromText text = read_only_file(dir.path());
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(text.sum("ccl_operations_total",
                       {{"rank", std::to_string(rank)}, {"collective", "allreduce"}}),
              4);
  }
}

TEST(MetricsCommLifecycle, OffRunsNoMetricsThread) { EXPECT_EQ(run_child("off", {}), 0); }

// Whether a thread of this process is named `name` (the exporter names its "ccl-metrics").
bool has_thread(const std::string& name) {
  for (const auto& task : fs::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string n;
    std::getline(comm, n);
    if (n == name) return true;
  }
  return false;
}

// The children of the tests above (disabled, and skipped unless run by them). "alive": 2 ranks
// make 4 allreduces each and exit with their communicators alive (the exit handler stops the
// thread and writes the file); "off": the same with CCL_METRICS_FILE unset, destroyed, and no
// metrics thread ever ran.
TEST(MetricsCommChild, DISABLED_Run) {
  const char* mode = getenv(kChildEnv);
  if (mode == nullptr) GTEST_SKIP() << "run by the lifecycle tests";
  const bool alive = std::string_view(mode) == "alive";
  std::vector<cclComm_t> comms(2);
  with_ranks(2, "child", 30000, [&](int rank, cclComm_t comm) {
    float x = 1, y = 0;
    for (int i = 0; i < 4; ++i) {
      ASSERT_EQ(cclAllReduce(&x, &y, 1, cclFloat32, cclSum, comm, nullptr), cclSuccess);
    }
    comms[static_cast<size_t>(rank)] = comm;
  });
  EXPECT_EQ(has_thread("ccl-metrics"), alive);
  if (!alive) {
    for (cclComm_t c : comms) EXPECT_EQ(cclCommDestroy(c), cclSuccess);
  }
  exit(::testing::Test::HasFailure() ? 1 : 0);
}

}  // namespace
