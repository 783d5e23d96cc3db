// The flight recorder: the ring of recent operations, its text, and the SIGUSR1 dump.
#include "core/diagnostics/flight_recorder.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ccl/ccl.h"
#include "core/diagnostics/signal_dump.h"

namespace ccl {
namespace {

using State = FlightRecorder::State;

#if defined(__SANITIZE_THREAD__)
constexpr bool kThreadSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kThreadSanitizer = true;
#else
constexpr bool kThreadSanitizer = false;
#endif
#else
constexpr bool kThreadSanitizer = false;
#endif

OpRecord allreduce(uint64_t seq) {
  OpRecord r;
  r.seq = seq;
  r.collective = "allreduce";
  r.count = 1024;
  r.datatype = cclFloat32;
  r.op = cclSum;
  r.algorithm = "ring";
  r.protocol = "simple";
  r.bytes = 4096;
  return r;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Sends fd 2 to a temporary file for the life of the object (the log writes to stderr).
class StderrCapture {
 public:
  StderrCapture() {
    char path[] = "/tmp/ccl_fr_test_XXXXXX";
    fd_ = mkstemp(path);
    path_ = path;
    fflush(stderr);
    saved_ = dup(2);
    dup2(fd_, 2);
  }
  ~StderrCapture() {
    fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
    close(fd_);
    unlink(path_.c_str());
  }
  std::string text() const {
    std::ifstream in(path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  // Polls the file until it holds every part, up to 5 s.
  bool wait_for(const std::vector<std::string>& parts) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    do {
      const std::string t = text();
      bool all = true;
      for (const auto& p : parts) all = all && contains(t, p);
      if (all) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    } while (std::chrono::steady_clock::now() < deadline);
    return false;
  }

 private:
  int fd_ = -1;
  int saved_ = -1;
  std::string path_;
};

TEST(FlightRecorder, KeepsTheLastOpsOldestFirstWithTheirStates) {
  FlightRecorder fr(4, "world", 1, 3);
  for (uint64_t seq = 0; seq < 10; ++seq) {
    const uint64_t h = fr.begin(allreduce(seq));
    ASSERT_NE(h, 0u);
    if (seq == 7)
      fr.end(h, State::Failed, cclRemoteError);
    else if (seq != 9)
      fr.end(h, State::Completed, cclSuccess);
  }
  const auto lines = lines_of(fr.format());
  ASSERT_EQ(lines.size(), 5u) << fr.format();
  EXPECT_TRUE(contains(lines[0], "comm \"world\" rank 1 of 3")) << lines[0];
  EXPECT_TRUE(contains(lines[0], "10 ops recorded")) << lines[0];
  const char* seqs[] = {"seq 6 ", "seq 7 ", "seq 8 ", "seq 9 "};
  const char* states[] = {"state completed,", "state failed (cclRemoteError),", "state completed,",
                          "state started,"};
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(contains(lines[i + 1], seqs[i])) << lines[i + 1];
    EXPECT_TRUE(contains(lines[i + 1], states[i])) << lines[i + 1];
    EXPECT_TRUE(contains(lines[i + 1], "allreduce count 1024 type float op sum")) << lines[i + 1];
    EXPECT_TRUE(contains(lines[i + 1], "algo ring/simple")) << lines[i + 1];
  }
  EXPECT_TRUE(contains(lines[1], "took")) << lines[1];
  EXPECT_TRUE(contains(lines[4], "running")) << lines[4];
}

TEST(FlightRecorder, ShowsPendingPeersOfUnfinishedOps) {
  FlightRecorder fr(8, "c", 0, 16);
  OpRecord recv;
  recv.seq = 1;
  recv.collective = "recv";
  recv.count = 7;
  recv.datatype = cclInt32;
  recv.peer = 5;
  const uint64_t waiting = fr.begin(recv);
  const int one[] = {5};
  fr.set_pending(waiting, one);
  const uint64_t many = fr.begin(allreduce(2));
  const int ten[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  fr.set_pending(many, ten);
  const uint64_t done = fr.begin(allreduce(3));
  fr.set_pending(done, one);
  fr.end(done, State::Completed, cclSuccess);

  const auto lines = lines_of(fr.format());
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_TRUE(contains(lines[1], "recv count 7 type int32 peer 5")) << lines[1];
  EXPECT_TRUE(contains(lines[1], "pending peers 5")) << lines[1];
  EXPECT_TRUE(contains(lines[2], "pending peers 1 2 3 4 5 6 7 8 (+2 more)")) << lines[2];
  EXPECT_FALSE(contains(lines[3], "pending")) << lines[3];

  // Cleared once the executor makes progress.
  fr.set_pending(waiting, {});
  EXPECT_FALSE(contains(lines_of(fr.format())[1], "pending")) << fr.format();
}

TEST(FlightRecorder, FailedAndTimedOutOpsNameTheirResultAndKeepTheirPeers) {
  FlightRecorder fr(4, "c", 2, 4);
  const uint64_t a = fr.begin(allreduce(1));
  const int peers[] = {3};
  fr.set_pending(a, peers);
  fr.end(a, State::TimedOut, cclTimeout);
  const uint64_t b = fr.begin(allreduce(2));
  fr.end(b, State::Aborted, cclRemoteError);
  const auto lines = lines_of(fr.format());
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_TRUE(contains(lines[1], "state timed-out (cclTimeout)")) << lines[1];
  EXPECT_TRUE(contains(lines[1], "pending peers 3")) << lines[1];
  EXPECT_TRUE(contains(lines[2], "state aborted (cclRemoteError)")) << lines[2];
}

TEST(FlightRecorder, StaleHandlesAreIgnored) {
  FlightRecorder fr(2, "c", 0, 2);
  const uint64_t old = fr.begin(allreduce(1));
  fr.begin(allreduce(2));
  fr.begin(allreduce(3));  // reuses the slot of seq 1
  fr.end(old, State::Failed, cclInternalError);
  const int peers[] = {1};
  fr.set_pending(old, peers);
  const std::string text = fr.format();
  EXPECT_FALSE(contains(text, "failed")) << text;
  EXPECT_FALSE(contains(text, "pending")) << text;
  EXPECT_FALSE(contains(text, "seq 1 ")) << text;
  fr.end(0, State::Completed, 0);  // the handle of a disabled recorder: harmless
}

TEST(FlightRecorder, CapacityZeroDoesNothing) {
  FlightRecorder fr(0, "off", 0, 2);
  EXPECT_FALSE(fr.enabled());
  const uint64_t h = fr.begin(allreduce(1));
  EXPECT_EQ(h, 0u);
  const int peers[] = {1};
  fr.set_pending(h, peers);
  fr.end(h, State::Failed, cclRemoteError);
  EXPECT_TRUE(contains(fr.format(), "disabled")) << fr.format();
  EXPECT_EQ(lines_of(fr.format()).size(), 1u);
  StderrCapture cap;
  fr.dump("test", /*force=*/true);
  EXPECT_EQ(cap.text(), "");
}

TEST(FlightRecorder, DumpWritesLogLinesWithTheRank) {
  FlightRecorder fr(4, "dumped", 3, 4);
  fr.begin(allreduce(42));
  std::string text;
  {
    StderrCapture cap;
    fr.dump("unit test", /*force=*/true);
    text = cap.text();
  }
  EXPECT_TRUE(contains(text, "[3] CCL WARN flight recorder dump (unit test)")) << text;
  EXPECT_TRUE(contains(text, "[3] CCL WARN flight recorder: comm \"dumped\"")) << text;
  EXPECT_TRUE(contains(text, "[3] CCL WARN   seq 42 allreduce")) << text;
}

// One thread records, another formats at the same time (run under TSan too).
TEST(FlightRecorder, ConcurrentRecordingAndFormatting) {
  FlightRecorder fr(16, "stress", 0, 4);
  std::atomic<bool> done{false};
  std::thread writer([&] {
    const int peers[] = {1, 2, 3};
    for (uint64_t seq = 1; seq <= 100000; ++seq) {
      const uint64_t h = fr.begin(allreduce(seq));
      if (seq % 7 == 0) fr.set_pending(h, peers);
      fr.end(h, seq % 11 == 0 ? State::Failed : State::Completed, seq % 11 == 0 ? cclTimeout : 0);
    }
    done.store(true);
  });
  int formats = 0;
  while (!done.load() || formats == 0) {
    const auto lines = lines_of(fr.format());
    ASSERT_GE(lines.size(), 1u);
    ASSERT_LE(lines.size(), 17u);
    unsigned long long prev = 0;
    for (size_t i = 1; i < lines.size(); ++i) {
      unsigned long long seq = 0;
      ASSERT_EQ(sscanf(lines[i].c_str(), "  seq %llu allreduce", &seq), 1) << lines[i];
      ASSERT_GT(seq, prev) << "not oldest first: " << lines[i];
      prev = seq;
    }
    ++formats;
  }
  writer.join();
  EXPECT_TRUE(contains(fr.format(), "100000 ops recorded")) << fr.format();
}

double thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

// Printed, not asserted. CPU time as well as wall time: on a loaded machine the wall time counts
// the time the thread waited for a core.
TEST(FlightRecorder, CostOfBeginAndEnd) {
  FlightRecorder fr(64, "bench", 0, 2);
  const OpRecord r = allreduce(0);
  constexpr int kIters = 1000000;
  const double cpu0 = thread_cpu_ns();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kIters; ++i) fr.end(fr.begin(r), State::Completed, 0);
  const auto t1 = std::chrono::steady_clock::now();
  const double cpu = (thread_cpu_ns() - cpu0) / kIters;
  const double wall = std::chrono::duration<double, std::nano>(t1 - t0).count() / kIters;
  const auto c0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kIters; ++i) std::chrono::steady_clock::now();
  const double clock =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - c0).count() /
      kIters;
  printf("begin+end: %.1f ns wall, %.1f ns CPU per operation (one steady_clock read: %.1f ns)\n",
         wall, cpu, clock);
  EXPECT_TRUE(contains(fr.format(), "1000000 ops recorded"));
}

TEST(SignalDump, Sigusr1DumpsRegisteredRecordersOnly) {
  FlightRecorder kept(4, "sigusr1-kept", 0, 2);
  kept.begin(allreduce(7));
  {
    FlightRecorder gone(4, "sigusr1-gone", 0, 2);
    register_recorder(&gone);
    unregister_recorder(&gone);
  }
  register_recorder(&kept);
  register_recorder(&kept);  // twice: still one dump
  ASSERT_TRUE(signal_dump_active());
  StderrCapture cap;
  raise(SIGUSR1);
  EXPECT_TRUE(
      cap.wait_for({"flight recorder dump (SIGUSR1)", "comm \"sigusr1-kept\"", "seq 7 allreduce"}))
      << cap.text();
  // All recorders are dumped in one pass under the registry lock, so by now an unregistered one
  // would be there too.
  const std::string text = cap.text();
  EXPECT_FALSE(contains(text, "sigusr1-gone")) << text;
  EXPECT_EQ(text.find("sigusr1-kept"), text.rfind("sigusr1-kept")) << text;
  unregister_recorder(&kept);
}

// Recorders come and go while SIGUSR1 dumps run: unregistering must wait for a running dump.
TEST(SignalDump, RecordersDieWhileDumpsRun) {
  StderrCapture cap;  // the dumps are many; keep them out of the test output
  FlightRecorder anchor(4, "churn-anchor", 0, 2);  // proves that dumps ran meanwhile
  register_recorder(&anchor);
  std::atomic<bool> done{false};
  std::thread signaller([&] {
    while (!done.load()) {
      kill(getpid(), SIGUSR1);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  for (int i = 0; i < 2000; ++i) {
    auto fr = std::make_unique<FlightRecorder>(8, "churn", 0, 2);
    fr->begin(allreduce(i));
    register_recorder(fr.get());
    if (i % 2 == 0) unregister_recorder(fr.get());  // the odd ones rely on the destructor
    if (i % 16 == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  const bool dumped = cap.wait_for({"comm \"churn-anchor\""});
  done.store(true);
  signaller.join();
  unregister_recorder(&anchor);
  EXPECT_TRUE(dumped) << "no dump ran during the test";
}

// Runs child() in a forked process that then exits through exit() (static destructors run);
// returns its exit code, -1 if it did not exit within 20 s.
template <class F>
int in_child(F child) {
  const pid_t pid = fork();
  if (pid == 0) exit(child());
  if (pid < 0) return -1;
  int status = 0;
  pid_t done = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while ((done = waitpid(pid, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A forked child neither wakes nor stops its parent's dumper thread, and sets up its own when it
// registers a recorder; it then dumps only its own recorders.
TEST(SignalDump, ForkedChildrenSetUpTheirOwn) {
  if (kThreadSanitizer) GTEST_SKIP() << "TSan does not start threads after a multi-threaded fork";
  FlightRecorder parent(4, "parent-rec", 0, 2);
  parent.begin(allreduce(9));
  register_recorder(&parent);
  ASSERT_TRUE(signal_dump_active());
  {
    // Earlier tests may have left SIGUSR1 wake-ups in the pipe. Dump once more and wait until
    // the dumps go quiet for 200 ms, so that a later dump can only come from the child.
    StderrCapture drain;
    raise(SIGUSR1);
    ASSERT_TRUE(drain.wait_for({"comm \"parent-rec\""})) << drain.text();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (size_t seen = 0; std::chrono::steady_clock::now() < deadline;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      const size_t now = drain.text().size();
      if (now == seen) break;
      seen = now;
    }
  }

  {
    StderrCapture parent_cap;
    EXPECT_EQ(in_child([] {
                StderrCapture cap;
                raise(SIGUSR1);  // must not reach the parent's pipe
                return signal_dump_active() ? 1 : 0;
              }),
              0);
    // A wrong wake-up would show within milliseconds; the wait only makes a miss less likely.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_FALSE(contains(parent_cap.text(), "parent-rec")) << "the child woke the parent";
  }
  EXPECT_EQ(in_child([] {
              FlightRecorder child(4, "child-rec", 1, 2);
              child.begin(allreduce(5));
              register_recorder(&child);
              if (!signal_dump_active()) return 2;
              StderrCapture cap;
              raise(SIGUSR1);
              if (!cap.wait_for({"comm \"child-rec\"", "seq 5 allreduce"})) return 3;
              if (contains(cap.text(), "parent-rec")) return 4;
              return 0;
            }),
            0)
      << "-1: hung, 2: not active, 3: no dump, 4: the parent's recorder dumped";

  // The parent's thread still runs (a child's exit did not stop it).
  StderrCapture cap;
  raise(SIGUSR1);
  EXPECT_TRUE(cap.wait_for({"comm \"parent-rec\"", "seq 9 allreduce"})) << cap.text();
  unregister_recorder(&parent);
}

// These run in a fresh process each: the handler is installed once per process.
TEST(SignalDumpDeathTest, DisabledRecorderInstallsNothing) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        FlightRecorder fr(0, "off", 0, 1);
        register_recorder(&fr);
        struct sigaction old {};
        sigaction(SIGUSR1, nullptr, &old);
        _exit(!signal_dump_active() && old.sa_handler == SIG_DFL ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
}

void app_handler(int) {}

TEST(SignalDumpDeathTest, ApplicationHandlerIsLeftAlone) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        signal(SIGUSR1, app_handler);
        FlightRecorder fr(4, "c", 0, 1);
        register_recorder(&fr);
        struct sigaction now {};
        sigaction(SIGUSR1, nullptr, &now);
        _exit(!signal_dump_active() && now.sa_handler == app_handler ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace ccl
