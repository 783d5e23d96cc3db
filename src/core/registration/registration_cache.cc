#include "core/registration/registration_cache.h"

#include <unistd.h>

#include "base/error.h"
#include "base/log.h"
#include "cuda/cuda_memory.h"
#include "transport/shm/registered_memory.h"

namespace ccl {

using transport::RegisteredRegion;

namespace {
// cclMemAlloc entries whose allocation may be gone are looked at once there are this many.
constexpr size_t kPruneAbove = 64;
}  // namespace

RegistrationCache::RegistrationCache(int rank, std::vector<transport::Transport*> transports)
    : rank_(rank), transports_(std::move(transports)) {}

RegistrationCache::~RegistrationCache() {
  std::lock_guard lock(mutex_);
  while (!entries_.empty()) drop(entries_.size() - 1);
}

std::unique_ptr<RegisteredRegion> RegistrationCache::make(uint64_t base, uint64_t bytes,
                                                          MemoryKind kind, int dmabuf_fd) {
  auto region = std::make_unique<RegisteredRegion>();
  region->dmabuf_fd = dmabuf_fd;
  region->id = next_id_++;
  region->owner_pid = static_cast<int32_t>(getpid());
  region->owner_rank = rank_;
  region->kind = kind;
  region->base = base;
  region->bytes = bytes;
  size_t done = 0;
  try {
    for (; done < transports_.size(); ++done) transports_[done]->register_memory(*region);
  } catch (...) {
    for (size_t i = 0; i < done; ++i) transports_[i]->deregister_memory(*region);
    throw;
  }
  made_.fetch_add(1);
  CCL_TRACE(kAll, "rank %d: registered [%#llx, +%llu) (%s, %zu transport keys)", rank_,
            static_cast<unsigned long long>(base), static_cast<unsigned long long>(bytes),
            memory_kind_name(kind), region->keys.size());
  return region;
}

std::unique_ptr<RegisteredRegion> RegistrationCache::make_device(const void* ptr, size_t bytes,
                                                                 uint64_t base, uint64_t span) {
  // The pages around the buffer, if they lie inside its allocation: what a NIC can register
  // through a dmabuf (host-page granular). Else no dmabuf, and the transports that need one give
  // the region no key (it is staged through host memory).
  uint64_t alloc_base = 0, alloc_bytes = 0;
  int fd = -1;
  if (cuda::device_allocation(ptr, &alloc_base, &alloc_bytes) && base >= alloc_base &&
      base + span <= alloc_base + alloc_bytes) {
    fd = cuda::export_dmabuf(base, span);
  }
  (void)bytes;
  std::unique_ptr<RegisteredRegion> region;
  try {
    region = make(base, span, MemoryKind::CudaDevice, fd);
  } catch (...) {
    if (fd >= 0) ::close(fd);
    throw;
  }
  // Every transport has registered it (an MR holds the dmabuf itself): the descriptor goes.
  if (fd >= 0) ::close(fd);
  region->dmabuf_fd = -1;
  return region;
}

void RegistrationCache::drop(size_t index) {
  Entry& e = entries_[index];
  for (auto* t : transports_) t->deregister_memory(*e.region);
  if (e.allocation_id == 0) user_count_.fetch_sub(1);
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(index));
}

const RegistrationCache::Entry* RegistrationCache::covering(const void* ptr, size_t bytes) const {
  for (const Entry& e : entries_) {
    if (e.region->covers(ptr, bytes)) return &e;
  }
  return nullptr;
}

const RegisteredRegion* RegistrationCache::acquire(const void* ptr, size_t bytes) {
  if (ptr == nullptr) throw_error(cclInvalidArgument, "cclCommRegister: buff is NULL");
  if (bytes == 0) throw_error(cclInvalidArgument, "cclCommRegister: size is 0");
  std::lock_guard lock(mutex_);
  for (Entry& e : entries_) {
    if (e.allocation_id == 0 && e.region->covers(ptr, bytes)) {
      ++e.references;
      return e.region.get();
    }
  }
  uint64_t base = 0, span = 0;
  transport::page_span(ptr, bytes, &base, &span);
  if (cuda::pointer_kind(ptr) == MemoryKind::CudaDevice) {
    Entry& e = entries_.emplace_back(Entry{make_device(ptr, bytes, base, span), 1, 0});
    user_count_.fetch_add(1);
    return e.region.get();
  }
  transport::shm::RegisteredExtent extent;
  const MemoryKind kind = transport::shm::registered_extent(ptr, bytes, &extent)
                              ? MemoryKind::RegisteredHost
                              : MemoryKind::Host;
  Entry& e = entries_.emplace_back(Entry{make(base, span, kind), 1, 0});
  user_count_.fetch_add(1);
  return e.region.get();
}

void RegistrationCache::release(const void* handle) {
  std::lock_guard lock(mutex_);
  for (size_t i = 0; i < entries_.size(); ++i) {
    Entry& e = entries_[i];
    if (e.region.get() != handle || e.allocation_id != 0) continue;
    if (--e.references == 0) drop(i);
    return;
  }
  throw_error(cclInvalidArgument,
              "cclCommDeregister: handle %p is not a registration of this communicator (never "
              "registered, or deregistered already)",
              handle);
}

const RegisteredRegion* RegistrationCache::find(const void* ptr, size_t bytes) {
  // The common call: no registration and no cclMemAlloc memory anywhere, so no lock.
  const bool any_allocation = transport::shm::any_registered();
  if (user_count_.load(std::memory_order_relaxed) == 0 && !any_allocation) return nullptr;
  if (ptr == nullptr) return nullptr;
  std::lock_guard lock(mutex_);
  for (const Entry& e : entries_) {
    if (e.allocation_id == 0 && e.region->covers(ptr, bytes)) return e.region.get();
  }
  return any_allocation ? find_allocation(ptr, bytes) : nullptr;
}

const RegisteredRegion* RegistrationCache::find_allocation(const void* ptr, size_t bytes) {
  transport::shm::RegisteredExtent extent;
  if (!transport::shm::registered_extent(ptr, bytes, &extent)) return nullptr;
  for (size_t i = 0; i < entries_.size(); ++i) {
    Entry& e = entries_[i];
    if (e.allocation_id == 0 || !e.region->covers(ptr, bytes)) continue;
    if (e.allocation_id == extent.id) return e.region.get();
    drop(i);  // its allocation was freed, and another now lies at the same address
    break;
  }
  if (entries_.size() > kPruneAbove) {
    for (size_t i = entries_.size(); i-- > 0;) {
      transport::shm::RegisteredExtent live;
      const Entry& e = entries_[i];
      if (e.allocation_id != 0 && (!transport::shm::registered_extent(
                                       reinterpret_cast<const void*>(e.region->base), 1, &live) ||
                                   live.id != e.allocation_id)) {
        drop(i);
      }
    }
  }
  const auto base = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(extent.base));
  Entry& e = entries_.emplace_back(
      Entry{make(base, extent.bytes, MemoryKind::RegisteredHost), 0, extent.id});
  return e.region.get();
}

size_t RegistrationCache::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

}  // namespace ccl
