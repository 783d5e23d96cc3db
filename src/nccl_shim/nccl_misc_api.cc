// NCCL's version, unique id, error strings, memory allocation and PreMulSum ops on ccl's.
#include <nccl.h>

#include <cstring>

#include "nccl_shim/cuda_probe.h"
#include "nccl_shim/shim.h"

using namespace ccl_nccl;

// The ABI this library implements: the nccl.h it was built against (2.30.7: 23007), so that a
// program checking the version it was built for finds it.
ncclResult_t ncclGetVersion(int* version) {
  begin_call();
  if (version == nullptr) return fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

// ccl's id is NCCL's size (128 bytes) and is handed out the same way (the program sends it to
// every rank); the calling process serves the rendezvous, as cclGetUniqueId says.
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  begin_call();
  if (uniqueId == nullptr) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  cclUniqueId id;
  const cclResult_t result = cclGetUniqueId(&id);
  if (result == cclSuccess) std::memcpy(uniqueId, &id, sizeof(id));
  return from_ccl(result);
}

// ccl's strings for NCCL's codes (the same codes); NULL never.
const char* ncclGetErrorString(ncclResult_t result) {
  if (static_cast<int>(result) < 0 || static_cast<int>(result) >= ncclNumResults) {
    return "unknown result code";
  }
  return cclGetErrorString(static_cast<cclResult_t>(result));
}

const char* ncclGetLastError(ncclComm_t comm) { return last_error(comm); }

// NCCL allocates device memory on the current device. With a CUDA context current, so does this
// (cuMemAlloc); without one, a host-only program gets ccl's host memory that the ranks of the
// host can map (cclMemAlloc), which ccl's broadcast moves once per byte.
ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  begin_call();
  if (ptr == nullptr) return fail(ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
  *ptr = nullptr;
  if (size == 0) return fail(ncclInvalidArgument, "ncclMemAlloc: size is 0");
  int device = 0;
  if (cuda_probe::current_device(&device)) {
    const char* error = "";
    *ptr = cuda_probe::device_alloc(size, &error);
    if (*ptr == nullptr) {
      return fail(ncclUnhandledCudaError, "ncclMemAlloc: %zu bytes on device %d: %s", size, device,
                  error);
    }
    return ncclSuccess;
  }
  return from_ccl(cclMemAlloc(ptr, size));
}

ncclResult_t ncclMemFree(void* ptr) {
  begin_call();
  if (ptr == nullptr) return ncclSuccess;
  if (cuda_probe::device_free(ptr)) return ncclSuccess;
  return from_ccl(cclMemFree(ptr));
}

// NCCL's residences are ccl's the other way round: ncclScalarDevice (0, read while the operation
// runs) is ccl's 1 (read at each operation), ncclScalarHostImmediate (1, read now) ccl's 0. ccl
// reads the scalar on the host, so a device-memory scalar is refused (by ccl, with the reason).
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  const char* function = "ncclRedOpCreatePreMulSum";
  begin_call();
  cclComm_t c = checked(comm, function);
  if (c == nullptr) return ncclInvalidArgument;
  if (op == nullptr) return fail(ncclInvalidArgument, "%s: op is NULL", function);
  int ccl_residence = 0;
  switch (residence) {
    case ncclScalarDevice:
      ccl_residence = 1;
      break;
    case ncclScalarHostImmediate:
      ccl_residence = 0;
      break;
    default:
      return fail(ncclInvalidArgument, "%s: residence %d is not an ncclScalarResidence_t", function,
                  static_cast<int>(residence));
  }
  cclRedOp_t made = cclSum;
  const cclResult_t result = cclRedOpCreatePreMulSum(
      &made, scalar, static_cast<cclDataType_t>(datatype), ccl_residence, c);
  if (result == cclSuccess) *op = static_cast<ncclRedOp_t>(made);
  return from_ccl(result);
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  begin_call();
  cclComm_t c = checked(comm, "ncclRedOpDestroy");
  return c != nullptr ? from_ccl(cclRedOpDestroy(static_cast<cclRedOp_t>(op), c))
                      : ncclInvalidArgument;
}

CCL_NCCL_PROFILING_ALIAS(ncclGetVersion)
CCL_NCCL_PROFILING_ALIAS(ncclGetUniqueId)
CCL_NCCL_PROFILING_ALIAS(ncclGetErrorString)
CCL_NCCL_PROFILING_ALIAS(ncclGetLastError)
CCL_NCCL_PROFILING_ALIAS(ncclMemAlloc)
CCL_NCCL_PROFILING_ALIAS(ncclMemFree)
CCL_NCCL_PROFILING_ALIAS(ncclRedOpCreatePreMulSum)
CCL_NCCL_PROFILING_ALIAS(ncclRedOpDestroy)
