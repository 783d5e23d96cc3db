// Run under cclrun at any rank count: every datatype and op of allreduce, broadcast from every
// root, in-place and out-of-place, misaligned buffers, host streams, barrier, and argument errors.
// Exits 0 when every check passed on this rank.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "check_harness.h"

using namespace ccl::set_check;
using ccl::testing::reduce_values;

namespace {

void check_allreduce(cclComm_t comm, int nranks, cclDataType_t type, cclRedOp_t op, size_t count,
                     bool in_place, size_t misalign) {
  size_t bytes = count * datatype_size(type);
  Buffer send(bytes, misalign), recv(bytes, misalign), want(bytes, 0);
  for (size_t i = 0; i < count; ++i) {
    store_value(type, send.data, i, input_value(op, g_rank, i));
    store_expected(type, op, nranks, want.data, i);
  }
  uint8_t* out = in_place ? send.data : recv.data;
  EXPECT_RESULT(cclAllReduce(send.data, out, count, type, op, comm, nullptr), cclSuccess);
  char what[64];
  snprintf(what, sizeof(what), "allreduce %s %s", op_name(op),
           in_place ? "in-place" : "out-of-place");
  compare(what, type, out, want.data, count);
}

void check_broadcast(cclComm_t comm, cclDataType_t type, size_t count, int root, bool in_place) {
  size_t bytes = count * datatype_size(type);
  Buffer send(bytes, 0), recv(bytes, 3), want(bytes, 0);
  for (size_t i = 0; i < count; ++i) {
    store_value(type, want.data, i, static_cast<double>((i * 13 + root) % 7));
  }
  if (g_rank == root) memcpy(send.data, want.data, bytes);
  uint8_t* out = recv.data;
  if (in_place && g_rank == root) out = send.data;
  // Non-roots pass NULL as sendbuff: API.md allows it.
  const void* in = g_rank == root ? send.data : nullptr;
  EXPECT_RESULT(cclBroadcast(in, out, count, type, root, comm, nullptr), cclSuccess);
  compare(in_place ? "broadcast in-place" : "broadcast", type, out, want.data, count);
}

// Broadcast between buffers from cclMemAlloc (the single-copy path over shared memory), at
// sizes on both sides of where that path starts, with the data at odd offsets; `mixed`: every
// odd rank receives into ordinary memory, and the root's buffer is ordinary when root is odd
// (then every rank falls back to the ordinary path).
void check_registered_broadcast(cclComm_t comm, int root, size_t count, bool in_place, bool mixed) {
  const size_t bytes = count * sizeof(float);
  const bool registered = !mixed || g_rank % 2 == 0;
  void* mem = nullptr;
  std::vector<uint8_t> plain;
  uint8_t* base = nullptr;
  if (registered) {
    EXPECT_RESULT(cclMemAlloc(&mem, 2 * bytes + 64), cclSuccess);
    if (mem == nullptr) return;
    base = static_cast<uint8_t*>(mem);
  } else {
    plain.resize(2 * bytes + 64);
    base = plain.data();
  }
  uint8_t* send = base + 4;  // float-aligned, not cache-line aligned
  uint8_t* recv = base + bytes + 36;
  std::vector<uint8_t> want(bytes);
  for (size_t i = 0; i < count; ++i) {
    store_value(cclFloat32, want.data(), i, static_cast<double>((i * 11 + root) % 9));
  }
  if (g_rank == root) memcpy(send, want.data(), bytes);
  uint8_t* out = in_place && g_rank == root ? send : recv;
  EXPECT_RESULT(
      cclBroadcast(g_rank == root ? send : nullptr, out, count, cclFloat32, root, comm, nullptr),
      cclSuccess);
  char what[96];
  snprintf(what, sizeof(what), "registered broadcast%s%s", in_place ? " in-place" : "",
           mixed ? " mixed" : "");
  compare(what, cclFloat32, out, want.data(), count);
  if (mem != nullptr) EXPECT_RESULT(cclMemFree(mem), cclSuccess);
}

void check_memory_errors() {
  void* p = nullptr;
  int local = 0;
  EXPECT_RESULT(cclMemAlloc(nullptr, 64), cclInvalidArgument);
  EXPECT_RESULT(cclMemAlloc(&p, 0), cclInvalidArgument);
  EXPECT_RESULT(cclMemFree(nullptr), cclInvalidArgument);
  EXPECT_RESULT(cclMemFree(&local), cclInvalidArgument);
  EXPECT_RESULT(cclMemAlloc(&p, 100), cclSuccess);
  EXPECT_RESULT(cclMemFree(static_cast<char*>(p) + 8), cclInvalidArgument);
  EXPECT_RESULT(cclMemFree(p), cclSuccess);
  EXPECT_RESULT(cclMemFree(p), cclInvalidArgument);  // twice
}

void check_stream(cclComm_t comm, int nranks) {
  cclStream_t stream = nullptr;
  EXPECT_RESULT(cclStreamCreate(&stream), cclSuccess);
  const size_t count = 4099;
  std::vector<std::vector<float>> bufs(4, std::vector<float>(count));
  for (auto& b : bufs)
    for (size_t i = 0; i < count; ++i) b[i] = static_cast<float>(input_value(cclSum, g_rank, i));
  for (auto& b : bufs) {
    EXPECT_RESULT(cclAllReduce(b.data(), b.data(), count, cclFloat32, cclSum, comm, stream),
                  cclSuccess);
  }
  EXPECT_RESULT(cclBarrier(comm, stream), cclSuccess);
  EXPECT_RESULT(cclStreamSynchronize(stream), cclSuccess);
  EXPECT_RESULT(cclStreamQuery(stream), cclSuccess);
  for (auto& b : bufs) {
    std::vector<float> want(count);
    for (size_t i = 0; i < count; ++i)
      want[i] = static_cast<float>(reduce_values(cclSum, nranks, i));
    compare("stream allreduce", cclFloat32, reinterpret_cast<uint8_t*>(b.data()),
            reinterpret_cast<uint8_t*>(want.data()), count);
  }
  EXPECT_RESULT(cclStreamDestroy(stream), cclSuccess);
}

void check_argument_errors(cclComm_t comm, int nranks) {
  float x[4] = {1, 2, 3, 4};
  EXPECT_RESULT(cclAllReduce(x, x, 4, static_cast<cclDataType_t>(99), cclSum, comm, nullptr),
                cclInvalidArgument);
  if (strstr(cclGetLastError(comm), "datatype") == nullptr) {
    fprintf(stderr, "rank %d: last error does not name the datatype: %s\n", g_rank,
            cclGetLastError(comm));
    ++g_failures;
  }
  EXPECT_RESULT(cclAllReduce(x, x, 4, cclFloat32, static_cast<cclRedOp_t>(17), comm, nullptr),
                cclInvalidArgument);
  EXPECT_RESULT(cclAllReduce(nullptr, x, 4, cclFloat32, cclSum, comm, nullptr), cclInvalidArgument);
  EXPECT_RESULT(cclAllReduce(x, nullptr, 4, cclFloat32, cclSum, comm, nullptr), cclInvalidArgument);
  EXPECT_RESULT(cclAllReduce(x, x, 4, cclFloat32, cclSum, nullptr, nullptr), cclInvalidArgument);
  EXPECT_RESULT(cclBroadcast(x, x, 4, cclFloat32, nranks, comm, nullptr), cclInvalidArgument);
  EXPECT_RESULT(cclBroadcast(x, x, 4, cclFloat32, -1, comm, nullptr), cclInvalidArgument);
  EXPECT_RESULT(cclAllReduce(nullptr, nullptr, 0, cclFloat32, cclSum, comm, nullptr), cclSuccess);
  int n = 0, r = -1;
  EXPECT_RESULT(cclCommCount(comm, &n), cclSuccess);
  EXPECT_RESULT(cclCommUserRank(comm, &r), cclSuccess);
  if (n != nranks || r != g_rank) {
    fprintf(stderr, "rank %d: count/rank %d/%d\n", g_rank, n, r);
    ++g_failures;
  }
  cclResult_t async = cclInternalError;
  EXPECT_RESULT(cclCommGetAsyncError(comm, &async), cclSuccess);
  if (async != cclSuccess) ++g_failures;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
  int nranks = 0;
  cclComm_t comm = init_from_env(&nranks);
  if (comm == nullptr) return 2;

  check_argument_errors(comm, nranks);
  const std::vector<size_t> counts = {0, 1, 7, 1000, 65537};
  for (int t = 0; t < cclNumTypes; ++t) {
    auto type = static_cast<cclDataType_t>(t);
    for (int o = 0; o < cclNumOps; ++o) {
      for (size_t count : counts) {
        if (quick && count > 1000) continue;
        check_allreduce(comm, nranks, type, static_cast<cclRedOp_t>(o), count, false, t % 3);
        check_allreduce(comm, nranks, type, static_cast<cclRedOp_t>(o), count, true, 0);
      }
    }
  }
  // Large odd counts: a few representative types.
  if (!quick) {
    for (cclDataType_t type : {cclFloat32, cclBfloat16, cclInt8}) {
      check_allreduce(comm, nranks, type, cclSum, 1000003, false, 1);
      check_allreduce(comm, nranks, type, cclAvg, 1000003, true, 0);
    }
  }
  for (int root = 0; root < nranks; ++root) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{1000003}}) {
      if (quick && count > 1000) continue;
      check_broadcast(comm, cclFloat32, count, root, false);
      check_broadcast(comm, cclUint8, count, root, true);
    }
  }
  check_memory_errors();
  for (int root = 0; root < nranks; ++root) {
    for (size_t count : {size_t{1000}, size_t{65537}, size_t{300007}}) {
      if (quick && count > 65537) continue;
      for (bool in_place : {false, true}) {
        check_registered_broadcast(comm, root, count, in_place, false);
        check_registered_broadcast(comm, root, count, in_place, true);
      }
    }
  }
  check_stream(comm, nranks);
  EXPECT_RESULT(cclBarrier(comm, nullptr), cclSuccess);
  EXPECT_RESULT(cclCommDestroy(comm), cclSuccess);

  printf("rank %d: %d checks, %d failures\n", g_rank, g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}
