// What NCCL has and ccl does not, refused with ncclInvalidUsage and a message that says what to
// use instead: symmetric memory windows and NCCL 2.30's one-sided RMA on them (put with signal,
// signal, wait), NCCL's parameter API, and the host side of NCCL's device API (nccl_device.h),
// whose kernels run inside the caller's own CUDA kernels. torch's CUDA wheels link some of these
// (libtorch_cuda.so imports ncclCommWindowRegister, ncclWinGetUserPtr, ncclPutSignal, ncclSignal,
// ncclWaitSignal, ncclDevCommCreate/Destroy, ncclGetLsaMultimemDevicePointer and
// ncclGetPeerDevicePointer), so they are exported for the library to load; torch calls them only
// for its symmetric-memory features. ncclCommQueryProperties answers truly: no device API, no
// multimem, no GPU-initiated networking.
#include <nccl.h>

#include "nccl_shim/shim.h"

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 30, 0)
#include <nccl_device/core.h>
#endif

using namespace ccl_nccl;

namespace {
constexpr const char* kNoWindows = "ncclCommRegister registers a buffer for every collective";
constexpr const char* kNoRma = "ncclSend and ncclRecv move data between two ranks";
}  // namespace

ncclResult_t ncclCommWindowRegister(ncclComm_t, void*, size_t, ncclWindow_t* win, int) {
  begin_call();
  if (win != nullptr) *win = nullptr;
  return unsupported("ncclCommWindowRegister (symmetric memory windows)", kNoWindows);
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t, ncclWindow_t) {
  begin_call();
  return unsupported("ncclCommWindowDeregister (symmetric memory windows)", "");
}

CCL_NCCL_PROFILING_ALIAS(ncclCommWindowRegister)
CCL_NCCL_PROFILING_ALIAS(ncclCommWindowDeregister)

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 30, 0)

ncclResult_t ncclWinGetUserPtr(ncclComm_t, ncclWindow_t, void** outUserPtr) {
  begin_call();
  if (outUserPtr != nullptr) *outUserPtr = nullptr;
  return unsupported("ncclWinGetUserPtr (symmetric memory windows)", kNoWindows);
}

ncclResult_t ncclPutSignal(const void*, size_t, ncclDataType_t, int, ncclWindow_t, size_t, int, int,
                           unsigned int, ncclComm_t, cudaStream_t) {
  begin_call();
  return unsupported("ncclPutSignal (one-sided RMA)", kNoRma);
}

ncclResult_t ncclSignal(int, int, int, unsigned int, ncclComm_t, cudaStream_t) {
  begin_call();
  return unsupported("ncclSignal (one-sided RMA)", kNoRma);
}

ncclResult_t ncclWaitSignal(int, ncclWaitSignalDesc_t*, ncclComm_t, cudaStream_t) {
  begin_call();
  return unsupported("ncclWaitSignal (one-sided RMA)", kNoRma);
}

CCL_NCCL_PROFILING_ALIAS(ncclWinGetUserPtr)
CCL_NCCL_PROFILING_ALIAS(ncclPutSignal)
CCL_NCCL_PROFILING_ALIAS(ncclSignal)
CCL_NCCL_PROFILING_ALIAS(ncclWaitSignal)

// NCCL's parameters are its NCCL_* settings; ccl's are the CCL_* environment variables of one
// table (docs/environment.md), which NCCL's keys do not name.
namespace {
constexpr const char* kParams =
    "ccl's settings are CCL_* environment variables (docs/environment.md)";
ncclResult_t no_params(const char* function) {
  begin_call();
  return unsupported(function, kParams);
}
}  // namespace

ncclResult_t ncclParamBind(ncclParamHandle_t* out, const char*) {
  if (out != nullptr) *out = nullptr;
  return no_params("ncclParamBind");
}
ncclResult_t ncclParamGetI8(ncclParamHandle_t, int8_t*) { return no_params("ncclParamGetI8"); }
ncclResult_t ncclParamGetI16(ncclParamHandle_t, int16_t*) { return no_params("ncclParamGetI16"); }
ncclResult_t ncclParamGetI32(ncclParamHandle_t, int32_t*) { return no_params("ncclParamGetI32"); }
ncclResult_t ncclParamGetI64(ncclParamHandle_t, int64_t*) { return no_params("ncclParamGetI64"); }
ncclResult_t ncclParamGetU8(ncclParamHandle_t, uint8_t*) { return no_params("ncclParamGetU8"); }
ncclResult_t ncclParamGetU16(ncclParamHandle_t, uint16_t*) { return no_params("ncclParamGetU16"); }
ncclResult_t ncclParamGetU32(ncclParamHandle_t, uint32_t*) { return no_params("ncclParamGetU32"); }
ncclResult_t ncclParamGetU64(ncclParamHandle_t, uint64_t*) { return no_params("ncclParamGetU64"); }
ncclResult_t ncclParamGetStr(ncclParamHandle_t, const char**) {
  return no_params("ncclParamGetStr");
}
ncclResult_t ncclParamGet(ncclParamHandle_t, void*, int, int*) { return no_params("ncclParamGet"); }
ncclResult_t ncclParamGetParameter(const char*, const char**, int*) {
  return no_params("ncclParamGetParameter");
}
ncclResult_t ncclParamGetAllParameterKeys(const char***, int*) {
  return no_params("ncclParamGetAllParameterKeys");
}

CCL_NCCL_PROFILING_ALIAS(ncclParamBind)
CCL_NCCL_PROFILING_ALIAS(ncclParamGetI8)
CCL_NCCL_PROFILING_ALIAS(ncclParamGetI16)
CCL_NCCL_PROFILING_ALIAS(ncclParamGetI32)
CCL_NCCL_PROFILING_ALIAS(ncclParamGetI64)
CCL_NCCL_PROFILING_ALIAS(ncclParamGetU8)
CCL_NCCL_PROFILING_ALIAS(ncclParamGetU16)
CCL_NCCL_PROFILING_ALIAS(ncclParamGetU32)
CCL_NCCL_PROFILING_ALIAS(ncclParamGetU64)
CCL_NCCL_PROFILING_ALIAS(ncclParamGetStr)
CCL_NCCL_PROFILING_ALIAS(ncclParamGet)
CCL_NCCL_PROFILING_ALIAS(ncclParamGetParameter)
CCL_NCCL_PROFILING_ALIAS(ncclParamGetAllParameterKeys)

// The device API's host calls. A program that asks first (ncclCommQueryProperties) learns that
// ccl has no device API; the calls that would make its objects are refused.
namespace {
constexpr const char* kNoDeviceApi =
    "ccl's collectives are host calls on a stream (ncclAllReduce, ...); ncclCommQueryProperties "
    "says deviceApiSupport 0";
}  // namespace

ncclResult_t ncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t* props) {
  const char* function = "ncclCommQueryProperties";
  begin_call();
  cclComm_t c = checked(comm, function);
  if (c == nullptr) return ncclInvalidArgument;
  if (props == nullptr) return fail(ncclInvalidArgument, "%s: props is NULL", function);
  if (props->magic != NCCL_API_MAGIC || props->size < sizeof(ncclCommProperties_t)) {
    return fail(ncclInvalidArgument,
                "%s: props (size %zu, magic 0x%x) was not set up with "
                "NCCL_COMM_PROPERTIES_INITIALIZER of NCCL %d or later",
                function, props->size, props->magic, NCCL_VERSION_CODE);
  }
  int rank = 0;
  int nranks = 0;
  if (cclCommUserRank(c, &rank) != cclSuccess || cclCommCount(c, &nranks) != cclSuccess) {
    return fail(ncclInvalidUsage, "%s: %s", function, cclGetLastError(c));
  }
  props->rank = rank;
  props->nRanks = nranks;
  props->cudaDev = comm->cuda_device;
  props->nvmlDev = -1;  // ccl does not ask NVML
  props->deviceApiSupport = false;
  props->multimemSupport = false;
  props->ginType = NCCL_GIN_TYPE_NONE;
  props->nLsaTeams = 0;
  props->hostRmaSupport = false;
  props->railedGinType = NCCL_GIN_TYPE_NONE;
  return ncclSuccess;
}

ncclResult_t ncclDevCommCreate(ncclComm_t, ncclDevCommRequirements_t const*, ncclDevComm_t*) {
  begin_call();
  return unsupported("ncclDevCommCreate (NCCL's device API)", kNoDeviceApi);
}

ncclResult_t ncclDevCommDestroy(ncclComm_t, ncclDevComm_t const*) {
  begin_call();
  return unsupported("ncclDevCommDestroy (NCCL's device API)", kNoDeviceApi);
}

ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t, size_t, void** outPtr) {
  begin_call();
  if (outPtr != nullptr) *outPtr = nullptr;
  return unsupported("ncclGetLsaMultimemDevicePointer (NCCL's device API)", kNoWindows);
}

ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t, size_t, int, void** outPtr) {
  begin_call();
  if (outPtr != nullptr) *outPtr = nullptr;
  return unsupported("ncclGetPeerDevicePointer (NCCL's device API)", kNoWindows);
}

#endif
