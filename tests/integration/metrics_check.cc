// The ranks of tests/integration/metrics_test.py, one process each under cclrun, with
// CCL_METRICS_FILE set by the test. Usage: metrics_check counts|failures DIR
//   counts    on the world communicator: 6 allreduces of 1 float (4 B), 4 of 1024 (4096 B), 3 of
//             1025 (4100 B), 2 of 300000 (1.2 MB); 5 broadcasts of 100 int8 from the last rank,
//             2 of 8192 doubles (64 KiB) from rank 0. On "half" (split by rank parity): 7
//             allreduces of 10 int32. Then it writes DIR/ready.RANK and waits (60 s at most) for
//             DIR/go, so that the test reads the files while the job lives; then, under
//             CCL_CHECK_MODE on "checked" (a split of all ranks), an allreduce whose count differs
//             per rank (1 + rank floats) fails on every rank with cclInvalidUsage.
//   failures  2 ranks. On "slow" (timeout 2 s) rank 0's allreduce of 1 float times out (rank 1
//             calls nothing); on "lost" rank 1 aborts and rank 0's allreduce of 1 float fails
//             with cclRemoteError.
// Every communicator is destroyed at the end (the files then hold the final counts). Prints
// "metrics_check: ok" on success; any unexpected result exits 1 naming it.
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "ccl/ccl.h"

namespace {

int g_rank = -1;

void expect(cclResult_t got, cclResult_t want, const char* what) {
  if (got == want) return;
  std::fprintf(stderr, "metrics_check rank %d: %s returned %s, not %s (%s)\n", g_rank, what,
               cclGetErrorString(got), cclGetErrorString(want), cclGetLastError(nullptr));
  std::exit(1);
}

cclComm_t split(cclComm_t parent, int color, const char* name, int timeout_ms = -1) {
  cclConfig_t config = CCL_CONFIG_INITIALIZER;
  config.commName = name;
  if (timeout_ms > 0) config.timeoutMs = timeout_ms;
  cclComm_t child = nullptr;
  expect(cclCommSplit(parent, color, g_rank, &child, &config), cclSuccess, "cclCommSplit");
  return child;
}

void allreduces(cclComm_t comm, size_t count, int times, cclDataType_t type = cclFloat32) {
  std::vector<double> in(count, 0.0), out(count);  // zeros: valid data of every type
  for (int i = 0; i < times; ++i) {
    expect(cclAllReduce(in.data(), out.data(), count, type, cclSum, comm, nullptr), cclSuccess,
           "cclAllReduce");
  }
}

void broadcasts(cclComm_t comm, size_t count, cclDataType_t type, int root, int times) {
  std::vector<double> data(count, 1.0);
  for (int i = 0; i < times; ++i) {
    expect(cclBroadcast(data.data(), data.data(), count, type, root, comm, nullptr), cclSuccess,
           "cclBroadcast");
  }
}

bool wait_for_file(const std::string& path, int seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (access(path.c_str(), F_OK) != 0) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

void counts(cclComm_t world, int nranks, const std::string& dir) {
  allreduces(world, 1, 6);
  allreduces(world, 1024, 4);
  allreduces(world, 1025, 3);
  allreduces(world, 300000, 2);
  broadcasts(world, 100, cclInt8, nranks - 1, 5);
  broadcasts(world, 8192, cclFloat64, 0, 2);
  cclComm_t half = split(world, g_rank % 2, "half");
  allreduces(half, 10, 7, cclInt32);
  expect(cclBarrier(world, nullptr), cclSuccess, "cclBarrier");
  const std::string ready = dir + "/ready." + std::to_string(g_rank);
  if (FILE* f = std::fopen(ready.c_str(), "w")) std::fclose(f);
  if (!wait_for_file(dir + "/go", 60)) {
    std::fprintf(stderr, "metrics_check rank %d: no %s/go within 60 s\n", g_rank, dir.c_str());
    std::exit(1);
  }
  setenv("CCL_CHECK_MODE", "1", 1);  // read when a communicator is made
  cclComm_t checked = split(world, 0, "checked");
  std::vector<float> in(8, 1.0f), out(8);
  expect(cclAllReduce(in.data(), out.data(), 1 + static_cast<size_t>(g_rank), cclFloat32, cclSum,
                      checked, nullptr),
         cclInvalidUsage, "the mismatched cclAllReduce");
  expect(cclCommDestroy(checked), cclSuccess, "cclCommDestroy(checked)");
  expect(cclCommDestroy(half), cclSuccess, "cclCommDestroy(half)");
}

void failures(cclComm_t world, const std::string& dir) {
  (void)dir;
  float x = 1, y = 0;
  cclComm_t slow = split(world, 0, "slow", 2000);
  if (g_rank == 0) {
    expect(cclAllReduce(&x, &y, 1, cclFloat32, cclSum, slow, nullptr), cclTimeout,
           "the unmatched cclAllReduce");
  }
  expect(cclBarrier(world, nullptr), cclSuccess, "cclBarrier");
  expect(cclCommDestroy(slow), cclSuccess, "cclCommDestroy(slow)");
  cclComm_t lost = split(world, 0, "lost", 20000);
  if (g_rank == 1) {
    expect(cclCommAbort(lost), cclSuccess, "cclCommAbort(lost)");
  } else {
    expect(cclAllReduce(&x, &y, 1, cclFloat32, cclSum, lost, nullptr), cclRemoteError,
           "the cclAllReduce of an aborted peer");
    expect(cclCommDestroy(lost), cclSuccess, "cclCommDestroy(lost)");
  }
  expect(cclBarrier(world, nullptr), cclSuccess, "cclBarrier");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: metrics_check counts|failures DIR\n");
    return 2;
  }
  const std::string mode = argv[1], dir = argv[2];
  cclComm_t world = nullptr;
  if (cclCommInitFromEnv(&world) != cclSuccess) {
    std::fprintf(stderr, "metrics_check: init failed: %s\n", cclGetLastError(nullptr));
    return 3;
  }
  int nranks = 0;
  cclCommUserRank(world, &g_rank);
  cclCommCount(world, &nranks);
  if (mode == "counts") {
    counts(world, nranks, dir);
  } else if (mode == "failures" && nranks == 2) {
    failures(world, dir);
  } else {
    std::fprintf(stderr, "metrics_check: unknown mode %s (or failures with %d ranks)\n",
                 mode.c_str(), nranks);
    return 2;
  }
  expect(cclCommDestroy(world), cclSuccess, "cclCommDestroy(world)");
  std::printf("metrics_check: ok (rank %d)\n", g_rank);
  return 0;
}
