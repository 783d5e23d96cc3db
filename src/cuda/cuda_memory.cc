#include "cuda/cuda_memory.h"

#include <chrono>

#include "base/config.h"
#include "base/error.h"
#include "cuda/cuda_driver.h"

#if CCL_HAVE_CUDA_H
#include "cuda/cuda_driver_api.h"
#endif

namespace ccl::cuda {
namespace {
// Set while this thread runs an operation of a ccl stream made from a CUDA stream.
thread_local bool ordered_by_cuda_stream = false;
}  // namespace

OrderedByCudaStream::OrderedByCudaStream() : outer_(ordered_by_cuda_stream) {
  ordered_by_cuda_stream = true;
}
OrderedByCudaStream::~OrderedByCudaStream() { ordered_by_cuda_stream = outer_; }

#if CCL_HAVE_CUDA_H

namespace {

CUdeviceptr address(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

}  // namespace

MemoryKind pointer_kind(const void* p) {
  const DriverApi* api = cuda_driver();
  if (api == nullptr || p == nullptr) return MemoryKind::Host;
  unsigned int type = 0;
  const CUresult status =
      api->pointer_get_attribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address(p));
  // CUDA_ERROR_INVALID_VALUE: memory CUDA never saw (malloc, the stack, a mapping).
  if (status != CUDA_SUCCESS) return MemoryKind::Host;
  return type == CU_MEMORYTYPE_HOST ? MemoryKind::Host : MemoryKind::CudaDevice;
}

bool device_allocation(const void* p, uint64_t* base, uint64_t* bytes) {
  const DriverApi* api = cuda_driver();
  CUdeviceptr b = 0;
  size_t size = 0;
  if (api == nullptr || api->mem_get_address_range(&b, &size, address(p)) != CUDA_SUCCESS) {
    return false;
  }
  *base = b;
  *bytes = size;
  return true;
}

int export_dmabuf(uint64_t base, uint64_t bytes) {
  const DriverApi* api = cuda_driver();
  int fd = -1;
  if (api == nullptr || api->mem_get_handle_for_address_range(
                            &fd, static_cast<CUdeviceptr>(base), bytes,
                            CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0) != CUDA_SUCCESS) {
    return -1;
  }
  return fd;
}

void* context_of(const void* device_ptr) {
  const DriverApi& api = require_driver("context_of");
  CUcontext context = nullptr;
  if (api.pointer_get_attribute(&context, CU_POINTER_ATTRIBUTE_CONTEXT, address(device_ptr)) ==
          CUDA_SUCCESS &&
      context != nullptr) {
    return context;
  }
  // Memory of stream-ordered pools and of cuMemMap has no context of its own: its device's
  // primary context (the one the runtime uses) serves.
  int ordinal = -1;
  const CUresult status =
      api.pointer_get_attribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, address(device_ptr));
  if (status != CUDA_SUCCESS || ordinal < 0) {
    throw_error(cclInvalidArgument, "%p is not memory CUDA knows", device_ptr);
  }
  check(api, api.primary_ctx_retain(&context, ordinal), "cuDevicePrimaryCtxRetain");
  return context;
}

ContextScope::ContextScope(void* context) {
  const DriverApi& api = require_driver("ContextScope");
  CUcontext previous = nullptr;
  check(api, api.ctx_get_current(&previous), "cuCtxGetCurrent");
  previous_ = previous;
  if (previous != static_cast<CUcontext>(context)) {
    check(api, api.ctx_set_current(static_cast<CUcontext>(context)), "cuCtxSetCurrent");
    changed_ = true;
  }
}

ContextScope::~ContextScope() {
  if (!changed_) return;
  if (const DriverApi* api = cuda_driver()) api->ctx_set_current(static_cast<CUcontext>(previous_));
}

PinnedBuffer::~PinnedBuffer() {
  if (data_ == nullptr) return;
  if (const DriverApi* api = cuda_driver()) api->mem_free_host(data_);
}

std::byte* PinnedBuffer::reserve(size_t bytes) {
  if (bytes <= capacity_ && data_ != nullptr) return data_;
  const DriverApi& api = require_driver("PinnedBuffer");
  if (data_ != nullptr) {
    api.mem_free_host(data_);
    data_ = nullptr;
    capacity_ = 0;
  }
  const size_t want = bytes < 4096 ? 4096 : bytes;
  void* p = nullptr;
  const CUresult status =
      api.mem_host_alloc(&p, want, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
  if (status != CUDA_SUCCESS) {
    throw_error(cclSystemError, "cannot pin %zu bytes of host memory for CUDA staging (%s)", want,
                status == CUDA_ERROR_OUT_OF_MEMORY ? "out of memory" : "cuMemHostAlloc failed");
  }
  data_ = static_cast<std::byte*>(p);
  capacity_ = want;
  return data_;
}

uint64_t PinnedBuffer::device_address() const {
  const DriverApi& api = require_driver("PinnedBuffer");
  CUdeviceptr device = 0;
  check(api, api.mem_host_get_device_pointer(&device, data_, 0), "cuMemHostGetDevicePointer");
  return device;
}

OwnStream::~OwnStream() {
  if (stream_ == nullptr) return;
  if (const DriverApi* api = cuda_driver()) {
    ContextScope scope(context_);
    api->stream_destroy(static_cast<CUstream>(stream_));
  }
}

void* OwnStream::get(void* context) {
  if (stream_ != nullptr && context == context_) return stream_;
  const DriverApi& api = require_driver("OwnStream");
  if (stream_ != nullptr) {
    ContextScope old(context_);
    api.stream_destroy(static_cast<CUstream>(stream_));
    stream_ = nullptr;
  }
  CUstream stream = nullptr;
  check(api, api.stream_create(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  stream_ = stream;
  context_ = context;
  return stream_;
}

void OwnStream::copy(void* context, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  const DriverApi& api = require_driver("OwnStream::copy");
  CUstream stream = static_cast<CUstream>(get(context));
  check(api, api.memcpy_async(address(dst), address(src), bytes, stream), "cuMemcpyAsync");
  check(api, api.stream_synchronize(stream), "cuStreamSynchronize");
}

void OwnStream::copy_async(void* context, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  const DriverApi& api = require_driver("OwnStream::copy_async");
  CUstream stream = static_cast<CUstream>(get(context));
  check(api, api.memcpy_async(address(dst), address(src), bytes, stream), "cuMemcpyAsync");
}

void OwnStream::synchronize(void* context) {
  const DriverApi& api = require_driver("OwnStream::synchronize");
  check(api, api.stream_synchronize(static_cast<CUstream>(get(context))), "cuStreamSynchronize");
}

void order_after_legacy_stream() {
  if (ordered_by_cuda_stream) return;
  const DriverApi& api = require_driver("order_after_legacy_stream");
  CUevent event = nullptr;
  check(api, api.event_create(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  const CUresult recorded = api.event_record(event, CU_STREAM_LEGACY);
  if (recorded != CUDA_SUCCESS) {
    api.event_destroy(event);
    check(api, recorded, "cuEventRecord on the legacy stream");
  }
  const auto timeout = std::chrono::seconds(config_int("CCL_TIMEOUT"));
  const CUresult status = wait_for_event(api, event, std::chrono::steady_clock::now() + timeout);
  api.event_destroy(event);
  if (status == CUDA_ERROR_NOT_READY) {
    throw_error(cclTimeout,
                "device buffers: the CUDA work queued before this call on the legacy stream "
                "was not done within CCL_TIMEOUT (%lld s)",
                static_cast<long long>(timeout.count()));
  }
  check(api, status, "cuEventQuery on the legacy stream");
}

void order_after_legacy_stream_on(void* stream) {
  if (ordered_by_cuda_stream) return;
  const DriverApi& api = require_driver("order_after_legacy_stream_on");
  CUevent event = nullptr;
  check(api, api.event_create(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  CUresult status = api.event_record(event, CU_STREAM_LEGACY);
  if (status == CUDA_SUCCESS)
    status = api.stream_wait_event(static_cast<CUstream>(stream), event, 0);
  api.event_destroy(event);  // released once the wait is past it
  check(api, status, "ordering after the legacy stream (cuEventRecord, cuStreamWaitEvent)");
}

#else  // no CUDA headers: no driver, every pointer is host memory

MemoryKind pointer_kind(const void*) { return MemoryKind::Host; }
bool device_allocation(const void*, uint64_t*, uint64_t*) { return false; }
int export_dmabuf(uint64_t, uint64_t) { return -1; }
void* context_of(const void*) { throw_no_driver("context_of"); }
ContextScope::ContextScope(void*) { throw_no_driver("ContextScope"); }
ContextScope::~ContextScope() = default;
PinnedBuffer::~PinnedBuffer() = default;
std::byte* PinnedBuffer::reserve(size_t) { throw_no_driver("PinnedBuffer"); }
uint64_t PinnedBuffer::device_address() const { return 0; }
OwnStream::~OwnStream() = default;
void* OwnStream::get(void*) { throw_no_driver("OwnStream"); }
void OwnStream::copy(void*, void*, const void*, size_t) { throw_no_driver("OwnStream::copy"); }
void OwnStream::copy_async(void*, void*, const void*, size_t) {
  throw_no_driver("OwnStream::copy_async");
}
void OwnStream::synchronize(void*) { throw_no_driver("OwnStream::synchronize"); }
void order_after_legacy_stream() {
  if (!ordered_by_cuda_stream) throw_no_driver("order_after_legacy_stream");
}
void order_after_legacy_stream_on(void*) {
  if (!ordered_by_cuda_stream) throw_no_driver("order_after_legacy_stream_on");
}

#endif

}  // namespace ccl::cuda
