/* An NCCL program, as users write them: compiled against NCCL's nccl.h, linked with NCCL's
 * libnccl.so.2, and run with LD_LIBRARY_PATH on ccl's shim (libccl_nccl.so behind a file named
 * libnccl.so.2) on host buffers and the default stream, which NCCL does not allow and ccl does.
 *
 *   nccl_program threads N    one process, ncclCommInitAll over N ranks, one thread driving all
 *                             of them through groups (as a single-process NCCL program does)
 *   nccl_program ranks IDFILE one rank per process under cclrun (CCL_RANK, CCL_WORLD_SIZE): rank
 *                             0 writes the ncclUniqueId into IDFILE, the others read it there
 *
 * It first checks that the libnccl.so.2 it runs on is ccl's, then runs every collective, groups
 * of sends and receives, gather and scatter, PreMulSum ops, ncclMemAlloc, a split with a
 * non-blocking child (ranks), and the calls ccl refuses; it checks each result and prints one
 * line per rank. Exit 0 when everything matched. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <nccl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS 8
#define COUNT 1000

static int failures = 0;

static void failf(const char* format, ...) {
  va_list args;
  va_start(args, format);
  fprintf(stderr, "nccl_program: ");
  vfprintf(stderr, format, args);
  fprintf(stderr, "\n");
  va_end(args);
  ++failures;
}

#define EXPECT_OK(call)                                                              \
  do {                                                                               \
    ncclResult_t r_ = (call);                                                        \
    if (r_ != ncclSuccess)                                                           \
      failf("%s:%d: %s: %s (%s)", __FILE__, __LINE__, #call, ncclGetErrorString(r_), \
            ncclGetLastError(NULL));                                                 \
  } while (0)

#define EXPECT_RESULT(want, call)                                                          \
  do {                                                                                     \
    ncclResult_t r_ = (call);                                                              \
    if (r_ != (want))                                                                      \
      failf("%s:%d: %s gave %d, not %d", __FILE__, __LINE__, #call, (int)r_, (int)(want)); \
  } while (0)

/* The ranks this process drives, all from this thread. */
static ncclComm_t comms[MAX_RANKS];
static int local_ranks = 0; /* comms used here */
static int rank_of[MAX_RANKS];
static int nranks = 0;

static float value(int rank, int i) { return (float)(rank * 100 + i % 89); }

/* The library serving ncclAllReduce must be ccl's shim, not NVIDIA's. */
static void check_library(void) {
  Dl_info info;
  char path[PATH_MAX];
  if (dladdr((void*)&ncclAllReduce, &info) == 0 || info.dli_fname == NULL ||
      realpath(info.dli_fname, path) == NULL) {
    failf("cannot tell which library serves ncclAllReduce");
    return;
  }
  if (strstr(path, "libccl_nccl") == NULL)
    failf("ncclAllReduce comes from %s, not ccl's shim", path);
}

static void check_queries(void) {
  int version = 0;
  EXPECT_OK(ncclGetVersion(&version));
  if (version != NCCL_VERSION_CODE) failf("ncclGetVersion: %d, not %d", version, NCCL_VERSION_CODE);
  for (int l = 0; l < local_ranks; ++l) {
    int count = -1, rank = -1, device = -1;
    EXPECT_OK(ncclCommCount(comms[l], &count));
    EXPECT_OK(ncclCommUserRank(comms[l], &rank));
    EXPECT_OK(ncclCommCuDevice(comms[l], &device));
    if (count != nranks || rank != rank_of[l] || device < 0) {
      failf("queries: count %d rank %d device %d", count, rank, device);
    }
  }
}

/* allreduce, broadcast, bcast, reduce, allgather, reducescatter, alltoall on float buffers. */
static void check_collectives(void) {
  static float in[MAX_RANKS][COUNT * MAX_RANKS], out[MAX_RANKS][COUNT * MAX_RANKS];
  const int n = nranks;
  for (int l = 0; l < local_ranks; ++l) {
    for (int i = 0; i < COUNT * n; ++i) in[l][i] = value(rank_of[l], i);
  }
  /* allreduce sum, out of place */
  EXPECT_OK(ncclGroupStart());
  for (int l = 0; l < local_ranks; ++l) {
    EXPECT_OK(ncclAllReduce(in[l], out[l], COUNT, ncclFloat, ncclSum, comms[l], NULL));
  }
  EXPECT_OK(ncclGroupEnd());
  for (int l = 0; l < local_ranks; ++l) {
    for (int i = 0; i < COUNT; ++i) {
      float want = 0;
      for (int q = 0; q < n; ++q) want += value(q, i);
      if (out[l][i] != want) {
        failf("allreduce: rank %d [%d] = %g, not %g", rank_of[l], i, out[l][i], want);
        break;
      }
    }
  }
  /* broadcast from the last rank (out of place), then ncclBcast from rank 0 (in place) */
  EXPECT_OK(ncclGroupStart());
  for (int l = 0; l < local_ranks; ++l) {
    EXPECT_OK(ncclBroadcast(in[l], out[l], COUNT, ncclFloat, n - 1, comms[l], NULL));
  }
  EXPECT_OK(ncclGroupEnd());
  for (int l = 0; l < local_ranks; ++l) {
    if (out[l][7] != value(n - 1, 7)) failf("broadcast: rank %d got %g", rank_of[l], out[l][7]);
    memcpy(out[l], in[l], sizeof(float) * COUNT);
  }
  EXPECT_OK(ncclGroupStart());
  for (int l = 0; l < local_ranks; ++l) {
    EXPECT_OK(ncclBcast(out[l], COUNT, ncclFloat, 0, comms[l], NULL));
  }
  EXPECT_OK(ncclGroupEnd());
  for (int l = 0; l < local_ranks; ++l) {
    if (out[l][9] != value(0, 9)) failf("bcast: rank %d got %g", rank_of[l], out[l][9]);
  }
  /* reduce max to rank 0 */
  EXPECT_OK(ncclGroupStart());
  for (int l = 0; l < local_ranks; ++l) {
    EXPECT_OK(ncclReduce(in[l], out[l], COUNT, ncclFloat, ncclMax, 0, comms[l], NULL));
  }
  EXPECT_OK(ncclGroupEnd());
  for (int l = 0; l < local_ranks; ++l) {
    if (rank_of[l] == 0 && out[l][3] != value(n - 1, 3)) failf("reduce: got %g", out[l][3]);
  }
  /* allgather */
  EXPECT_OK(ncclGroupStart());
  for (int l = 0; l < local_ranks; ++l) {
    EXPECT_OK(ncclAllGather(in[l], out[l], COUNT, ncclFloat, comms[l], NULL));
  }
  EXPECT_OK(ncclGroupEnd());
  for (int l = 0; l < local_ranks; ++l) {
    for (int q = 0; q < n; ++q) {
      if (out[l][q * COUNT + 5] != value(q, 5)) failf("allgather: rank %d block %d", rank_of[l], q);
    }
  }
  /* reducescatter sum: rank r gets block r of the sum */
  EXPECT_OK(ncclGroupStart());
  for (int l = 0; l < local_ranks; ++l) {
    EXPECT_OK(ncclReduceScatter(in[l], out[l], COUNT, ncclFloat, ncclSum, comms[l], NULL));
  }
  EXPECT_OK(ncclGroupEnd());
  for (int l = 0; l < local_ranks; ++l) {
    const int i = rank_of[l] * COUNT + 11;
    float want = 0;
    for (int q = 0; q < n; ++q) want += value(q, i);
    if (out[l][11] != want)
      failf("reducescatter: rank %d got %g, not %g", rank_of[l], out[l][11], want);
  }
  /* alltoall: block q of rank r's input goes to rank q's block r */
  EXPECT_OK(ncclGroupStart());
  for (int l = 0; l < local_ranks; ++l) {
    EXPECT_OK(ncclAlltoAll(in[l], out[l], COUNT, ncclFloat, comms[l], NULL));
  }
  EXPECT_OK(ncclGroupEnd());
  for (int l = 0; l < local_ranks; ++l) {
    for (int q = 0; q < n; ++q) {
      if (out[l][q * COUNT + 2] != value(q, rank_of[l] * COUNT + 2)) {
        failf("alltoall: rank %d block %d", rank_of[l], q);
      }
    }
  }
}

/* gather to the last rank, scatter from rank 0 (in place at the root), a ring of sends. */
static void check_rooted_and_p2p(void) {
  static int32_t in[MAX_RANKS][COUNT * MAX_RANKS], out[MAX_RANKS][COUNT * MAX_RANKS];
  const int n = nranks, gather_root = n - 1;
  for (int l = 0; l < local_ranks; ++l) {
    for (int i = 0; i < COUNT * n; ++i) in[l][i] = rank_of[l] * 100000 + i;
  }
  EXPECT_OK(ncclGroupStart());
  for (int l = 0; l < local_ranks; ++l) {
    EXPECT_OK(ncclGather(in[l], out[l], COUNT, ncclInt32, gather_root, comms[l], NULL));
  }
  EXPECT_OK(ncclGroupEnd());
  for (int l = 0; l < local_ranks; ++l) {
    if (rank_of[l] != gather_root) continue;
    for (int q = 0; q < n; ++q) {
      if (out[l][q * COUNT + 4] != q * 100000 + 4) failf("gather: block %d", q);
    }
  }
  EXPECT_OK(ncclGroupStart());
  for (int l = 0; l < local_ranks; ++l) {
    /* the root scatters in place: its recvbuff is its own block of sendbuff */
    void* recv = rank_of[l] == 0 ? (void*)in[l] : (void*)out[l];
    EXPECT_OK(ncclScatter(in[l], recv, COUNT, ncclInt32, 0, comms[l], NULL));
  }
  EXPECT_OK(ncclGroupEnd());
  for (int l = 0; l < local_ranks; ++l) {
    const int32_t got = rank_of[l] == 0 ? in[l][6] : out[l][6];
    if (got != rank_of[l] * COUNT + 6) failf("scatter: rank %d got %d", rank_of[l], got);
  }
  /* a ring: send to the next rank, receive from the previous one, in one group */
  EXPECT_OK(ncclGroupStart());
  for (int l = 0; l < local_ranks; ++l) {
    const int r = rank_of[l];
    EXPECT_OK(ncclSend(in[l], COUNT, ncclInt32, (r + 1) % n, comms[l], NULL));
    EXPECT_OK(ncclRecv(out[l], COUNT, ncclInt32, (r + n - 1) % n, comms[l], NULL));
  }
  EXPECT_OK(ncclGroupEnd());
  for (int l = 0; l < local_ranks; ++l) {
    const int from = (rank_of[l] + n - 1) % n;
    if (out[l][8] != from * 100000 + 8) failf("send/recv: rank %d got %d", rank_of[l], out[l][8]);
  }
}

/* PreMulSum, read now (host immediate) and at each operation (ncclScalarDevice on a host
 * pointer, which ccl reads on the host); AVG on doubles; ncclMemAlloc memory as a buffer. */
static void check_ops_and_memory(void) {
  static double in[MAX_RANKS][COUNT], out[MAX_RANKS][COUNT];
  double scale_now = 2.0, scale_later[MAX_RANKS];
  ncclRedOp_t now[MAX_RANKS], later[MAX_RANKS];
  const int n = nranks;
  for (int l = 0; l < local_ranks; ++l) {
    for (int i = 0; i < COUNT; ++i) in[l][i] = rank_of[l] + 1;
    scale_later[l] = 1.0;
    EXPECT_OK(ncclRedOpCreatePreMulSum(&now[l], &scale_now, ncclDouble, ncclScalarHostImmediate,
                                       comms[l]));
    EXPECT_OK(ncclRedOpCreatePreMulSum(&later[l], &scale_later[l], ncclDouble, ncclScalarDevice,
                                       comms[l]));
  }
  scale_now = 100.0; /* read at creation: this changes nothing */
  for (int l = 0; l < local_ranks; ++l) scale_later[l] = 3.0; /* read at each operation */
  const double rank_sum = n * (n + 1) / 2.0;
  ncclRedOp_t* ops[2] = {now, later};
  const double factors[2] = {2.0, 3.0};
  for (int k = 0; k < 2; ++k) {
    EXPECT_OK(ncclGroupStart());
    for (int l = 0; l < local_ranks; ++l) {
      EXPECT_OK(ncclAllReduce(in[l], out[l], COUNT, ncclDouble, ops[k][l], comms[l], NULL));
    }
    EXPECT_OK(ncclGroupEnd());
    for (int l = 0; l < local_ranks; ++l) {
      if (out[l][0] != factors[k] * rank_sum)
        failf("premulsum %d: got %g, not %g", k, out[l][0], factors[k] * rank_sum);
    }
  }
  EXPECT_OK(ncclGroupStart());
  for (int l = 0; l < local_ranks; ++l) {
    EXPECT_OK(ncclAllReduce(in[l], out[l], COUNT, ncclDouble, ncclAvg, comms[l], NULL));
  }
  EXPECT_OK(ncclGroupEnd());
  for (int l = 0; l < local_ranks; ++l) {
    if (out[l][1] != rank_sum / n) failf("avg: got %g, not %g", out[l][1], rank_sum / n);
    EXPECT_OK(ncclRedOpDestroy(now[l], comms[l]));
    EXPECT_OK(ncclRedOpDestroy(later[l], comms[l]));
  }
  /* ncclMemAlloc: host memory here (no CUDA context), usable as any buffer */
  int64_t* shared[MAX_RANKS];
  for (int l = 0; l < local_ranks; ++l) {
    EXPECT_OK(ncclMemAlloc((void**)&shared[l], sizeof(int64_t) * COUNT));
    for (int i = 0; i < COUNT; ++i) shared[l][i] = rank_of[l] == 0 ? 42 + i : -1;
  }
  EXPECT_OK(ncclGroupStart());
  for (int l = 0; l < local_ranks; ++l) {
    EXPECT_OK(ncclBroadcast(shared[l], shared[l], COUNT, ncclInt64, 0, comms[l], NULL));
  }
  EXPECT_OK(ncclGroupEnd());
  for (int l = 0; l < local_ranks; ++l) {
    if (shared[l][COUNT - 1] != 42 + COUNT - 1) failf("broadcast in ncclMemAlloc memory");
    EXPECT_OK(ncclMemFree(shared[l]));
  }
}

/* What ccl refuses, and bad arguments: an error code and a message, never a crash. */
static void check_refusals(void) {
  ncclComm_t c = comms[0], none = NULL;
  float x = 0;
  EXPECT_RESULT(ncclInvalidArgument,
                ncclAllReduce(&x, &x, 1, (ncclDataType_t)99, ncclSum, c, NULL));
  if (strlen(ncclGetLastError(c)) == 0) failf("no message for a bad datatype");
  EXPECT_RESULT(ncclInvalidArgument, ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, NULL, NULL));
  EXPECT_RESULT(ncclInvalidArgument, ncclGather(&x, &x, 1, ncclFloat, nranks, c, NULL));
  /* Shrinking away this very rank, and revoke's reserved flags. */
  EXPECT_RESULT(ncclInvalidArgument,
                ncclCommShrink(c, &rank_of[0], 1, &none, NULL, NCCL_SHRINK_DEFAULT));
  if (strstr(ncclGetLastError(c), "excludeRanksList") == NULL)
    failf("shrink: %s", ncclGetLastError(c));
  if (none != NULL) failf("shrink left a communicator");
  EXPECT_RESULT(ncclInvalidArgument, ncclCommShrink(c, NULL, 0, &none, NULL, 7));
  EXPECT_RESULT(ncclInvalidArgument, ncclCommRevoke(c, 1));
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  EXPECT_RESULT(ncclInvalidUsage, ncclGroupSimulateEnd(&sim));
  ncclWindow_t win;
  EXPECT_RESULT(ncclInvalidUsage, ncclCommWindowRegister(c, &x, sizeof(x), &win, NCCL_WIN_DEFAULT));
  ncclConfig_t garbage;
  memset(&garbage, 0, sizeof(garbage));
  ncclComm_t never = NULL;
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  EXPECT_RESULT(ncclInvalidArgument, ncclCommInitRankConfig(&never, 2, id, 0, &garbage));
  if (strstr(ncclGetLastError(NULL), "NCCL_CONFIG_INITIALIZER") == NULL) {
    failf("bad config: %s", ncclGetLastError(NULL));
  }
  for (int r = 0; r < ncclNumResults; ++r) {
    if (ncclGetErrorString((ncclResult_t)r) == NULL) failf("no string for %d", r);
  }
  if (ncclGetErrorString((ncclResult_t)1234) == NULL) failf("no string for 1234");
}

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 30, 0)
/* nccl_program_device.cc: the device API's host calls (nccl_device/core.h is for C++). */
int check_device_api(ncclComm_t comm, int rank, int nranks, char* why, size_t size);

/* NCCL 2.30's calls, which torch's CUDA wheels link: suspend and resume (ccl releases nothing, and
 * refuses operations while suspended), the memory statistics ccl can answer, the properties that
 * say ccl has no device API, and the refusals (windows, one-sided RMA, parameters, device API). */
static void check_nccl_2_30(void) {
  ncclComm_t c = comms[0];
  float x = 1;
  uint64_t stat = 99;
  EXPECT_OK(ncclCommMemStats(c, ncclStatGpuMemSuspended, &stat));
  if (stat != 0) failf("ncclStatGpuMemSuspended before a suspend: %llu", (unsigned long long)stat);
  EXPECT_RESULT(ncclInvalidArgument, ncclCommSuspend(c, 0x10));
  EXPECT_OK(ncclCommSuspend(c, NCCL_SUSPEND_MEM));
  EXPECT_RESULT(ncclInvalidUsage, ncclCommSuspend(c, NCCL_SUSPEND_MEM));
  EXPECT_OK(ncclCommMemStats(c, ncclStatGpuMemSuspended, &stat));
  if (stat != 1) failf("ncclStatGpuMemSuspended while suspended: %llu", (unsigned long long)stat);
  EXPECT_OK(ncclCommMemStats(c, ncclStatGpuMemSuspend, &stat));
  if (stat != 0)
    failf("ncclStatGpuMemSuspend: %llu, ccl releases nothing", (unsigned long long)stat);
  EXPECT_RESULT(ncclInvalidUsage, ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, c, NULL));
  if (strstr(ncclGetLastError(c), "suspended") == NULL) failf("suspended: %s", ncclGetLastError(c));
  void* handle = NULL;
  EXPECT_RESULT(ncclInvalidUsage, ncclCommRegister(c, &x, sizeof(x), &handle));
  EXPECT_OK(ncclCommResume(c));
  EXPECT_RESULT(ncclInvalidUsage, ncclCommResume(c));
  EXPECT_OK(ncclCommMemStats(c, ncclStatGpuMemSuspended, &stat));
  if (stat != 0) failf("ncclStatGpuMemSuspended after resume: %llu", (unsigned long long)stat);
  EXPECT_OK(ncclCommRegister(c, &x, sizeof(x), &handle)); /* usable again */
  EXPECT_OK(ncclCommDeregister(c, handle));
  EXPECT_RESULT(ncclInvalidUsage, ncclCommMemStats(c, ncclStatGpuMemTotal, &stat));
  EXPECT_RESULT(ncclInvalidArgument, ncclCommMemStats(c, (ncclCommMemStat_t)42, &stat));
  EXPECT_RESULT(ncclInvalidArgument, ncclCommMemStats(c, ncclStatGpuMemSuspend, NULL));

  char why[256];
  if (!check_device_api(c, rank_of[0], nranks, why, sizeof(why))) failf("%s", why);
  void* ptr = &x;
  EXPECT_RESULT(ncclInvalidUsage, ncclWinGetUserPtr(c, NULL, &ptr));
  if (ptr != NULL) failf("ncclWinGetUserPtr left a pointer");
  EXPECT_RESULT(ncclInvalidUsage, ncclSignal(0, 0, 0, 0, c, NULL));
  ncclWaitSignalDesc_t desc = {1, 0, 0, 0};
  EXPECT_RESULT(ncclInvalidUsage, ncclWaitSignal(1, &desc, c, NULL));
  EXPECT_RESULT(ncclInvalidUsage, ncclPutSignal(&x, 1, ncclFloat, 0, NULL, 0, 0, 0, 0, c, NULL));
  ncclParamHandle_t param = NULL;
  EXPECT_RESULT(ncclInvalidUsage, ncclParamBind(&param, "NCCL_DEBUG"));
  if (strstr(ncclGetLastError(NULL), "CCL_") == NULL) failf("params: %s", ncclGetLastError(NULL));
}
#endif

/* A split (color rank % 2, key -rank) whose child is non-blocking: polled until ready, then
 * used. Ranks mode: each process makes its own call. */
static void check_split(void) {
  const int r = rank_of[0];
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t child = NULL;
  ncclResult_t result = ncclCommSplit(comms[0], r % 2, -r, &child, &config);
  if (result != ncclSuccess && result != ncclInProgress) {
    failf("split: %s (%s)", ncclGetErrorString(result), ncclGetLastError(NULL));
    return;
  }
  ncclResult_t state = ncclInProgress;
  for (int i = 0; i < 3000 && state == ncclInProgress; ++i) {
    EXPECT_OK(ncclCommGetAsyncError(child, &state));
    if (state == ncclInProgress) usleep(10000);
  }
  if (state != ncclSuccess) {
    failf("split: the child's init ended with %d", (int)state);
    return;
  }
  int size = 0, rank = -1;
  EXPECT_OK(ncclCommCount(child, &size));
  EXPECT_OK(ncclCommUserRank(child, &rank));
  int want_size = 0, want_rank = 0;
  for (int q = 0; q < nranks; ++q) {
    if (q % 2 == r % 2) {
      ++want_size;
      if (q > r) ++want_rank; /* key -rank: the highest parent rank is rank 0 */
    }
  }
  if (size != want_size || rank != want_rank) failf("split: rank %d of %d", rank, size);
  int64_t mine = r, sum = 0, want = 0;
  for (int q = r % 2; q < nranks; q += 2) want += q;
  /* On a non-blocking communicator a call may return ncclInProgress: done once the
   * communicator's async error is ncclSuccess again. */
  result = ncclAllReduce(&mine, &sum, 1, ncclInt64, ncclSum, child, NULL);
  if (result != ncclSuccess && result != ncclInProgress)
    failf("split: allreduce gave %d", (int)result);
  state = result;
  for (int i = 0; i < 3000 && state == ncclInProgress; ++i) {
    EXPECT_OK(ncclCommGetAsyncError(child, &state));
    if (state == ncclInProgress) usleep(1000);
  }
  if (state != ncclSuccess) failf("split: the child's allreduce ended with %d", (int)state);
  if (sum != want) failf("split: sum %lld, not %lld", (long long)sum, (long long)want);
  EXPECT_OK(ncclCommFinalize(child));
  EXPECT_OK(ncclCommDestroy(child));
}

static int env_int(const char* name) {
  const char* v = getenv(name);
  return v != NULL ? atoi(v) : -1;
}

/* Rank 0 writes the id to path (through a file renamed into place); the others wait for it,
 * at most 60 s. The path ends with cclrun's CCL_COMM_ID (one per launch), so that a file of an
 * earlier launch is never read; rank 0 removes it once every rank has joined. */
static char id_path[PATH_MAX];

static int share_id(int rank, const char* prefix, ncclUniqueId* id) {
  const char* launch = getenv("CCL_COMM_ID");
  snprintf(id_path, sizeof(id_path), "%s.%s", prefix, launch != NULL ? launch : "none");
  for (char* c = id_path + strlen(prefix); *c != 0; ++c) {
    if (*c == ':' || *c == '/') *c = '_';
  }
  const char* path = id_path;
  if (rank == 0) {
    char tmp[PATH_MAX + 8];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE* f = fopen(tmp, "wb");
    if (f == NULL || fwrite(id, sizeof(*id), 1, f) != 1 || fclose(f) != 0 ||
        rename(tmp, path) != 0) {
      failf("cannot write %s", path);
      return 0;
    }
    return 1;
  }
  for (int i = 0; i < 6000; ++i) {
    FILE* f = fopen(path, "rb");
    if (f != NULL) {
      const size_t got = fread(id, sizeof(*id), 1, f);
      fclose(f);
      if (got == 1) return 1;
    }
    usleep(10000);
  }
  failf("no id in %s after 60 s", path);
  return 0;
}

/* Ranks mode: the last rank is left out of a shrink (it stays alive and does not call it), the
 * others check the shrunk communicator, then it rejoins through ncclCommGrow (NCCL 2.29: an id
 * from ncclCommGetUniqueId, members pass rank -1); then rank 0 revokes the shrunk communicator
 * and the other members' next call on it fails with ncclRemoteError. */
typedef ncclResult_t (*get_unique_id_fn)(ncclComm_t, ncclUniqueId*);
typedef ncclResult_t (*grow_fn)(ncclComm_t, int, const ncclUniqueId*, int, ncclComm_t*,
                                ncclConfig_t*);
static void check_recovery(const char* prefix) {
  const int r = rank_of[0], last = nranks - 1;
  /* Looked up at run time: the program links against the 2.28 library, which has no grow. */
  get_unique_id_fn ncclCommGetUniqueId =
      (get_unique_id_fn)dlsym(RTLD_DEFAULT, "ncclCommGetUniqueId");
  grow_fn ncclCommGrow = (grow_fn)dlsym(RTLD_DEFAULT, "ncclCommGrow");
  if (ncclCommGetUniqueId == NULL || ncclCommGrow == NULL) {
    failf("the library has no ncclCommGetUniqueId/ncclCommGrow");
    return;
  }
  ncclComm_t shrunk = NULL, grown = NULL;
  if (r != last) {
    int excluded = last;
    EXPECT_OK(ncclCommShrink(comms[0], &excluded, 1, &shrunk, NULL, NCCL_SHRINK_DEFAULT));
    if (shrunk == NULL) return;
    int size = 0, rank = -1;
    EXPECT_OK(ncclCommCount(shrunk, &size));
    EXPECT_OK(ncclCommUserRank(shrunk, &rank));
    if (size != nranks - 1 || rank != r) failf("shrink: rank %d of %d", rank, size);
    int64_t mine = r + 1, sum = 0;
    EXPECT_OK(ncclAllReduce(&mine, &sum, 1, ncclInt64, ncclSum, shrunk, NULL));
    if (sum != (int64_t)(nranks - 1) * nranks / 2) failf("shrink: sum %lld", (long long)sum);
  }
  char grow_prefix[PATH_MAX];
  snprintf(grow_prefix, sizeof(grow_prefix), "%s.grow", prefix);
  ncclUniqueId id;
  if (r == 0) EXPECT_OK(ncclCommGetUniqueId(shrunk, &id));
  if (!share_id(r, grow_prefix, &id)) return;
  EXPECT_OK(ncclCommGrow(shrunk, nranks, &id, r == last ? last : -1, &grown, NULL));
  if (grown == NULL) return;
  int64_t mine = r + 1, sum = 0;
  EXPECT_OK(ncclAllReduce(&mine, &sum, 1, ncclInt64, ncclSum, grown, NULL));
  if (sum != (int64_t)nranks * (nranks + 1) / 2) failf("grow: sum %lld", (long long)sum);
  if (r == 0) unlink(id_path); /* every rank has joined */
  EXPECT_OK(ncclCommDestroy(grown));
  if (shrunk == NULL) return;
  if (r == 0) EXPECT_OK(ncclCommRevoke(shrunk, NCCL_REVOKE_DEFAULT));
  float x = 1;
  EXPECT_RESULT(ncclRemoteError, ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, shrunk, NULL));
  EXPECT_OK(ncclCommDestroy(shrunk));
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: nccl_program threads N | ranks IDFILE\n");
    return 2;
  }
  check_library();
  const int threads = strcmp(argv[1], "threads") == 0;
  if (threads) {
    nranks = atoi(argv[2]);
    if (nranks < 1 || nranks > MAX_RANKS) {
      fprintf(stderr, "nccl_program: N must be 1..%d\n", MAX_RANKS);
      return 2;
    }
    local_ranks = nranks;
    EXPECT_OK(ncclCommInitAll(comms, nranks, NULL));
    for (int l = 0; l < nranks; ++l) rank_of[l] = l;
  } else {
    const int rank = env_int("CCL_RANK");
    nranks = env_int("CCL_WORLD_SIZE");
    if (rank < 0 || nranks < 1 || nranks > MAX_RANKS) {
      fprintf(stderr, "nccl_program: ranks mode runs under cclrun (CCL_RANK, CCL_WORLD_SIZE)\n");
      return 2;
    }
    ncclUniqueId id;
    if (rank == 0) EXPECT_OK(ncclGetUniqueId(&id));
    if (!share_id(rank, argv[2], &id)) return 1;
    local_ranks = 1;
    rank_of[0] = rank;
    EXPECT_OK(ncclCommInitRank(&comms[0], nranks, id, rank));
    if (rank == 0) unlink(id_path); /* every rank has joined: read it */
  }
  if (failures != 0) return 1; /* no communicator to go on with */
  check_queries();
  check_collectives();
  check_rooted_and_p2p();
  check_ops_and_memory();
  check_refusals();
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 30, 0)
  check_nccl_2_30();
#endif
  if (!threads) check_split();
  if (!threads && nranks >= 2) check_recovery(argv[2]);
  for (int l = 0; l < local_ranks; ++l) {
    EXPECT_OK(ncclCommFinalize(comms[l]));
    EXPECT_OK(ncclCommDestroy(comms[l]));
    printf("nccl_program: rank %d of %d: %s\n", rank_of[l], nranks,
           failures == 0 ? "ok" : "FAILED");
  }
  return failures == 0 ? 0 : 1;
}
