// A registered memory region (DESIGN.md "Registration"): what a rank and its peers need to reach
// [base, base + bytes) of the owner's memory through each transport of a communicator. One
// concept for every medium: each transport adds its own key in Transport::register_memory — shm
// the memfd of a cclMemAlloc allocation (so a peer maps it), InfiniBand an MR's lkey/rkey over the
// page-aligned span, UCX a packed rkey, the CUDA path an IPC handle. The communicator's
// registration cache (core/registration/registration_cache.h) makes one per region and shares it, refcounted;
// send and receive requests carry it (transport.h).
//
// It serializes to bytes (to travel in a message or through the store) and back; the reader
// checks every field, since the bytes come from another process.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "base/memory_kind.h"

namespace ccl::transport {

struct TransportKey {
  // A UCX rkey packed for tcp, posix, sysv and cma is well under 200 bytes; a CUDA IPC memory
  // handle is 64 bytes.
  static constexpr size_t kMaxPacked = 240;
  static constexpr size_t kMaxName = 8;

  std::array<char, kMaxName> transport{};  // the transport's name(), NUL padded ("shm", "ib")
  uint32_t lkey = 0;                       // InfiniBand memory-region keys; 0 elsewhere
  uint32_t rkey = 0;
  uint16_t packed_bytes = 0;  // bytes of `packed` in use (a packed rkey, a handle)
  std::array<std::byte, kMaxPacked> packed{};

  std::string_view name() const;
  std::span<const std::byte> packed_view() const { return {packed.data(), packed_bytes}; }
};

struct RegisteredRegion {
  static constexpr size_t kMaxKeys = 4;  // one per transport of a communicator

  uint64_t id = 0;  // unique per registration within its owner process
  int32_t owner_pid = 0;
  int32_t owner_rank = -1;
  MemoryKind kind = MemoryKind::Host;
  uint64_t base = 0;   // page aligned, in the owner's address space
  uint64_t bytes = 0;  // a whole number of pages
  std::vector<TransportKey> keys;
  // CUDA device memory: a dmabuf file descriptor of [base, base + bytes), open while the
  // transports register the region (GPUDirect RDMA: ibv_reg_dmabuf_mr), -1 where the driver gave
  // none. Local to the owner: not serialized.
  int dmabuf_fd = -1;

  bool covers(const void* ptr, size_t len) const;
  size_t offset_of(const void* ptr) const { return reinterpret_cast<uintptr_t>(ptr) - base; }
  // The key `transport` added, or nullptr.
  const TransportKey* key_of(std::string_view transport) const;
  // A new key for `transport`; throws InternalError for a second key of one transport, a name
  // longer than TransportKey::kMaxName or more than kMaxKeys keys.
  TransportKey& add_key(std::string_view transport);
};

// The page-aligned span [*base, *base + *bytes) around [ptr, ptr + len) (len 0: one byte).
// Throws InvalidArgument when it would wrap the address space.
void page_span(const void* ptr, size_t len, uint64_t* base, uint64_t* bytes);

std::vector<std::byte> serialize(const RegisteredRegion& region);
// Throws InvalidArgument ("registered region: ...") for bytes that are not a region serialize()
// wrote: short, a wrong magic or version, an unknown kind, unaligned or wrapping spans, a key
// whose sizes are out of range, trailing bytes.
RegisteredRegion deserialize_region(std::span<const std::byte> bytes);

}  // namespace ccl::transport
