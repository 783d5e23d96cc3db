// Registered regions for UCX (registered_region.h): ucp_mem_map over the region's pages and its
// packed rkey as the region's "ucx" key, which a receiver offers its sender so that the sender
// puts the message straight into the destination (ucx_connection.h, the RMA handshake).
//
// Called from the communicator's registration cache, possibly on another thread than the one
// running an operation: it touches only the context (made with mt_workers_shared) and its own
// map, under a mutex.
#pragma once

#include <ucp/api/ucp.h>

#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "transport/registered_region.h"

namespace ccl::transport::ucx {

inline constexpr const char* kKeyName = "ucx";

class MemoryRegistry {
 public:
  explicit MemoryRegistry(ucp_context_h context) : context_(context) {}
  ~MemoryRegistry();  // unmaps whatever was not deregistered
  MemoryRegistry(const MemoryRegistry&) = delete;
  MemoryRegistry& operator=(const MemoryRegistry&) = delete;

  // Maps host memory and adds the "ucx" key; other kinds of memory get no key (this transport
  // moves host memory only). Throws SystemError when UCX refuses to map, InternalError for a
  // region registered twice. A packed rkey over TransportKey::kMaxPacked leaves the region
  // without a key (its messages then go by tagged chunks).
  void add(RegisteredRegion& region);
  // Unmaps; a region this registry never mapped is ignored.
  void remove(const RegisteredRegion& region);

  size_t mapped() const;

 private:
  ucp_context_h context_;
  mutable std::mutex mutex_;
  std::unordered_map<uint64_t, ucp_mem_h> handles_;  // by RegisteredRegion::id
};

}  // namespace ccl::transport::ucx
