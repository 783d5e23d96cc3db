// A communicator's registrations (DESIGN.md "Registration"): one RegisteredRegion per registered
// span of memory, shared by every call and every cclCommRegister that falls inside it, made by
// asking each transport of the communicator for its key (Transport::register_memory) and undone
// (deregister_memory) when its last user lets go. Page-aligned spans and a refcount, as an
// InfiniBand registration cache needs (an MR pins whole pages, and registering costs tens of
// microseconds: once per buffer, not per call).
//
// CUDA device buffers given to cclCommRegister become regions of kind CudaDevice, with a dmabuf
// of their pages for the transports to register (ib: ibv_reg_dmabuf_mr, GPUDirect RDMA).
//
// Two sources: cclCommRegister (the user's handle holds a reference until cclCommDeregister),
// and cclMemAlloc memory, registered the first time a call uses it and kept while the allocation
// lives (a later call finds it; a freed allocation's entry is dropped when next looked up or
// when the cache is pruned). Thread-safe: cclCommRegister may come from another thread while an
// operation runs.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "transport/registered_region.h"
#include "transport/transport.h"

namespace ccl {

class RegistrationCache {
 public:
  // `transports`: those of the communicator, which outlive the cache.
  RegistrationCache(int rank, std::vector<transport::Transport*> transports);
  ~RegistrationCache();
  RegistrationCache(const RegistrationCache&) = delete;
  RegistrationCache& operator=(const RegistrationCache&) = delete;

  // cclCommRegister: a reference to a registration covering [ptr, ptr + bytes) (an existing one
  // that covers it, else a new one over the enclosing pages). The pointer is the handle.
  const transport::RegisteredRegion* acquire(const void* ptr, size_t bytes);
  // cclCommDeregister: drops the reference `handle` holds. InvalidArgument for a pointer that
  // is not a live handle of this cache (never registered, or already deregistered).
  void release(const void* handle);

  // Per call: the registration covering [ptr, ptr + bytes), or nullptr if none does. cclMemAlloc
  // memory is registered here on first use. The region stays valid until the end of the call
  // (a deregistration waits for no call: the user must not deregister memory a call uses, as
  // with NCCL).
  const transport::RegisteredRegion* find(const void* ptr, size_t bytes);

  size_t size() const;  // live registrations
  // How many times the transports were asked to register (for tests: once per region).
  uint64_t registrations_made() const { return made_.load(); }

 private:
  struct Entry {
    std::unique_ptr<transport::RegisteredRegion> region;
    int references = 0;          // cclCommRegister handles
    uint64_t allocation_id = 0;  // cclMemAlloc allocation it covers (0: a user registration)
  };

  std::unique_ptr<transport::RegisteredRegion> make(uint64_t base, uint64_t bytes, MemoryKind kind,
                                                    int dmabuf_fd = -1);
  // CUDA device memory (cclCommRegister of a device buffer): its pages, with a dmabuf for the
  // transports that register device memory (ib: GPUDirect RDMA) where the driver gives one.
  std::unique_ptr<transport::RegisteredRegion> make_device(const void* ptr, size_t bytes,
                                                           uint64_t base, uint64_t span);
  void drop(size_t index);
  const Entry* covering(const void* ptr, size_t bytes) const;
  const transport::RegisteredRegion* find_allocation(const void* ptr, size_t bytes);

  const int rank_;
  const std::vector<transport::Transport*> transports_;
  mutable std::mutex mutex_;
  std::vector<Entry> entries_;         // few: a linear scan beats a tree here
  std::atomic<size_t> user_count_{0};  // entries from cclCommRegister: 0 skips the lock per call
  std::atomic<uint64_t> made_{0};
  uint64_t next_id_ = 1;
};

}  // namespace ccl
