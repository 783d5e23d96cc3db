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

namespace {
int32_t this_pid() { return static_cast<int32_t>(::getpid()); }
}  // namespace

IpcBuffer export_buffer(const void* data) {
  IpcBuffer b;
  b.pid = this_pid();
  b.address = reinterpret_cast<uint64_t>(data);
#if CCL_HAVE_CUDA_H
  const DriverApi* api = cuda_driver();
  CUdeviceptr base = 0;
  size_t size = 0;
  CUipcMemHandle handle;
  static_assert(sizeof(handle) == sizeof(b.handle));
  if (api != nullptr &&
      api->mem_get_address_range(&base, &size, reinterpret_cast<CUdeviceptr>(data)) ==
          CUDA_SUCCESS &&
      api->ipc_get_mem_handle(&handle, base) == CUDA_SUCCESS) {
    std::memcpy(b.handle.data(), &handle, sizeof(handle));
    b.offset = b.address - base;
    b.valid = 1;
  }
#endif
  return b;
}

DeviceUuid current_device_uuid() {
  DeviceUuid id;
#if CCL_HAVE_CUDA_H
  const DriverApi& api = require_driver("cuDeviceGetUuid");
  CUdevice device = 0;
  check(api, api.ctx_get_device(&device), "cuCtxGetDevice");
  CUuuid uuid;
  static_assert(sizeof(uuid.bytes) == sizeof(id.bytes));
  check(api, api.device_get_uuid(&uuid, device), "cuDeviceGetUuid");
  std::memcpy(id.bytes.data(), uuid.bytes, sizeof(uuid.bytes));
#endif
  return id;
}

bool can_access_device(const DeviceUuid& peer) {
#if CCL_HAVE_CUDA_H
  const DriverApi* api = cuda_driver();
  CUdevice mine = 0;
  int count = 0;
  if (api == nullptr || api->ctx_get_device(&mine) != CUDA_SUCCESS ||
      api->device_get_count(&count) != CUDA_SUCCESS) {
    return false;
  }
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    CUdevice device = 0;
    CUuuid uuid;
    if (api->device_get(&device, ordinal) != CUDA_SUCCESS ||
        api->device_get_uuid(&uuid, device) != CUDA_SUCCESS ||
        std::memcmp(uuid.bytes, peer.bytes.data(), sizeof(uuid.bytes)) != 0) {
      continue;
    }
    if (device == mine) return true;
    int can = 0;
    return api->device_can_access_peer(&can, mine, device) == CUDA_SUCCESS && can != 0;
  }
  return false;  // a device this process does not see
#else
  (void)peer;
  return false;
#endif
}

IpcImports::~IpcImports() {
#if CCL_HAVE_CUDA_H
  const DriverApi* api = cuda_driver();
  if (api == nullptr) return;
  for (const auto& [handle, base] : opened_) {
    const CUresult status = api->ipc_close_mem_handle(static_cast<CUdeviceptr>(base));
    if (status != CUDA_SUCCESS) CCL_WARN(kColl, "cuIpcCloseMemHandle failed (%d)", int(status));
  }
#endif
}

void* IpcImports::open(const IpcBuffer& buffer) {
  // CUDA opens no handle of its own process: a buffer of this one is its address.
  if (buffer.pid == this_pid()) return reinterpret_cast<void*>(buffer.address);
  auto it = opened_.find(buffer.handle);
  if (it == opened_.end()) {
#if CCL_HAVE_CUDA_H
    const DriverApi& api = require_driver("CUDA IPC");
    CUipcMemHandle handle;
    std::memcpy(&handle, buffer.handle.data(), sizeof(handle));
    CUdeviceptr base = 0;
    check(api, api.ipc_open_mem_handle(&base, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
          "cuIpcOpenMemHandle (a peer's device buffer)");
    it = opened_.emplace(buffer.handle, base).first;
#else
    throw_no_driver("CUDA IPC");
#endif
  }
  return reinterpret_cast<void*>(it->second + buffer.offset);
}

}  // namespace ccl::cuda
