// Registered host memory (cclMemAlloc): allocations that the other ranks of this host can map
// and then read or write directly, so a collective on them may move each byte once. Each is a
// memfd (no name in /dev/shm: it goes with its last mapping, whatever happens to the process)
// that a peer opens through /proc/<pid>/fd/<fd> (same user, as ptrace's rules allow).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

#include "transport/shared_window.h"

namespace ccl::transport::shm {

// The name of the shm transport's key in a RegisteredRegion: the memfd handle (a RemoteRegion)
// of the cclMemAlloc allocation the region lies in.
inline constexpr const char* kShmKeyName = "shm";

// Allocates `bytes` (> 0) of registered memory, page aligned. Throws SystemError on failure.
void* registered_alloc(size_t bytes);
// Frees what registered_alloc returned; InvalidArgument for any other pointer.
void registered_free(void* ptr);
// If [ptr, ptr + bytes) lies inside one allocation, its handle (for a peer's RegisteredMapper).
bool registered_find(const void* ptr, size_t bytes, RemoteRegion* out);

// The allocation [ptr, ptr + bytes) lies in (whole pages), with its number in this process.
struct RegisteredExtent {
  std::byte* base = nullptr;
  size_t bytes = 0;
  uint64_t id = 0;
};
bool registered_extent(const void* ptr, size_t bytes, RegisteredExtent* out);
// The handle of [offset, offset + bytes) of the region `whole` describes, or false if that is
// not inside it.
bool registered_within(const RemoteRegion& whole, size_t offset, size_t bytes, RemoteRegion* out);
// Whether any allocation is alive (no lock): false means no buffer is registered host memory.
bool any_registered();

// A peer's allocations mapped into this process, kept for reuse (bounded: the least recently
// used mapping goes when there are too many). Not thread-safe: one per communicator.
class RegisteredMapper {
 public:
  RegisteredMapper() = default;
  RegisteredMapper(const RegisteredMapper&) = delete;
  RegisteredMapper& operator=(const RegisteredMapper&) = delete;
  ~RegisteredMapper();

  // The address of the region's first byte in this process, or nullptr if it cannot be mapped
  // (its owner `pid` gone or not ours to open, the handle malformed, or `bytes` not inside).
  std::byte* map(int pid, const RemoteRegion& region, size_t bytes);

 private:
  struct Mapping {
    std::byte* base = nullptr;
    size_t bytes = 0;
    uint64_t last_use = 0;
  };
  static constexpr size_t kMaxMappings = 16;
  std::map<std::pair<int, uint64_t>, Mapping> mappings_;  // (pid, allocation id)
  uint64_t uses_ = 0;
};

}  // namespace ccl::transport::shm
