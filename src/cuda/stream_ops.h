// What the device programs (core/device) are made of, on the driver: waits and writes of 32-bit
// words queued on a stream (stream memory operations, batched), copies queued on a stream,
// events, the order of one stream after another, capture state, device allocations and host
// memory registered for the device. Free of CUDA types (opaque handles), as cuda_memory.h; the
// caller has the stream's context current (ContextScope). Every call throws
// cclUnhandledCudaError "<what>: CUDA_ERROR_...: <text>" when the driver refuses, or
// cclInvalidUsage where there is no driver.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>

namespace ccl::cuda {

// The calling thread's current context; nullptr where there is no driver or none is current.
void* current_context();
// The context `stream` belongs to (the current one for the legacy stream, NULL).
void* stream_context(void* stream);

// Whether work queued on `stream` now would be captured into a graph instead of running.
bool is_capturing(void* stream);

// Stream memory operations on 32-bit words, collected and queued in order as few driver calls
// as possible (cuStreamBatchMemOp, at most kMaxBatch a call): a wait until (*word & mask) != 0
// (CU_STREAM_WAIT_VALUE_AND), a write of a value (with the fence before it that makes the
// stream's earlier writes visible to whoever sees the word).
class MemOps {
 public:
  static constexpr size_t kMaxBatch = 256;
  void wait(uint64_t device_address, uint32_t mask);
  void write(uint64_t device_address, uint32_t value);
  bool empty() const { return count_ == 0; }
  bool full() const { return count_ == kMaxBatch; }
  // Queues what was collected on `stream` and starts a new batch.
  void flush(void* stream);
  // The same, false where the driver refuses stream memory operations (CUDA_ERROR_NOT_SUPPORTED).
  bool flush_unless_refused(void* stream);

  struct Op {
    bool wait;
    uint64_t address;
    uint32_t value;
  };

 private:
  Op ops_[kMaxBatch];
  size_t count_ = 0;
};

// Whether the driver takes stream memory operations on `stream` (some refuse them:
// CUDA_ERROR_NOT_SUPPORTED): queues a write of 1 to the device word at `device_address` and a
// wait for it (MemOps), which pass at once. Throws for any other error.
bool takes_mem_ops(void* stream, uint64_t device_address);

// cuMemcpyAsync on `stream` (any direction, by unified addressing).
void copy_on(void* stream, void* dst, const void* src, size_t bytes);

// An event without timing, made in the current context and destroyed in it.
class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void* handle() const { return event_; }
  void record(void* stream);
  // cuEventQuery: true once what the last record marks is done; throws if it failed.
  bool done() const;
  // Polls until done (yielding, then 20 us sleeps); cclTimeout at `deadline`. For the host
  // path's own copies, which the host waits for anyway.
  void wait(std::chrono::steady_clock::time_point deadline) const;

 private:
  void* event_ = nullptr;
  [[maybe_unused]] void* context_ = nullptr;  // (unread in a build without CUDA headers)
};

// Work queued on `waiter` after this waits for what `event`'s last record marks (no host
// thread waits).
void stream_wait_event(void* waiter, const Event& event);

// Device memory of the current context (cuMemAlloc), freed in that context.
class DeviceAllocation {
 public:
  DeviceAllocation() = default;
  explicit DeviceAllocation(size_t bytes);
  ~DeviceAllocation();
  DeviceAllocation(DeviceAllocation&& other) noexcept;
  DeviceAllocation& operator=(DeviceAllocation&& other) noexcept;
  void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void release();
  void* data_ = nullptr;
  size_t size_ = 0;
  [[maybe_unused]] void* context_ = nullptr;  // (unread in a build without CUDA headers)
};

// Host memory the caller owns (a shared-memory mapping) registered for every context
// (cuMemHostRegister, portable and device-mapped); unregistered at destruction.
class HostRegistration {
 public:
  HostRegistration() = default;
  HostRegistration(void* data, size_t bytes);
  ~HostRegistration();
  HostRegistration(const HostRegistration&) = delete;
  HostRegistration& operator=(const HostRegistration&) = delete;
  // The address of `host` (inside the registration) as device code and memory operations see it.
  uint64_t device_address(const void* host) const;

 private:
  // (unread in a build without CUDA headers)
  [[maybe_unused]] void* data_ = nullptr;
  [[maybe_unused]] uint64_t device_ = 0;
};

}  // namespace ccl::cuda
