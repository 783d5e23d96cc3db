// One rank of a fault-injection trial (see README.md; fault_trials.sh starts it through cclrun).
// Every rank runs the mixed loop of fault_ops.h until an operation fails or --cap-ms passes; the
// victim rank injects the fault from a helper thread, so that it lands at a random point inside
// whatever the main thread is doing rather than between two calls:
//
//   kill         SIGKILL at --moment-ms after init; survivors are in a collective (NULL stream)
//   kill-stream  the same, but every rank queues each pass on a cclStream_t and waits in
//                cclStreamSynchronize
//   kill-idle    after --idle-iter passes every rank sleeps --idle-ms; the victim dies
//                --moment-ms into that sleep, and the survivors then call the next collective
//   stop         SIGSTOP at --moment-ms after init; survivors must time out (CCL_TIMEOUT, passed
//                here as --timeout-ms) naming the victim; after the driver's SIGCONT the victim
//                must fail cleanly or produce verified results
//   link-down    no victim: the driver (netns_link_down.sh) takes a network link down and
//                writes the stamp itself; every rank must fail within the timeout
//
// Before injecting, the victim writes the CLOCK_REALTIME time in ms to DIR/stamp. A survivor
// whose call fails prints
//   FAULT rank R result NAME (string) latency_ms L iter I op OP: last error
// (DIR/pid.R is written at start, DIR/ready.R once the communicator is up, for the driver)
// where L = failure time - stamp (kill-idle: - max(stamp, start of the first call after the
// sleep), i.e. only the time the call itself took), then checks it, prints
// "SURVIVOR OK rank R" or "SURVIVOR BAD rank R: why", aborts the communicator and exits 0 or 3.
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "fault_ops.h"
#include "fault_verdict.h"
#include "trial_files.h"

namespace ccl::fault {
namespace {

struct Args {
  Mode mode = Mode::kKill;
  int victim = -1;
  long moment_ms = -1;
  std::string dir;
  long idle_iter = 5;
  long idle_ms = 1000;
  long cap_ms = 12000;
  Limits limits;
};

void sleep_ms(long ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

bool read_stamp(const std::string& dir, int64_t* ms) {
  FILE* f = fopen((dir + "/stamp").c_str(), "r");
  if (f == nullptr) return false;
  long long v = 0;
  bool ok = fscanf(f, "%lld", &v) == 1;
  fclose(f);
  *ms = v;
  return ok;
}

[[noreturn]] void usage(const char* why) {
  fprintf(stderr,
          "fault_check: %s\nusage: fault_check --mode kill|kill-idle|kill-stream|stop|link-down "
          "--victim V "
          "--moment-ms M --dir DIR [--idle-iter K] [--idle-ms I] [--cap-ms C] "
          "[--max-latency-ms L] [--timeout-ms T]\n",
          why);
  exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) usage(("missing value after " + flag).c_str());
    const char* v = argv[++i];
    char* end = nullptr;
    long n = strtol(v, &end, 10);
    bool numeric = *v != '\0' && *end == '\0' && n >= 0;
    if (flag == "--mode") {
      if (!parse_mode(v, &a.mode)) usage("unknown --mode");
      continue;
    }
    if (flag == "--dir") {
      a.dir = v;
      continue;
    }
    if (!numeric) usage((flag + " needs a whole number >= 0").c_str());
    if (flag == "--victim")
      a.victim = static_cast<int>(n);
    else if (flag == "--moment-ms")
      a.moment_ms = n;
    else if (flag == "--idle-iter")
      a.idle_iter = n;
    else if (flag == "--idle-ms")
      a.idle_ms = n;
    else if (flag == "--cap-ms")
      a.cap_ms = n;
    else if (flag == "--max-latency-ms")
      a.limits.max_latency_ms = n;
    else if (flag == "--timeout-ms")
      a.limits.timeout_ms = n;
    else
      usage(("unknown option " + flag).c_str());
  }
  if (a.dir.empty()) usage("--dir is needed");
  if (a.mode != Mode::kLinkDown && (a.victim < 0 || a.moment_ms < 0)) {
    usage("--victim and --moment-ms are needed");
  }
  if ((a.mode == Mode::kStop || a.mode == Mode::kLinkDown) && a.limits.timeout_ms <= 0) {
    usage("stop and link-down need --timeout-ms");
  }
  return a;
}

// The victim's helper thread: waits for the moment, stamps the time, then SIGKILLs or SIGSTOPs
// the whole process (every thread stops: the main thread sees nothing until SIGCONT). The
// thread is detached and may outlive main's objects, so it keeps copies and a global flag.
std::atomic<bool> g_injected{false};

void arm_injector(const Args& args, int rank) {
  const auto due = std::chrono::steady_clock::now() + std::chrono::milliseconds(args.moment_ms);
  const std::string stamp = args.dir + "/stamp";
  const int sig = args.mode == Mode::kStop ? SIGSTOP : SIGKILL;
  std::thread([due, stamp, sig, rank] {
    std::this_thread::sleep_until(due);
    write_file(stamp, std::to_string(now_ms()) + "\n");
    fflush(stdout);
    g_injected.store(true);
    raise(sig);
    printf("VICTIM rank %d continued\n", rank);
  }).detach();
}

class Trial {
 public:
  Trial(const Args& args, cclComm_t comm, int rank, int nranks)
      : args_(args), comm_(comm), rank_(rank), ops_(make_mixed_ops(rank, nranks)) {}

  int run() {
    const int64_t start = now_ms();
    const bool victim = rank_ == args_.victim;
    if (victim && args_.mode != Mode::kKillIdle) arm_injector(args_, rank_);
    if (args_.mode == Mode::kKillStream && cclStreamCreate(&stream_) != cclSuccess) {
      printf("SETUP rank %d: cclStreamCreate failed: %s\n", rank_, cclGetLastError(nullptr));
      return 2;
    }
    for (uint64_t iter = 0; now_ms() - start < args_.cap_ms; ++iter) {
      if (args_.mode == Mode::kKillIdle && iter == static_cast<uint64_t>(args_.idle_iter)) {
        if (victim) arm_injector(args_, rank_);
        sleep_ms(args_.idle_ms);
        call_start_ = now_ms();
      }
      for (auto& op : ops_) op->prepare(iter);
      if (int code = run_pass(iter); code >= 0) return code;
    }
    printf("NOFAULT rank %d: no call failed in %ld ms\n", rank_, args_.cap_ms);
    cleanup_after_success();
    return 4;
  }

 private:
  // -1 when the whole pass succeeded and verified, else the exit code after reporting. On the
  // NULL stream each result is checked as soon as its call returns: a later failure must not
  // hide a wrong result (the SIGSTOPped victim may complete a call after SIGCONT).
  int run_pass(uint64_t iter) {
    for (auto& op : ops_) {
      cclResult_t r = op->issue(comm_, stream_);
      if (r != cclSuccess) return on_failure(r, iter, op->name());
      if (stream_ == nullptr && !verified(*op, iter)) return 5;
    }
    if (stream_ != nullptr) {
      cclResult_t r = cclStreamSynchronize(stream_);
      if (r != cclSuccess) return on_failure(r, iter, "cclStreamSynchronize");
      for (auto& op : ops_) {
        if (!verified(*op, iter)) return 5;
      }
    }
    return -1;
  }

  bool verified(const Op& op, uint64_t iter) {
    std::string diff = op.verify();
    if (diff.empty()) return true;
    printf("CORRUPT rank %d iter %llu: %s\n", rank_, static_cast<unsigned long long>(iter),
           diff.c_str());
    return false;
  }

  int on_failure(cclResult_t result, uint64_t iter, const char* op) {
    Failure f;
    f.fail_ms = now_ms();
    f.result = result;
    f.rank = rank_;
    f.iter = iter;
    f.op = op;
    f.message = cclGetLastError(comm_);
    if (f.message.empty()) f.message = cclGetLastError(nullptr);
    f.stamped = read_stamp(args_.dir, &f.stamp_ms);
    f.call_start_ms = call_start_;
    cclResult_t async = cclSuccess;
    f.async_query = cclCommGetAsyncError(comm_, &async);
    f.async_error = async;
    // Set just before the SIGSTOP: a failure seen after it was seen after SIGCONT.
    const bool resumed_victim =
        args_.mode == Mode::kStop && rank_ == args_.victim && g_injected.load();
    if (!resumed_victim) print_fault_line(args_.mode, f);

    // Abort must return promptly; with a stream, its queued work must then drain.
    const int64_t abort_start = now_ms();
    f.abort_result = cclCommAbort(comm_);
    f.abort_ms = now_ms() - abort_start;
    if (stream_ != nullptr) cclStreamDestroy(stream_);

    if (resumed_victim) return judge_resumed_victim(args_.limits, f) ? 0 : 3;
    return judge_survivor(args_.mode, args_.victim, args_.limits, f) ? 0 : 3;
  }

  void cleanup_after_success() {
    if (stream_ != nullptr) cclStreamDestroy(stream_);
    cclCommDestroy(comm_);
  }

  Args args_;
  cclComm_t comm_;
  int rank_;
  std::vector<std::unique_ptr<Op>> ops_;
  cclStream_t stream_ = nullptr;
  int64_t call_start_ = 0;  // kill-idle: when the first call after the sleep began
};

}  // namespace
}  // namespace ccl::fault

int main(int argc, char** argv) {
  using namespace ccl::fault;
  setvbuf(stdout, nullptr, _IOLBF, 0);  // a line must be out before a SIGKILL
  Args args = parse(argc, argv);
  // The pid first, so that the driver can find (and end) a rank that hangs even in init.
  const char* env_rank = getenv("CCL_RANK");
  write_file(args.dir + "/pid." + (env_rank != nullptr ? env_rank : "x"),
             std::to_string(getpid()) + "\n");
  cclComm_t comm = nullptr;
  if (cclResult_t r = cclCommInitFromEnv(&comm); r != cclSuccess) {
    printf("SETUP rank %s: init failed: %s: %s\n", env_rank != nullptr ? env_rank : "?",
           cclGetErrorString(r), cclGetLastError(nullptr));
    return 2;
  }
  int rank = 0, nranks = 0;
  cclCommUserRank(comm, &rank);
  cclCommCount(comm, &nranks);
  write_file(args.dir + "/ready." + std::to_string(rank), "\n");
  if (args.victim >= nranks) usage("--victim is not a rank of this communicator");
  Trial trial(args, comm, rank, nranks);
  return trial.run();
}
