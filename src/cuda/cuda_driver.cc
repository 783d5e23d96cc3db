#include "cuda/cuda_driver.h"

#include <dlfcn.h>
#include <sched.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "base/config.h"
#include "base/error.h"
#include "base/log.h"

#if CCL_HAVE_CUDA_H
#include "cuda/cuda_driver_api.h"
#endif

namespace ccl::cuda {
namespace {

struct Loaded {
  const DriverApi* api = nullptr;
  std::string reason;
};

std::once_flag load_once;
Loaded loaded;  // written once under load_once
std::atomic<const DriverApi*> test_api{nullptr};
std::atomic<bool> test_override{false};

#if CCL_HAVE_CUDA_H

// The driver version whose entry points ccl asks for: the oldest ccl supports (CUDA 12.0, the
// first with cuStreamWaitValue32_v2 everywhere). cuGetProcAddress then hands out the 12.0 ABI of
// each function, whatever newer version the driver is.
constexpr int kApiVersion = 12000;

using GetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t,
                                    CUdriverProcAddressQueryResult*);

template <class Fn>
bool resolve(GetProcAddress get, const char* name, Fn* out, std::string* missing) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (get(name, &fn, kApiVersion, CU_GET_PROC_ADDRESS_DEFAULT, &found) != CUDA_SUCCESS ||
      found != CU_GET_PROC_ADDRESS_SUCCESS || fn == nullptr) {
    if (!missing->empty()) *missing += ", ";
    *missing += name;
    return false;
  }
  *out = reinterpret_cast<Fn>(fn);
  return true;
}

Loaded load_driver() {
  if (!config_bool("CCL_CUDA")) return {nullptr, "CCL_CUDA=0"};
  const std::string library = config_string("CCL_CUDA_LIBRARY");
  // RTLD_NODELETE: the table points into the library for the rest of the process.
  void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    return {nullptr, "cannot load " + library + ": " + (why != nullptr ? why : "?")};
  }
  auto get = reinterpret_cast<GetProcAddress>(::dlsym(handle, "cuGetProcAddress_v2"));
  if (get == nullptr)
    return {nullptr, library + " has no cuGetProcAddress_v2 (a driver older than CUDA 12)"};
  auto* api = new DriverApi();  // kept for the process's life, as the library is
  std::string missing;
  PFN_cuInit_v2000 init = nullptr;
  PFN_cuDriverGetVersion_v2020 driver_get_version = nullptr;
  resolve(get, "cuInit", &init, &missing);
  resolve(get, "cuDriverGetVersion", &driver_get_version, &missing);
  resolve(get, "cuDeviceGetCount", &api->device_get_count, &missing);
  resolve(get, "cuDeviceGet", &api->device_get, &missing);
  resolve(get, "cuDeviceGetUuid", &api->device_get_uuid, &missing);
  resolve(get, "cuDeviceGetPCIBusId", &api->device_get_pci_bus_id, &missing);
  resolve(get, "cuDeviceCanAccessPeer", &api->device_can_access_peer, &missing);
  resolve(get, "cuDeviceGetP2PAttribute", &api->device_get_p2p_attribute, &missing);
  resolve(get, "cuCtxEnablePeerAccess", &api->ctx_enable_peer_access, &missing);
  resolve(get, "cuGetErrorString", &api->get_error_string, &missing);
  resolve(get, "cuGetErrorName", &api->get_error_name, &missing);
  resolve(get, "cuPointerGetAttribute", &api->pointer_get_attribute, &missing);
  resolve(get, "cuCtxGetCurrent", &api->ctx_get_current, &missing);
  resolve(get, "cuCtxSetCurrent", &api->ctx_set_current, &missing);
  resolve(get, "cuCtxGetDevice", &api->ctx_get_device, &missing);
  resolve(get, "cuDevicePrimaryCtxRetain", &api->primary_ctx_retain, &missing);
  resolve(get, "cuDeviceGetAttribute", &api->device_get_attribute, &missing);
  resolve(get, "cuStreamGetCtx", &api->stream_get_ctx, &missing);
  resolve(get, "cuStreamCreate", &api->stream_create, &missing);
  resolve(get, "cuStreamDestroy", &api->stream_destroy, &missing);
  resolve(get, "cuStreamSynchronize", &api->stream_synchronize, &missing);
  resolve(get, "cuStreamWaitValue32", &api->stream_wait_value32, &missing);
  resolve(get, "cuStreamWriteValue32", &api->stream_write_value32, &missing);
  resolve(get, "cuStreamBatchMemOp", &api->stream_batch_mem_op, &missing);
  resolve(get, "cuStreamWaitEvent", &api->stream_wait_event, &missing);
  resolve(get, "cuStreamIsCapturing", &api->stream_is_capturing, &missing);
  resolve(get, "cuLaunchHostFunc", &api->launch_host_func, &missing);
  resolve(get, "cuEventCreate", &api->event_create, &missing);
  resolve(get, "cuEventDestroy", &api->event_destroy, &missing);
  resolve(get, "cuEventRecord", &api->event_record, &missing);
  resolve(get, "cuEventQuery", &api->event_query, &missing);
  resolve(get, "cuMemAlloc", &api->mem_alloc, &missing);
  resolve(get, "cuMemFree", &api->mem_free, &missing);
  resolve(get, "cuMemHostAlloc", &api->mem_host_alloc, &missing);
  resolve(get, "cuMemFreeHost", &api->mem_free_host, &missing);
  resolve(get, "cuMemHostGetDevicePointer", &api->mem_host_get_device_pointer, &missing);
  resolve(get, "cuMemHostRegister", &api->mem_host_register, &missing);
  resolve(get, "cuMemHostUnregister", &api->mem_host_unregister, &missing);
  resolve(get, "cuMemcpyAsync", &api->memcpy_async, &missing);
  resolve(get, "cuModuleLoadData", &api->module_load_data, &missing);
  resolve(get, "cuModuleGetFunction", &api->module_get_function, &missing);
  resolve(get, "cuLaunchKernel", &api->launch_kernel, &missing);
  resolve(get, "cuMemGetAddressRange", &api->mem_get_address_range, &missing);
  resolve(get, "cuMemGetHandleForAddressRange", &api->mem_get_handle_for_address_range, &missing);
  resolve(get, "cuIpcGetMemHandle", &api->ipc_get_mem_handle, &missing);
  resolve(get, "cuIpcOpenMemHandle", &api->ipc_open_mem_handle, &missing);
  resolve(get, "cuIpcCloseMemHandle", &api->ipc_close_mem_handle, &missing);
  if (!missing.empty()) {
    delete api;
    return {nullptr, library + " lacks " + missing};
  }
  CUresult status = init(0);
  if (status != CUDA_SUCCESS) {
    const char* text = nullptr;
    api->get_error_string(status, &text);
    delete api;
    return {nullptr, std::string("cuInit failed: ") + (text != nullptr ? text : "?")};
  }
  int devices = 0;
  if (api->device_get_count(&devices) != CUDA_SUCCESS || devices == 0) {
    delete api;
    return {nullptr, "the CUDA driver sees no device"};
  }
  driver_get_version(&api->driver_version);
  CCL_INFO(kInit, "CUDA driver %d.%d loaded from %s: %d device(s)", api->driver_version / 1000,
           api->driver_version % 1000 / 10, library.c_str(), devices);
  return {api, ""};
}

#else

Loaded load_driver() { return {nullptr, "this build of ccl has no CUDA support"}; }

#endif

const Loaded& the_driver() {
  std::call_once(load_once, [] { loaded = load_driver(); });
  return loaded;
}

}  // namespace

const DriverApi* cuda_driver() {
  if (test_override.load(std::memory_order_acquire)) return test_api.load();
  return the_driver().api;
}

std::string cuda_unavailable_reason() {
  if (test_override.load(std::memory_order_acquire)) {
    return test_api.load() != nullptr ? "" : "no driver (a test removed it)";
  }
  return the_driver().reason;
}

void throw_no_driver(const char* what) {
  throw_error(cclInvalidUsage, "%s: no CUDA driver (%s)", what, cuda_unavailable_reason().c_str());
}

void set_cuda_driver_for_testing(const DriverApi* api) {
  test_api.store(api);
  test_override.store(true, std::memory_order_release);
}

#if CCL_HAVE_CUDA_H
const DriverApi& require_driver(const char* what) {
  const DriverApi* api = cuda_driver();
  if (api == nullptr) throw_no_driver(what);
  return *api;
}

CUresult wait_for_event(const DriverApi& api, CUevent event,
                        std::chrono::steady_clock::time_point deadline) {
  for (int polls = 0;; ++polls) {
    const CUresult status = api.event_query(event);
    if (status != CUDA_ERROR_NOT_READY || std::chrono::steady_clock::now() > deadline) {
      return status;
    }
    if (polls < 100) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

void check(const DriverApi& api, CUresult status, const char* what) {
  if (status == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.get_error_name != nullptr) api.get_error_name(status, &name);
  if (api.get_error_string != nullptr) api.get_error_string(status, &text);
  throw_error(cclUnhandledCudaError, "%s: %s: %s", what, name != nullptr ? name : "CUDA error",
              text != nullptr ? text : "?");
}
#endif

}  // namespace ccl::cuda
