#include "cuda/cuda_ipc.h"

#include <unistd.h>

#include <cstring>
#include <mutex>
#include <random>

#include "base/error.h"
#include "base/log.h"
#include "cuda/cuda_driver.h"
#include "cuda/cuda_memory.h"

#if CCL_HAVE_CUDA_H
#include "cuda/cuda_driver_api.h"
#endif

namespace ccl::cuda {

uint64_t this_process() {
  // Drawn once per process: a forked child draws its own (it is another process, whose
  // addresses its parent's buffers are not).
  static std::mutex mutex;
  static uint64_t number = 0;
  static pid_t drawn_in = 0;
  std::lock_guard lock(mutex);
  if (drawn_in != ::getpid()) {
    std::random_device entropy;
    number = (uint64_t{entropy()} << 32 | entropy()) | 1;  // never 0, an export's "nobody"
    drawn_in = ::getpid();
  }
  return number;
}

IpcBuffer export_buffer(const void* data) {
  IpcBuffer b;
  b.process = this_process();
  b.address = reinterpret_cast<uint64_t>(data);
#if CCL_HAVE_CUDA_H
  const DriverApi* api = cuda_driver();
  CUdeviceptr base = 0;
  size_t size = 0;
  CUipcMemHandle handle;
  static_assert(sizeof(handle) == sizeof(b.handle));
  if (api == nullptr || api->mem_get_address_range(
                            &base, &size, reinterpret_cast<CUdeviceptr>(data)) != CUDA_SUCCESS) {
    return b;
  }
  // cuIpcGetMemHandle needs a current context: the memory's own, whatever the caller's thread has.
  const ContextScope scope(context_of(data));
  if (api->ipc_get_mem_handle(&handle, base) == CUDA_SUCCESS) {
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

namespace {

#if CCL_HAVE_CUDA_H
// The device this process knows by `uuid`, or -1.
CUdevice device_of(const DriverApi& api, const DeviceUuid& uuid) {
  int count = 0;
  if (api.device_get_count(&count) != CUDA_SUCCESS) return -1;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    CUdevice device = 0;
    CUuuid id;
    if (api.device_get(&device, ordinal) == CUDA_SUCCESS &&
        api.device_get_uuid(&id, device) == CUDA_SUCCESS &&
        std::memcmp(id.bytes, uuid.bytes.data(), sizeof(id.bytes)) == 0) {
      return device;
    }
  }
  return -1;
}
#endif

// Peer access from the current context to `peer`'s primary context (where cudaMalloc puts
// memory); nothing for the current context's own device.
void enable_peer_access(const DeviceUuid& peer) {
#if CCL_HAVE_CUDA_H
  const DriverApi& api = require_driver("CUDA peer access");
  CUdevice mine = 0;
  check(api, api.ctx_get_device(&mine), "cuCtxGetDevice");
  const CUdevice device = device_of(api, peer);
  if (device < 0)
    throw_error(cclUnhandledCudaError, "CUDA peer access: a device this process does not see");
  if (device == mine) return;
  CUcontext context = nullptr;
  // Retained for the process's life: the peer rank's buffers live in it anyway.
  check(api, api.primary_ctx_retain(&context, device), "cuDevicePrimaryCtxRetain");
  const CUresult status = api.ctx_enable_peer_access(context, 0);
  if (status != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) {
    check(api, status, "cuCtxEnablePeerAccess");
  }
#else
  (void)peer;
  throw_no_driver("CUDA peer access");
#endif
}

}  // namespace

PeerLink link_to(const DeviceUuid& peer) {
#if CCL_HAVE_CUDA_H
  const DriverApi* api = cuda_driver();
  CUdevice mine = 0;
  if (api == nullptr || api->ctx_get_device(&mine) != CUDA_SUCCESS) return PeerLink::None;
  const CUdevice device = device_of(*api, peer);
  if (device < 0) return PeerLink::None;
  if (device == mine) return PeerLink::SameDevice;
  int can = 0;
  if (api->device_can_access_peer(&can, mine, device) != CUDA_SUCCESS || can == 0) {
    return PeerLink::None;
  }
  int atomics = 0;  // stays 0 (PCIe) where the driver does not answer
  api->device_get_p2p_attribute(&atomics, CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED, mine,
                                device);
  return atomics != 0 ? PeerLink::NvLink : PeerLink::Pcie;
#else
  (void)peer;
  return PeerLink::None;
#endif
}

const char* peer_link_name(PeerLink link) {
  switch (link) {
    case PeerLink::SameDevice:
      return "one GPU";
    case PeerLink::NvLink:
      return "NVLink";
    case PeerLink::Pcie:
      return "PCIe P2P";
    case PeerLink::None:
      break;
  }
  return "no P2P";
}

IpcImports::~IpcImports() {
  for (const auto& [handle, entry] : opened_) close(entry);
}

void IpcImports::close(const Opened& entry) {
#if CCL_HAVE_CUDA_H
  const DriverApi* api = cuda_driver();
  if (api == nullptr) return;
  ContextScope scope(entry.context);  // a destructor may run on a thread without a context
  const CUresult status = api->ipc_close_mem_handle(static_cast<CUdeviceptr>(entry.base));
  if (status != CUDA_SUCCESS) CCL_WARN(kColl, "cuIpcCloseMemHandle failed (%d)", int(status));
#else
  (void)entry;
#endif
}

void IpcImports::trim() {
  if (opened_.size() > kKeepOpen) {
    for (auto it = opened_.begin(); it != opened_.end();) {
      if (it->second.call == call_) {
        ++it;
        continue;
      }
      close(it->second);
      it = opened_.erase(it);
    }
  }
  ++call_;
}

void* IpcImports::open(const IpcBuffer& buffer, const DeviceUuid& device) {
  // CUDA opens no handle of its own process: a buffer of this one is its address, readable from
  // another device once peer access is on.
  if (buffer.process == this_process()) {
    if (!peers_enabled_.contains(device)) {
      enable_peer_access(device);  // nothing for the current context's own device
      peers_enabled_.insert(device);
    }
    return reinterpret_cast<void*>(buffer.address);
  }
  auto it = opened_.find(buffer.handle);
  if (it == opened_.end()) {
#if CCL_HAVE_CUDA_H
    const DriverApi& api = require_driver("CUDA IPC");
    CUipcMemHandle handle;
    std::memcpy(&handle, buffer.handle.data(), sizeof(handle));
    CUdeviceptr base = 0;
    check(api, api.ipc_open_mem_handle(&base, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
          "cuIpcOpenMemHandle (a peer's device buffer)");
    CUcontext context = nullptr;
    api.ctx_get_current(&context);
    it = opened_.emplace(buffer.handle, Opened{base, context, call_}).first;
#else
    throw_no_driver("CUDA IPC");
#endif
  }
  it->second.call = call_;
  return reinterpret_cast<void*>(it->second.base + buffer.offset);
}

}  // namespace ccl::cuda
