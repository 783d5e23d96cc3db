// The table of CUDA driver entry points ccl uses (cuda_driver.h loads it). Included only by the
// files that call the driver, and only in builds with the CUDA headers (CCL_HAVE_CUDA_H); the
// types and the signatures are cuda.h's own, so the table cannot drift from the real driver.
#pragma once

#include <cuda.h>

#include "base/error.h"

namespace ccl::cuda {

struct DriverApi {
  // What the entry's driver version says (cuDriverGetVersion), e.g. 13000.
  int driver_version = 0;
  // Whether cuStreamWaitValue32 works on this driver's devices (else a host function orders the
  // CUDA stream after a ccl operation: cuda_stream_order.cc).
  bool stream_wait_value = true;

  decltype(&::cuGetErrorString) get_error_string = nullptr;
  decltype(&::cuGetErrorName) get_error_name = nullptr;
  decltype(&::cuPointerGetAttribute) pointer_get_attribute = nullptr;
  decltype(&::cuCtxGetCurrent) ctx_get_current = nullptr;
  decltype(&::cuCtxSetCurrent) ctx_set_current = nullptr;
  decltype(&::cuCtxGetDevice) ctx_get_device = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) primary_ctx_retain = nullptr;
  decltype(&::cuDeviceGetAttribute) device_get_attribute = nullptr;
  // Which devices a process sees and whether one can read another's memory (cuda_ipc.h).
  decltype(&::cuDeviceGetCount) device_get_count = nullptr;
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDeviceGetUuid) device_get_uuid = nullptr;
  decltype(&::cuDeviceGetPCIBusId) device_get_pci_bus_id = nullptr;  // cuda_devices.h
  decltype(&::cuDeviceCanAccessPeer) device_can_access_peer = nullptr;
  decltype(&::cuStreamGetCtx) stream_get_ctx = nullptr;
  decltype(&::cuStreamCreate) stream_create = nullptr;
  decltype(&::cuStreamDestroy_v2) stream_destroy = nullptr;
  decltype(&::cuStreamSynchronize) stream_synchronize = nullptr;
  decltype(&::cuStreamWaitValue32_v2) stream_wait_value32 = nullptr;
  decltype(&::cuLaunchHostFunc) launch_host_func = nullptr;
  decltype(&::cuEventCreate) event_create = nullptr;
  decltype(&::cuEventDestroy_v2) event_destroy = nullptr;
  decltype(&::cuEventRecord) event_record = nullptr;
  decltype(&::cuEventQuery) event_query = nullptr;
  decltype(&::cuMemAlloc_v2) mem_alloc = nullptr;
  decltype(&::cuMemFree_v2) mem_free = nullptr;
  decltype(&::cuMemHostAlloc) mem_host_alloc = nullptr;
  decltype(&::cuMemFreeHost) mem_free_host = nullptr;
  decltype(&::cuMemHostGetDevicePointer_v2) mem_host_get_device_pointer = nullptr;
  decltype(&::cuMemcpyAsync) memcpy_async = nullptr;
  // The kernels (cuda_kernels.h) and CUDA IPC between the processes of a host (cuda_ipc.h).
  decltype(&::cuModuleLoadData) module_load_data = nullptr;
  decltype(&::cuModuleGetFunction) module_get_function = nullptr;
  decltype(&::cuLaunchKernel) launch_kernel = nullptr;
  decltype(&::cuMemGetAddressRange_v2) mem_get_address_range = nullptr;
  decltype(&::cuIpcGetMemHandle) ipc_get_mem_handle = nullptr;
  decltype(&::cuIpcOpenMemHandle_v2) ipc_open_mem_handle = nullptr;
  decltype(&::cuIpcCloseMemHandle) ipc_close_mem_handle = nullptr;
};

// The loaded driver; throw_no_driver(what) where there is none.
const DriverApi& require_driver(const char* what);

// Throws cclUnhandledCudaError "<what>: CUDA_ERROR_...: <the driver's text>" unless `status` is
// CUDA_SUCCESS.
void check(const DriverApi& api, CUresult status, const char* what);

}  // namespace ccl::cuda
