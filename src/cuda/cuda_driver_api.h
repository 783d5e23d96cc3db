// The table of CUDA driver entry points ccl uses (cuda_driver.h loads it). Included only by the
// files that call the driver, and only in builds with the CUDA headers (CCL_HAVE_CUDA_H).
//
// Each entry's type is cudaTypedefs.h's pointer type of the version cuGetProcAddress hands out
// for ccl's API version (12.0, cuda_driver.cc): the newest version of the function at or before
// 12.0. Not cuda.h's plain declaration: a header newer than 12.0 may declare a later version
// under the same name (CUDA 13's cuCtxGetDevice takes a context too, its cuStreamGetCtx a green
// context), and a call through that type would pass arguments the 12.0 function does not take.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <chrono>

#include "base/error.h"

namespace ccl::cuda {

struct DriverApi {
  // What the entry's driver version says (cuDriverGetVersion), e.g. 13000.
  int driver_version = 0;
  // Whether cuStreamWaitValue32 works on this driver's devices (else a host function orders the
  // CUDA stream after a ccl operation: cuda_stream_order.cc).
  bool stream_wait_value = true;

  PFN_cuGetErrorString_v6000 get_error_string = nullptr;
  PFN_cuGetErrorName_v6000 get_error_name = nullptr;
  PFN_cuPointerGetAttribute_v4000 pointer_get_attribute = nullptr;
  PFN_cuCtxGetCurrent_v4000 ctx_get_current = nullptr;
  PFN_cuCtxSetCurrent_v4000 ctx_set_current = nullptr;
  PFN_cuCtxGetDevice_v2000 ctx_get_device = nullptr;
  PFN_cuDevicePrimaryCtxRetain_v7000 primary_ctx_retain = nullptr;
  PFN_cuDeviceGetAttribute_v2000 device_get_attribute = nullptr;
  // Which devices a process sees and whether one can read another's memory (cuda_ipc.h).
  PFN_cuDeviceGetCount_v2000 device_get_count = nullptr;
  PFN_cuDeviceGet_v2000 device_get = nullptr;
  PFN_cuDeviceGetUuid_v11040 device_get_uuid = nullptr;
  PFN_cuDeviceGetPCIBusId_v4010 device_get_pci_bus_id = nullptr;  // cuda_devices.h
  PFN_cuDeviceCanAccessPeer_v4000 device_can_access_peer = nullptr;
  PFN_cuDeviceGetP2PAttribute_v8000 device_get_p2p_attribute = nullptr;  // the link's class
  PFN_cuCtxEnablePeerAccess_v4000 ctx_enable_peer_access = nullptr;
  PFN_cuStreamGetCtx_v9020 stream_get_ctx = nullptr;
  PFN_cuStreamCreate_v2000 stream_create = nullptr;
  PFN_cuStreamDestroy_v4000 stream_destroy = nullptr;
  PFN_cuStreamSynchronize_v2000 stream_synchronize = nullptr;
  PFN_cuStreamWaitValue32_v11070 stream_wait_value32 = nullptr;
  // The device programs (core/device): flags written and waited by the stream, several at once,
  // an order between two streams without the host, and whether a stream is capturing a graph.
  PFN_cuStreamWriteValue32_v11070 stream_write_value32 = nullptr;
  PFN_cuStreamBatchMemOp_v11070 stream_batch_mem_op = nullptr;
  PFN_cuStreamWaitEvent_v3020 stream_wait_event = nullptr;
  PFN_cuStreamIsCapturing_v10000 stream_is_capturing = nullptr;
  PFN_cuLaunchHostFunc_v10000 launch_host_func = nullptr;
  PFN_cuEventCreate_v2000 event_create = nullptr;
  PFN_cuEventDestroy_v4000 event_destroy = nullptr;
  PFN_cuEventRecord_v2000 event_record = nullptr;
  PFN_cuEventQuery_v2000 event_query = nullptr;
  PFN_cuMemAlloc_v3020 mem_alloc = nullptr;
  PFN_cuMemFree_v3020 mem_free = nullptr;
  PFN_cuMemHostAlloc_v2020 mem_host_alloc = nullptr;
  PFN_cuMemFreeHost_v2000 mem_free_host = nullptr;
  PFN_cuMemHostGetDevicePointer_v3020 mem_host_get_device_pointer = nullptr;
  // Shared host memory (the flag page) mapped for the device.
  PFN_cuMemHostRegister_v6050 mem_host_register = nullptr;
  PFN_cuMemHostUnregister_v4000 mem_host_unregister = nullptr;
  PFN_cuMemcpyAsync_v4000 memcpy_async = nullptr;
  // The kernels (cuda_kernels.h) and CUDA IPC between the processes of a host (cuda_ipc.h).
  PFN_cuModuleLoadData_v2000 module_load_data = nullptr;
  PFN_cuModuleGetFunction_v2000 module_get_function = nullptr;
  PFN_cuLaunchKernel_v4000 launch_kernel = nullptr;
  PFN_cuMemGetAddressRange_v3020 mem_get_address_range = nullptr;
  // GPUDirect RDMA: device memory as a dmabuf for the NIC (ibv_reg_dmabuf_mr).
  PFN_cuMemGetHandleForAddressRange_v11070 mem_get_handle_for_address_range = nullptr;
  PFN_cuIpcGetMemHandle_v4010 ipc_get_mem_handle = nullptr;
  PFN_cuIpcOpenMemHandle_v11000 ipc_open_mem_handle = nullptr;
  PFN_cuIpcCloseMemHandle_v4010 ipc_close_mem_handle = nullptr;
};

// The loaded driver; throw_no_driver(what) where there is none.
const DriverApi& require_driver(const char* what);

// Polls `event` until it is done (CUDA_SUCCESS), fails (that error) or `deadline` passes
// (CUDA_ERROR_NOT_READY): yielding the core at first, then in 20 us sleeps.
CUresult wait_for_event(const DriverApi& api, CUevent event,
                        std::chrono::steady_clock::time_point deadline);

// Throws cclUnhandledCudaError "<what>: CUDA_ERROR_...: <the driver's text>" unless `status` is
// CUDA_SUCCESS.
void check(const DriverApi& api, CUresult status, const char* what);

}  // namespace ccl::cuda
