// The library's own cost per operation with CCL_METRICS_FILE off and on, where nothing else hides
// it: allreduces of 8 bytes on a communicator of one rank (no peer, no waiting: what is left is
// the call's path through the library), in one process, alternating a communicator made with the
// metrics off and one made with them on (the setting is read when a communicator is made), ROUNDS
// times. Prints each round's ns per call and the on/off ratio, then the medians. Public API only
// (libccl.so). perf/metrics/cost.sh builds and runs it.
//   op_overhead METRICS_FILE [ROUNDS=9] [CALLS=200000]
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "ccl/ccl.h"

namespace {

double ns_per_call(bool metrics_on, const char* file, int calls) {
  if (metrics_on) {
    setenv("CCL_METRICS_FILE", file, 1);
  } else {
    unsetenv("CCL_METRICS_FILE");
  }
  cclUniqueId id;
  cclComm_t comm = nullptr;
  if (cclGetUniqueId(&id) != cclSuccess || cclCommInitRank(&comm, 1, id, 0) != cclSuccess) {
    std::fprintf(stderr, "op_overhead: init failed: %s\n", cclGetLastError(nullptr));
    std::exit(1);
  }
  double in = 1, out = 0;
  for (int i = 0; i < calls / 10; ++i) {  // warm up
    cclAllReduce(&in, &out, 1, cclFloat64, cclSum, comm, nullptr);
  }
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) {
    if (cclAllReduce(&in, &out, 1, cclFloat64, cclSum, comm, nullptr) != cclSuccess) {
      std::fprintf(stderr, "op_overhead: allreduce failed: %s\n", cclGetLastError(comm));
      std::exit(1);
    }
  }
  const double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  cclCommDestroy(comm);
  return ns / calls;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: op_overhead METRICS_FILE [ROUNDS] [CALLS]\n");
    return 2;
  }
  const char* file = argv[1];
  const int rounds = argc > 2 ? std::max(1, atoi(argv[2])) : 9;
  const int calls = argc > 3 ? std::max(1000, atoi(argv[3])) : 200000;
  std::vector<double> off, on, ratio;
  for (int r = 0; r < rounds; ++r) {
    // Alternate which goes first, so that drift within a round hits both alike.
    double a, b;
    if (r % 2 == 0) {
      a = ns_per_call(false, file, calls);
      b = ns_per_call(true, file, calls);
    } else {
      b = ns_per_call(true, file, calls);
      a = ns_per_call(false, file, calls);
    }
    off.push_back(a);
    on.push_back(b);
    ratio.push_back(b / a);
    std::printf("round %d: off %.1f ns, on %.1f ns per call, on/off %.3f\n", r, a, b, b / a);
  }
  std::printf(
      "1 rank, 8 B allreduce, %d calls x %d rounds: off median %.1f ns, on median %.1f ns, "
      "on - off %.1f ns; on/off median %.3f, best %.3f, worst %.3f\n",
      calls, rounds, median(off), median(on), median(on) - median(off), median(ratio),
      *std::min_element(ratio.begin(), ratio.end()), *std::max_element(ratio.begin(), ratio.end()));
  return 0;
}
