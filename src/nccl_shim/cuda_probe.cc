#include "nccl_shim/cuda_probe.h"

#include <dlfcn.h>

#include <mutex>
#include <unordered_set>

namespace ccl_nccl::cuda_probe {

namespace {

// The driver entry points used, with their types spelled without cuda.h (CUresult is an int,
// CUdevice an int, CUdeviceptr an unsigned 64-bit integer, CUcontext and CUstream pointers).
using CtxGetCurrent = int (*)(void** context);
using CtxGetDevice = int (*)(int* device);
using StreamGetId = int (*)(void* stream, unsigned long long* id);
using MemAlloc = int (*)(uint64_t* pointer, size_t size);
using MemFree = int (*)(uint64_t pointer);

struct Driver {
  CtxGetCurrent ctx_get_current = nullptr;
  CtxGetDevice ctx_get_device = nullptr;
  StreamGetId stream_get_id = nullptr;
  MemAlloc mem_alloc = nullptr;
  MemFree mem_free = nullptr;
};

// The loaded driver's entry points, or nullptr while the program has not loaded libcuda.so.1.
// Found once it is there; not looked up again after that.
const Driver* driver() {
  static std::mutex mutex;
  static Driver found;
  static bool have = false;
  std::lock_guard lock(mutex);
  if (have) return &found;
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) return nullptr;
  found.ctx_get_current = reinterpret_cast<CtxGetCurrent>(dlsym(handle, "cuCtxGetCurrent"));
  found.ctx_get_device = reinterpret_cast<CtxGetDevice>(dlsym(handle, "cuCtxGetDevice"));
  found.stream_get_id = reinterpret_cast<StreamGetId>(dlsym(handle, "cuStreamGetId"));
  found.mem_alloc = reinterpret_cast<MemAlloc>(dlsym(handle, "cuMemAlloc_v2"));
  found.mem_free = reinterpret_cast<MemFree>(dlsym(handle, "cuMemFree_v2"));
  have = true;  // the handle stays open: the driver is never unloaded under the program
  return &found;
}

bool context_current(const Driver* d) {
  void* context = nullptr;
  return d != nullptr && d->ctx_get_current != nullptr && d->ctx_get_current(&context) == 0 &&
         context != nullptr;
}

std::mutex allocations_mutex;
std::unordered_set<uint64_t> allocations;  // device_alloc's, for device_free

}  // namespace

bool current_device(int* device) {
  const Driver* d = driver();
  if (!context_current(d) || d->ctx_get_device == nullptr) return false;
  return d->ctx_get_device(device) == 0;
}

uint64_t stream_id(void* stream) {
  const Driver* d = driver();
  unsigned long long id = 0;
  if (d == nullptr || d->stream_get_id == nullptr || d->stream_get_id(stream, &id) != 0) return 0;
  return id;
}

void* device_alloc(size_t size, const char** error) {
  const Driver* d = driver();
  if (!context_current(d) || d->mem_alloc == nullptr) {
    *error = "no CUDA context is current on this thread";
    return nullptr;
  }
  uint64_t pointer = 0;
  if (const int result = d->mem_alloc(&pointer, size); result != 0) {
    *error = "cuMemAlloc failed";
    return nullptr;
  }
  std::lock_guard lock(allocations_mutex);
  allocations.insert(pointer);
  return reinterpret_cast<void*>(pointer);
}

bool device_free(void* pointer) {
  const auto address = reinterpret_cast<uint64_t>(pointer);
  {
    std::lock_guard lock(allocations_mutex);
    if (allocations.erase(address) == 0) return false;
  }
  const Driver* d = driver();
  if (d != nullptr && d->mem_free != nullptr) d->mem_free(address);
  return true;
}

}  // namespace ccl_nccl::cuda_probe
