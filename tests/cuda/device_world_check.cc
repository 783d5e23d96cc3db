// device_world_check: the device collectives of one host's ranks on a GPU, as NCCL users drive
// them: N processes on GPU 0, each with its own CUDA stream (cclStreamFromCuda), measuring
//   host cost   the time one cclAllReduce call takes on the host (the median of 400 calls of
//               8 bytes queued back to back, each timed alone): the call only queues;
//   latency     8-byte allreduces queued back to back, the stream's time per call (the worst
//               rank's, over 400 calls after 20 warm-up calls);
//   capture     one allreduce of 1 Mi floats captured into a CUDA graph, replayed 5 times with
//               new inputs: each replay's result must be exact;
//   enqueue     whether 20 calls returned while the stream was still busy with earlier work
//               (a host function that sleeps 100 ms): they must, or a call waited for the GPU.
//
//   device_world_check [--ranks N]      (1..8, default 2)
//
// Prints "device_world_check: N ranks: host cost H us/call, 8 B allreduce L us, graph capture:
// 5 replays exact, calls return before the GPU runs them" and exits 0; 1 on a failure (naming
// it); 77 without a CUDA device ("SKIP: ...").
#include <cuda_runtime.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ccl/ccl.h"

namespace {

using Clock = std::chrono::steady_clock;

// What each rank reports back to the parent (a shared page).
struct Report {
  double host_cost_us = 0;
  double latency_us = 0;
  int replays_exact = 0;
  int returned_early = 0;
  int ok = 0;
};

double micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

bool check(cudaError_t e, const char* what, int rank) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "[%d] %s: %s\n", rank, what, cudaGetErrorString(e));
  return false;
}

bool check(cclResult_t r, const char* what, int rank, cclComm_t comm) {
  if (r == cclSuccess) return true;
  std::fprintf(stderr, "[%d] %s: %s: %s\n", rank, what, cclGetErrorString(r),
               cclGetLastError(comm));
  return false;
}

// Keeps the stream busy for 100 ms: a host function that sleeps (the test's own hold; CUDA runs
// it on a thread of its own), so that what is queued after it cannot have run yet.
void CUDART_CB sleep_100ms(void*) { usleep(100000); }

int run_rank(int rank, int nranks, const cclUniqueId& id, Report* report) {
  if (cudaSetDevice(0) != cudaSuccess) return 77;
  cclComm_t comm = nullptr;
  if (!check(cclCommInitRank(&comm, nranks, id, rank), "cclCommInitRank", rank, nullptr)) return 1;
  cudaStream_t cuda = nullptr;
  cudaStreamCreateWithFlags(&cuda, cudaStreamNonBlocking);
  cclStream_t stream = nullptr;
  if (!check(cclStreamFromCuda(cuda, &stream), "cclStreamFromCuda", rank, comm)) return 1;
  float* small = nullptr;
  cudaMalloc(&small, 64);
  cudaMemset(small, 0, 64);

  // Enqueue-only: with the stream held, the calls must all return.
  if (!check(cudaLaunchHostFunc(cuda, sleep_100ms, nullptr), "cudaLaunchHostFunc", rank)) return 1;
  const auto held = Clock::now();
  for (int i = 0; i < 20; ++i) {
    if (!check(cclAllReduce(small, small, 2, cclFloat32, cclSum, comm, stream), "allreduce", rank,
               comm)) {
      return 1;
    }
  }
  report->returned_early = Clock::now() - held < std::chrono::milliseconds(50) &&
                           cudaStreamQuery(cuda) == cudaErrorNotReady;
  if (!check(cclStreamSynchronize(stream), "cclStreamSynchronize", rank, comm)) return 1;

  // Host cost: each call timed alone.
  constexpr int kCalls = 400;
  std::vector<double> costs;
  for (int i = 0; i < kCalls; ++i) {
    const auto t0 = Clock::now();
    if (!check(cclAllReduce(small, small, 2, cclFloat32, cclSum, comm, stream), "allreduce", rank,
               comm)) {
      return 1;
    }
    costs.push_back(micros(Clock::now() - t0));
  }
  if (!check(cclStreamSynchronize(stream), "cclStreamSynchronize", rank, comm)) return 1;
  std::nth_element(costs.begin(), costs.begin() + kCalls / 2, costs.end());
  report->host_cost_us = costs[kCalls / 2];

  // Latency: back to back, the stream's time per call.
  cudaEvent_t begin, end;
  cudaEventCreate(&begin);
  cudaEventCreate(&end);
  cudaEventRecord(begin, cuda);
  for (int i = 0; i < kCalls; ++i) cclAllReduce(small, small, 2, cclFloat32, cclSum, comm, stream);
  cudaEventRecord(end, cuda);
  if (!check(cclStreamSynchronize(stream), "cclStreamSynchronize", rank, comm)) return 1;
  float ms = 0;
  cudaEventElapsedTime(&ms, begin, end);
  report->latency_us = ms * 1000.0 / kCalls;

  // Graph capture and replay.
  constexpr size_t kCount = size_t{1} << 20;
  float *in = nullptr, *out = nullptr;
  cudaMalloc(&in, kCount * 4);
  cudaMalloc(&out, kCount * 4);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (!check(cudaStreamBeginCapture(cuda, cudaStreamCaptureModeThreadLocal), "BeginCapture",
             rank) ||
      !check(cclAllReduce(in, out, kCount, cclFloat32, cclSum, comm, stream), "captured allreduce",
             rank, comm) ||
      !check(cudaStreamEndCapture(cuda, &graph), "EndCapture", rank) ||
      !check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate", rank)) {
    return 1;
  }
  std::vector<float> host(kCount);
  for (int replay = 1; replay <= 5; ++replay) {
    std::fill(host.begin(), host.end(), static_cast<float>(replay * (rank + 1)));
    cudaMemcpyAsync(in, host.data(), kCount * 4, cudaMemcpyHostToDevice, cuda);
    cudaGraphLaunch(exec, cuda);
    cudaMemcpyAsync(host.data(), out, kCount * 4, cudaMemcpyDeviceToHost, cuda);
    if (!check(cudaStreamSynchronize(cuda), "graph replay", rank)) return 1;
    const float want = static_cast<float>(replay * nranks * (nranks + 1) / 2);
    if (std::all_of(host.begin(), host.end(), [&](float v) { return v == want; })) {
      ++report->replays_exact;
    } else {
      std::fprintf(stderr, "[%d] graph replay %d: %g, want %g\n", rank, replay, host[0], want);
    }
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cclStreamDestroy(stream);
  cclCommDestroy(comm);
  cudaStreamDestroy(cuda);
  report->ok = report->replays_exact == 5 && report->returned_early;
  return report->ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  int nranks = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--ranks") == 0) nranks = std::atoi(argv[i + 1]);
  }
  if (nranks < 1 || nranks > 8) {
    std::fprintf(stderr, "usage: %s [--ranks 1..8]\n", argv[0]);
    return 2;
  }
  // Asked in a child: a parent that touched CUDA could not fork usable children.
  const pid_t probe = fork();
  if (probe == 0) {
    int devices = 0;
    _exit(cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0 ? 0 : 77);
  }
  int status = 0;
  waitpid(probe, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::printf("SKIP: no CUDA device\n");
    return 77;
  }
  auto* reports = static_cast<Report*>(mmap(
      nullptr, sizeof(Report) * nranks, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  cclUniqueId id;
  if (reports == MAP_FAILED || cclGetUniqueId(&id) != cclSuccess) return 1;
  std::vector<pid_t> children;
  for (int r = 0; r < nranks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      alarm(300);  // bounded, whatever happens
      _exit(run_rank(r, nranks, id, &reports[r]));
    }
    children.push_back(pid);
  }
  int worst = 0;
  for (pid_t pid : children) {
    waitpid(pid, &status, 0);
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    if (code != 0 && (worst == 0 || worst == 77)) worst = code;
  }
  if (worst != 0) {
    std::printf("device_world_check: %d ranks: FAILED (enqueue-only %d, graph replays exact %d)\n",
                nranks, reports[0].returned_early, reports[0].replays_exact);
    return worst;
  }
  double cost = 0, latency = 0;
  for (int r = 0; r < nranks; ++r) {
    cost = std::max(cost, reports[r].host_cost_us);
    latency = std::max(latency, reports[r].latency_us);
  }
  std::printf(
      "device_world_check: %d ranks: host cost %.2f us/call, 8 B allreduce %.2f us, "
      "graph capture: 5 replays exact, calls return before the GPU runs them\n",
      nranks, cost, latency);
  return 0;
}
