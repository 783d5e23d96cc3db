// What CUDA says about a pointer, and the host-side pieces the CUDA path is made of: a thread's
// current context, pinned host buffers, a stream of ccl's own. Free of CUDA types, so that every
// module may include it; the handles are opaque pointers (CUcontext, CUstream).
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/memory_kind.h"

namespace ccl::cuda {

// CudaDevice for memory CUDA allocated on a device (cuMemAlloc, cudaMalloc, managed memory),
// Host for anything else, and always Host where there is no driver (cuda_driver() is nullptr): a
// host-only process never asks the driver anything. Pinned host memory (cuMemHostAlloc) is Host.
// Costs one cuPointerGetAttribute where a driver is loaded.
MemoryKind pointer_kind(const void* p);

// The allocation (cuMemAlloc, cudaMalloc) device pointer `p` lies in; false where CUDA knows
// none (or without a driver).
bool device_allocation(const void* p, uint64_t* base, uint64_t* bytes);

// A dmabuf file descriptor of device memory [base, base + bytes) (host-page aligned, inside one
// allocation), for a NIC to register (GPUDirect RDMA); -1 where the driver or the GPU gives none
// (CUDA_ERROR_NOT_SUPPORTED: no dmabuf support in the kernel or driver). The caller closes it.
int export_dmabuf(uint64_t base, uint64_t bytes);

// The context a device pointer belongs to (its own, else its device's primary context).
// Throws cclInvalidArgument for a pointer CUDA does not know.
void* context_of(const void* device_ptr);

// Makes `context` current on this thread for the scope, and the previous one again after it
// (ccl's worker threads have none of their own).
class ContextScope {
 public:
  explicit ContextScope(void* context);
  ~ContextScope();
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

 private:
  void* previous_ = nullptr;
  bool changed_ = false;
};

// Page-locked host memory (cuMemHostAlloc, portable and mapped into every context), that copies
// to and from a device run at full speed and without a bounce; grows, never shrinks.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  // At least `bytes` (contents not kept across a growth). Throws cclSystemError when the driver
  // cannot pin that much.
  std::byte* reserve(size_t bytes);
  std::byte* data() const { return data_; }
  // The address of data() as device code sees it (cuMemHostGetDevicePointer).
  uint64_t device_address() const;
  // Forgets the memory without freeing it, for memory the GPU may still read.
  void leak() {
    data_ = nullptr;
    capacity_ = 0;
  }

 private:
  std::byte* data_ = nullptr;
  size_t capacity_ = 0;
};

// A CUDA stream of ccl's own in `context`: a non-blocking stream, so that it never waits behind
// the legacy default stream. It must not: a ccl stream made from the NULL stream holds the legacy
// stream until its operation ends (stream_order.h), and any legacy-stream work waits for every
// blocking stream's, so a blocking stream of ccl's own would wait for the operation it serves.
// What must come before its copies is ordered explicitly (order_after_legacy_stream).
class OwnStream {
 public:
  OwnStream() = default;
  ~OwnStream();
  OwnStream(const OwnStream&) = delete;
  OwnStream& operator=(const OwnStream&) = delete;

  // The stream of `context`, made on first use (or again when the context changes); that context
  // must be current.
  void* get(void* context);
  // cuMemcpyAsync on it (any direction, by unified addressing), then waits for it.
  void copy(void* context, void* dst, const void* src, size_t bytes);
  // cuMemcpyAsync on it, not waited for (a peer's buffer opened through IPC is an address too).
  void copy_async(void* context, void* dst, const void* src, size_t bytes);
  // Waits until everything queued on it is done.
  void synchronize(void* context);

 private:
  void* context_ = nullptr;
  void* stream_ = nullptr;
};

// For a blocking call on device buffers (no ccl stream made from a CUDA stream): waits until the
// CUDA work queued so far on the legacy default stream, and with it (the legacy stream's rule)
// on every blocking stream of the context current, is done, so that the call reads what that work
// wrote. An event recorded on the legacy stream, polled; bounded by CCL_TIMEOUT (cclTimeout past
// it). Does nothing inside an operation of a ccl stream made from a CUDA stream
// (OrderedByCudaStream): its "before" event ordered it already, and the legacy stream may be the
// one that stream holds until the operation ends.
void order_after_legacy_stream();

// The same order without a host wait: work queued on `stream` (of the current context) from now
// on waits for the work queued so far on the legacy stream (an event and cuStreamWaitEvent).
// Nothing inside an OrderedByCudaStream, as above.
void order_after_legacy_stream_on(void* stream);

// Marks the calling thread as running an operation ordered by a CUDA stream, while it lives.
class OrderedByCudaStream {
 public:
  OrderedByCudaStream();
  ~OrderedByCudaStream();
  OrderedByCudaStream(const OrderedByCudaStream&) = delete;
  OrderedByCudaStream& operator=(const OrderedByCudaStream&) = delete;

 private:
  bool outer_;
};

}  // namespace ccl::cuda
