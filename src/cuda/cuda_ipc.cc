#include "cuda/cuda_ipc.h"

#include <unistd.h>

#include <cstring>

#include "base/error.h"
#include "base/log.h"
#include "cuda/cuda_driver.h"

#if CCL_HAVE_CUDA_H
#include "cuda/cuda_driver_api.h"
#endif

namespace ccl::cuda {

#if CCL_HAVE_CUDA_H

IpcBuffer export_buffer(const void* data) {
  IpcBuffer b;
  b.pid = static_cast<int32_t>(::getpid());
  b.address = reinterpret_cast<uint64_t>(data);
  const DriverApi* api = cuda_driver();
  if (api == nullptr) return b;
  CUdeviceptr base = 0;
  size_t size = 0;
  if (api->mem_get_address_range(&base, &size, reinterpret_cast<CUdeviceptr>(data)) !=
      CUDA_SUCCESS) {
    return b;
  }
  CUipcMemHandle handle;
  if (api->ipc_get_mem_handle(&handle, base) != CUDA_SUCCESS) return b;
  static_assert(sizeof(handle) == sizeof(b.handle));
  std::memcpy(b.handle.data(), &handle, sizeof(handle));
  b.offset = b.address - base;
  b.valid = 1;
  return b;
}

IpcImports::~IpcImports() {
  const DriverApi* api = cuda_driver();
  if (api == nullptr) return;
  for (const auto& [handle, base] : opened_) {
    const CUresult status = api->ipc_close_mem_handle(static_cast<CUdeviceptr>(base));
    if (status != CUDA_SUCCESS) CCL_WARN(kColl, "cuIpcCloseMemHandle failed (%d)", int(status));
  }
}

void* IpcImports::open(const IpcBuffer& buffer) {
  if (buffer.pid == static_cast<int32_t>(::getpid())) {
    return reinterpret_cast<void*>(buffer.address);  // CUDA opens no handle of its own process
  }
  auto it = opened_.find(buffer.handle);
  if (it == opened_.end()) {
    const DriverApi& api = require_driver("CUDA IPC");
    CUipcMemHandle handle;
    std::memcpy(&handle, buffer.handle.data(), sizeof(handle));
    CUdeviceptr base = 0;
    check(api, api.ipc_open_mem_handle(&base, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
          "cuIpcOpenMemHandle (a peer's device buffer)");
    it = opened_.emplace(buffer.handle, base).first;
  }
  return reinterpret_cast<void*>(it->second + buffer.offset);
}

#else

IpcBuffer export_buffer(const void* data) {
  IpcBuffer b;
  b.pid = static_cast<int32_t>(::getpid());
  b.address = reinterpret_cast<uint64_t>(data);
  return b;
}
IpcImports::~IpcImports() = default;
void* IpcImports::open(const IpcBuffer& buffer) {
  if (buffer.pid == static_cast<int32_t>(::getpid()))
    return reinterpret_cast<void*>(buffer.address);
  throw Error(cclInvalidUsage, "this build of ccl has no CUDA support");
}

#endif

}  // namespace ccl::cuda
