#include "transport/shm/registered_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "base/error.h"
#include "base/log.h"

namespace ccl::transport::shm {

namespace {

// What a RemoteRegion holds (words of shared_window.h's opaque handle).
struct Handle {
  uint64_t id;           // this process's allocation number
  uint64_t fd;           // the memfd, in the owner's fd table
  uint64_t offset;       // of the region within the allocation
  uint64_t alloc_bytes;  // the whole allocation (its mapping size)
};
static_assert(sizeof(Handle) == sizeof(RemoteRegion));

struct Allocation {
  size_t bytes = 0;  // mapped size (a whole number of pages)
  int fd = -1;
  uint64_t id = 0;
};

// Allocations alive: lets a call whose buffers cannot be registered skip the registry's lock.
std::atomic<uint64_t> live_allocations{0};

// Every allocation of this process, by base address.
struct Registry {
  std::mutex mutex;
  std::map<uintptr_t, Allocation> by_base;
  uint64_t next_id = 1;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: frees may come from exit handlers
  return *r;
}

size_t page_round(size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

}  // namespace

void* registered_alloc(size_t bytes) {
  if (bytes == 0) throw_error(cclInvalidArgument, "cclMemAlloc: size is 0");
  const size_t mapped = page_round(bytes);
  if (mapped < bytes) throw_error(cclInvalidArgument, "cclMemAlloc: size %zu is too large", bytes);
  int fd = memfd_create("ccl-mem", MFD_CLOEXEC);
  if (fd < 0) throw_system_error(errno, "cclMemAlloc: memfd_create");
  if (ftruncate(fd, static_cast<off_t>(mapped)) != 0) {
    int e = errno;
    close(fd);
    throw_system_error(e, "cclMemAlloc: ftruncate to %zu bytes", mapped);
  }
  void* base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    int e = errno;
    close(fd);
    throw_system_error(e, "cclMemAlloc: mmap of %zu bytes", mapped);
  }
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.by_base[reinterpret_cast<uintptr_t>(base)] = Allocation{mapped, fd, r.next_id++};
  live_allocations.fetch_add(1, std::memory_order_relaxed);
  return base;
}

void registered_free(void* ptr) {
  Registry& r = registry();
  Allocation a;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.by_base.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == r.by_base.end()) {
      throw_error(cclInvalidArgument, "cclMemFree: %p was not returned by cclMemAlloc", ptr);
    }
    a = it->second;
    r.by_base.erase(it);
    live_allocations.fetch_sub(1, std::memory_order_relaxed);
  }
  munmap(ptr, a.bytes);
  close(a.fd);
}

bool any_registered() { return live_allocations.load(std::memory_order_relaxed) != 0; }

namespace {
// The allocation [p, p + bytes) lies in, as (base, allocation), or nullptr. The caller holds
// r.mutex.
const std::pair<const uintptr_t, Allocation>* allocation_of(const Registry& r, uintptr_t p,
                                                            size_t bytes) {
  auto it = r.by_base.upper_bound(p);
  if (it == r.by_base.begin()) return nullptr;
  --it;
  const Allocation& a = it->second;
  if (p - it->first > a.bytes || bytes > a.bytes - (p - it->first)) return nullptr;
  return &*it;
}
}  // namespace

bool registered_extent(const void* ptr, size_t bytes, RegisteredExtent* out) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const auto* found = allocation_of(r, reinterpret_cast<uintptr_t>(ptr), bytes);
  if (found == nullptr) return false;
  out->base = reinterpret_cast<std::byte*>(found->first);
  out->bytes = found->second.bytes;
  out->id = found->second.id;
  return true;
}

bool registered_find(const void* ptr, size_t bytes, RemoteRegion* out) {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const auto* found = allocation_of(r, p, bytes);
  if (found == nullptr) return false;
  const Allocation& a = found->second;
  Handle h{a.id, static_cast<uint64_t>(a.fd), p - found->first, a.bytes};
  memcpy(out, &h, sizeof(h));
  return true;
}

bool registered_within(const RemoteRegion& whole, size_t offset, size_t bytes, RemoteRegion* out) {
  Handle h;
  memcpy(&h, &whole, sizeof(h));
  if (h.offset > h.alloc_bytes || offset > h.alloc_bytes - h.offset ||
      bytes > h.alloc_bytes - h.offset - offset) {
    return false;
  }
  h.offset += offset;
  memcpy(out, &h, sizeof(h));
  return true;
}

RegisteredMapper::~RegisteredMapper() {
  for (auto& [key, m] : mappings_) munmap(m.base, m.bytes);
}

std::byte* RegisteredMapper::map(int pid, const RemoteRegion& region, size_t bytes) {
  Handle h;
  memcpy(&h, &region, sizeof(h));
  if (h.offset > h.alloc_bytes || bytes > h.alloc_bytes - h.offset || h.fd > INT32_MAX) {
    return nullptr;
  }
  auto key = std::make_pair(pid, h.id);
  auto it = mappings_.find(key);
  if (it == mappings_.end() || it->second.bytes != h.alloc_bytes) {
    if (it != mappings_.end()) {
      munmap(it->second.base, it->second.bytes);
      mappings_.erase(it);
    }
    const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(h.fd);
    int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      CCL_INFO(kShm, "registered memory: cannot open %s: %s", path.c_str(), strerror(errno));
      return nullptr;
    }
    struct stat st;
    void* base = MAP_FAILED;
    // The owner published this handle for a collective that is running, so the fd is that
    // allocation; the size check guards against a handle that does not describe it.
    if (fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) == h.alloc_bytes) {
      // Populated now: a collective that touches a fresh part of a peer's buffer would otherwise
      // take a page fault per page, every time, in the timed path.
      base = mmap(nullptr, h.alloc_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    }
    close(fd);
    if (base == MAP_FAILED) return nullptr;
    if (mappings_.size() >= kMaxMappings) {
      auto oldest = mappings_.begin();
      for (auto i = mappings_.begin(); i != mappings_.end(); ++i) {
        if (i->second.last_use < oldest->second.last_use) oldest = i;
      }
      munmap(oldest->second.base, oldest->second.bytes);
      mappings_.erase(oldest);
    }
    it = mappings_.emplace(key, Mapping{static_cast<std::byte*>(base), h.alloc_bytes, 0}).first;
  }
  it->second.last_use = ++uses_;
  return it->second.base + h.offset;
}

}  // namespace ccl::transport::shm
