// One rank SIGKILLs itself in the middle of a loop of allreduces; every survivor must get
// cclRemoteError (not a hang, not a timeout) soon after. Usage: kill_check VICTIM ITERATION STAMP
// where STAMP is a file the victim writes its time of death to.
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "ccl/ccl.h"

namespace {
int64_t now_ms() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: kill_check VICTIM ITERATION STAMPFILE\n");
    return 2;
  }
  int victim = atoi(argv[1]);
  int die_at = atoi(argv[2]);
  const char* stamp = argv[3];
  cclComm_t comm = nullptr;
  if (cclCommInitFromEnv(&comm) != cclSuccess) {
    fprintf(stderr, "init failed: %s\n", cclGetLastError(nullptr));
    return 2;
  }
  int rank = 0;
  cclCommUserRank(comm, &rank);
  std::vector<float> data(1 << 16, 1.0f);
  for (int it = 0; it < 100000; ++it) {
    if (rank == victim && it == die_at) {
      FILE* f = fopen(stamp, "w");
      if (f != nullptr) {
        fprintf(f, "%lld\n", static_cast<long long>(now_ms()));
        fclose(f);
      }
      raise(SIGKILL);
    }
    cclResult_t r =
        cclAllReduce(data.data(), data.data(), data.size(), cclFloat32, cclMax, comm, nullptr);
    if (r != cclSuccess) {
      int64_t at = now_ms();
      long long died = 0;
      FILE* f = fopen(stamp, "r");
      if (f == nullptr || fscanf(f, "%lld", &died) != 1) died = at;
      if (f != nullptr) fclose(f);
      long long latency = at - died;
      printf("rank %d: %s after %lld ms at iteration %d: %s\n", rank, cclGetErrorString(r), latency,
             it, cclGetLastError(comm));
      cclCommAbort(comm);
      bool ok = r == cclRemoteError && latency < 10000;
      if (ok) printf("rank %d: SURVIVOR OK\n", rank);
      return ok ? 0 : 3;
    }
  }
  printf("rank %d: loop finished without an error\n", rank);
  cclCommDestroy(comm);
  return 4;
}
