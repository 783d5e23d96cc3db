// A one-rank stand-in for libccl, so that the harness (harness.cc) is tested end to end without
// the library: every collective copies its input (which is the right answer for one rank and
// every op, avg included), and a recv copies what the last send to self posted. FAKE_CCL_CORRUPT=1
// flips a bit in the result of float collectives, to check that the harness sees it. Test-only:
// not a ccl setting.
#include <cstdlib>
#include <cstring>

#include "ccl/ccl.h"

namespace {

struct cclCommFake {
  int dummy;
};
cclCommFake the_comm;
int the_stream;
// The send a recv matches: with one rank every send goes to self, and the harness posts the
// send before the recv inside one group.
const void* posted_send = nullptr;
size_t posted_count = 0;

size_t elt(cclDataType_t t) {
  switch (t) {
    case cclInt8:
    case cclUint8:
    case cclFloat8e4m3:
    case cclFloat8e5m2:
      return 1;
    case cclFloat16:
    case cclBfloat16:
      return 2;
    case cclInt32:
    case cclUint32:
    case cclFloat32:
      return 4;
    default:
      return 8;
  }
}

cclResult_t copy(const void* send, void* recv, size_t count, cclDataType_t type) {
  if (count && send != recv) std::memmove(recv, send, count * elt(type));
  const char* corrupt = std::getenv("FAKE_CCL_CORRUPT");
  if (count && type == cclFloat32 && corrupt && corrupt[0] == '1') {
    static_cast<unsigned char*>(recv)[0] ^= 0x40;
  }
  return cclSuccess;
}

}  // namespace

extern "C" {

cclResult_t cclGetVersion(int* v) {
  *v = CCL_VERSION_CODE;
  return cclSuccess;
}
const char* cclGetErrorString(cclResult_t) { return "fake error"; }
const char* cclGetLastError(cclComm_t) { return ""; }
cclResult_t cclCommInitFromEnv(cclComm_t* comm) {
  *comm = reinterpret_cast<cclComm_t>(&the_comm);
  return cclSuccess;
}
cclResult_t cclCommDestroy(cclComm_t) { return cclSuccess; }
cclResult_t cclCommAbort(cclComm_t) { return cclSuccess; }
cclResult_t cclCommGetAsyncError(cclComm_t, cclResult_t* e) {
  *e = cclSuccess;
  return cclSuccess;
}
cclResult_t cclCommCount(const cclComm_t, int* n) {
  *n = 1;
  return cclSuccess;
}
cclResult_t cclCommUserRank(const cclComm_t, int* r) {
  *r = 0;
  return cclSuccess;
}
cclResult_t cclAllReduce(const void* s, void* r, size_t n, cclDataType_t t, cclRedOp_t, cclComm_t,
                         cclStream_t) {
  return copy(s, r, n, t);
}
cclResult_t cclBroadcast(const void* s, void* r, size_t n, cclDataType_t t, int, cclComm_t,
                         cclStream_t) {
  return copy(s, r, n, t);
}
cclResult_t cclReduce(const void* s, void* r, size_t n, cclDataType_t t, cclRedOp_t, int, cclComm_t,
                      cclStream_t) {
  return copy(s, r, n, t);
}
cclResult_t cclAllGather(const void* s, void* r, size_t n, cclDataType_t t, cclComm_t,
                         cclStream_t) {
  return copy(s, r, n, t);
}
cclResult_t cclReduceScatter(const void* s, void* r, size_t n, cclDataType_t t, cclRedOp_t,
                             cclComm_t, cclStream_t) {
  return copy(s, r, n, t);
}
cclResult_t cclAlltoAll(const void* s, void* r, size_t n, cclDataType_t t, cclComm_t, cclStream_t) {
  return copy(s, r, n, t);
}
cclResult_t cclSend(const void* s, size_t n, cclDataType_t, int peer, cclComm_t, cclStream_t) {
  if (peer != 0 || posted_send) return cclInvalidUsage;
  posted_send = s;
  posted_count = n;
  return cclSuccess;
}
cclResult_t cclRecv(void* r, size_t n, cclDataType_t t, int peer, cclComm_t, cclStream_t) {
  if (peer != 0 || !posted_send || posted_count != n) return cclInvalidUsage;
  const void* s = posted_send;
  posted_send = nullptr;
  return copy(s, r, n, t);
}
cclResult_t cclGroupStart(void) { return cclSuccess; }
cclResult_t cclGroupEnd(void) { return cclSuccess; }
// No CUDA in the fake: --memory device fails before it would get here.
cclResult_t cclStreamFromCuda(struct CUstream_st*, cclStream_t*) { return cclInvalidUsage; }
cclResult_t cclStreamCreate(cclStream_t* s) {
  *s = reinterpret_cast<cclStream_t>(&the_stream);
  return cclSuccess;
}
cclResult_t cclStreamSynchronize(cclStream_t) { return cclSuccess; }
cclResult_t cclStreamQuery(cclStream_t) { return cclSuccess; }
cclResult_t cclStreamDestroy(cclStream_t) { return cclSuccess; }

// Registered memory (-R): plain memory here, the fake has no peers to share it with.
cclResult_t cclMemAlloc(void** ptr, size_t size) {
  *ptr = std::aligned_alloc(4096, (size + 4095) / 4096 * 4096);
  return *ptr ? cclSuccess : cclSystemError;
}
cclResult_t cclMemFree(void* ptr) {
  std::free(ptr);
  return cclSuccess;
}

}  // extern "C"
