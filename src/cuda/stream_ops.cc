#include "cuda/stream_ops.h"

#include <utility>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "cuda/cuda_driver.h"
#include "cuda/cuda_memory.h"

#if CCL_HAVE_CUDA_H
#include "cuda/cuda_driver_api.h"
#endif

namespace ccl::cuda {

// A caller flushes a full batch before it adds to it (full()).
void MemOps::wait(uint64_t device_address, uint32_t mask) {
  if (count_ == kMaxBatch) throw Error(cclInternalError, "MemOps: more than kMaxBatch unflushed");
  ops_[count_++] = {true, device_address, mask};
}
void MemOps::write(uint64_t device_address, uint32_t value) {
  if (count_ == kMaxBatch) throw Error(cclInternalError, "MemOps: more than kMaxBatch unflushed");
  ops_[count_++] = {false, device_address, value};
}

#if CCL_HAVE_CUDA_H

namespace {
CUstream as_stream(void* s) { return static_cast<CUstream>(s); }
}  // namespace

void* current_context() {
  const DriverApi* api = cuda_driver();
  CUcontext context = nullptr;
  if (api == nullptr || api->ctx_get_current(&context) != CUDA_SUCCESS) return nullptr;
  return context;
}

void* stream_context(void* stream) {
  const DriverApi& api = require_driver("cuStreamGetCtx");
  CUcontext context = nullptr;
  if (api.stream_get_ctx(as_stream(stream), &context) == CUDA_SUCCESS && context != nullptr) {
    return context;
  }
  return current_context();  // the legacy stream belongs to the current context
}

bool is_capturing(void* stream) {
  const DriverApi& api = require_driver("cuStreamIsCapturing");
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  check(api, api.stream_is_capturing(as_stream(stream), &status), "cuStreamIsCapturing");
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

// cuStreamBatchMemOp of `count` collected operations.
static CUresult submit_batch(const DriverApi& api, void* stream, const MemOps::Op* ops,
                             size_t count) {
  CUstreamBatchMemOpParams params[MemOps::kMaxBatch];
  for (size_t i = 0; i < count; ++i) {
    CUstreamBatchMemOpParams& p = params[i];
    p = CUstreamBatchMemOpParams{};
    if (ops[i].wait) {
      p.waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
      p.waitValue.address = ops[i].address;
      p.waitValue.value = ops[i].value;
      p.waitValue.flags = CU_STREAM_WAIT_VALUE_AND;
    } else {
      p.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
      p.writeValue.address = ops[i].address;
      p.writeValue.value = ops[i].value;
      p.writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
    }
  }
  return api.stream_batch_mem_op(as_stream(stream), static_cast<unsigned>(count), params, 0);
}

void MemOps::flush(void* stream) {
  if (count_ == 0) return;
  const DriverApi& api = require_driver("stream memory operations");
  check(api, submit_batch(api, stream, ops_, std::exchange(count_, 0)),
        "cuStreamBatchMemOp (the flags of a device collective)");
}

bool MemOps::flush_unless_refused(void* stream) {
  if (count_ == 0) return true;
  const DriverApi& api = require_driver("stream memory operations");
  const CUresult status = submit_batch(api, stream, ops_, std::exchange(count_, 0));
  if (status == CUDA_ERROR_NOT_SUPPORTED) return false;
  check(api, status, "cuStreamBatchMemOp");
  return true;
}

bool takes_mem_ops(void* stream, uint64_t device_address) {
  MemOps probe;
  probe.write(device_address, 1);
  probe.wait(device_address, 1);
  return probe.flush_unless_refused(stream);
}

void copy_on(void* stream, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  const DriverApi& api = require_driver("cuMemcpyAsync");
  check(api,
        api.memcpy_async(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src),
                         bytes, as_stream(stream)),
        "cuMemcpyAsync");
}

Event::Event() {
  const DriverApi& api = require_driver("cuEventCreate");
  context_ = current_context();
  CUevent event = nullptr;
  check(api, api.event_create(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  event_ = event;
}

Event::~Event() {
  const DriverApi* api = cuda_driver();
  if (api == nullptr || event_ == nullptr) return;
  ContextScope scope(context_);
  api->event_destroy(static_cast<CUevent>(event_));
}

void Event::record(void* stream) {
  const DriverApi& api = require_driver("cuEventRecord");
  check(api, api.event_record(static_cast<CUevent>(event_), as_stream(stream)), "cuEventRecord");
}

bool Event::done() const {
  const DriverApi& api = require_driver("cuEventQuery");
  const CUresult status = api.event_query(static_cast<CUevent>(event_));
  if (status == CUDA_ERROR_NOT_READY) return false;
  check(api, status, "cuEventQuery");
  return true;
}

void Event::wait(std::chrono::steady_clock::time_point deadline) const {
  const DriverApi& api = require_driver("cuEventQuery");
  const CUresult status = wait_for_event(api, static_cast<CUevent>(event_), deadline);
  if (status == CUDA_ERROR_NOT_READY) {
    throw_error(cclTimeout, "a copy between host and device memory did not finish in time");
  }
  check(api, status, "cuEventQuery");
}

void stream_wait_event(void* waiter, const Event& event) {
  const DriverApi& api = require_driver("cuStreamWaitEvent");
  check(api, api.stream_wait_event(as_stream(waiter), static_cast<CUevent>(event.handle()), 0),
        "cuStreamWaitEvent");
}

DeviceAllocation::DeviceAllocation(size_t bytes) : size_(bytes), context_(current_context()) {
  const DriverApi& api = require_driver("cuMemAlloc");
  CUdeviceptr p = 0;
  const CUresult status = api.mem_alloc(&p, bytes);
  if (status == CUDA_ERROR_OUT_OF_MEMORY) {
    throw_error(cclSystemError, "cannot allocate %zu bytes of device memory (out of memory)",
                bytes);
  }
  check(api, status, "cuMemAlloc");
  data_ = reinterpret_cast<void*>(p);
}

DeviceAllocation::~DeviceAllocation() { release(); }

DeviceAllocation::DeviceAllocation(DeviceAllocation&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      context_(other.context_) {}

DeviceAllocation& DeviceAllocation::operator=(DeviceAllocation&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    context_ = other.context_;
  }
  return *this;
}

void DeviceAllocation::release() {
  if (data_ == nullptr) return;
  if (const DriverApi* api = cuda_driver()) {
    ContextScope scope(context_);
    api->mem_free(reinterpret_cast<CUdeviceptr>(std::exchange(data_, nullptr)));
  }
}

HostRegistration::HostRegistration(void* data, size_t bytes) {
  const DriverApi& api = require_driver("cuMemHostRegister");
  check(api,
        api.mem_host_register(data, bytes,
                              CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP),
        "cuMemHostRegister (the flags of the device collectives)");
  data_ = data;
  CUdeviceptr device = 0;
  const CUresult status = api.mem_host_get_device_pointer(&device, data, 0);
  if (status != CUDA_SUCCESS) {
    api.mem_host_unregister(data);
    data_ = nullptr;
    check(api, status, "cuMemHostGetDevicePointer");
  }
  device_ = device;
}

HostRegistration::~HostRegistration() {
  if (data_ == nullptr) return;
  if (const DriverApi* api = cuda_driver()) {
    const CUresult status = api->mem_host_unregister(data_);
    if (status != CUDA_SUCCESS) CCL_WARN(kColl, "cuMemHostUnregister failed (%d)", int(status));
  }
}

uint64_t HostRegistration::device_address(const void* host) const {
  return device_ + static_cast<uint64_t>(static_cast<const std::byte*>(host) -
                                         static_cast<const std::byte*>(data_));
}

#else  // no CUDA headers: nothing of this is ever reached (no driver)

void* current_context() { return nullptr; }
void* stream_context(void*) { throw_no_driver("cuStreamGetCtx"); }
bool is_capturing(void*) { return false; }
void MemOps::flush(void*) {
  if (count_ != 0) throw_no_driver("stream memory operations");
}
bool MemOps::flush_unless_refused(void*) {
  if (count_ != 0) throw_no_driver("stream memory operations");
  return true;
}
bool takes_mem_ops(void*, uint64_t) { throw_no_driver("stream memory operations"); }
void copy_on(void*, void*, const void*, size_t) { throw_no_driver("cuMemcpyAsync"); }
Event::Event() { throw_no_driver("cuEventCreate"); }
Event::~Event() = default;
void Event::record(void*) {}
bool Event::done() const { return true; }
void Event::wait(std::chrono::steady_clock::time_point) const {}
void stream_wait_event(void*, const Event&) { throw_no_driver("cuStreamWaitEvent"); }
DeviceAllocation::DeviceAllocation(size_t) { throw_no_driver("cuMemAlloc"); }
DeviceAllocation::~DeviceAllocation() = default;
DeviceAllocation::DeviceAllocation(DeviceAllocation&&) noexcept = default;
DeviceAllocation& DeviceAllocation::operator=(DeviceAllocation&&) noexcept = default;
void DeviceAllocation::release() {}
HostRegistration::HostRegistration(void*, size_t) { throw_no_driver("cuMemHostRegister"); }
HostRegistration::~HostRegistration() = default;
uint64_t HostRegistration::device_address(const void*) const { return 0; }

#endif

}  // namespace ccl::cuda
