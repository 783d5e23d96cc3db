// The ib transport's own registrations of user buffers that come without a RegisteredRegion key
// (transport.h: SendRequest::region). An MR over the page-aligned span of the buffer, refcounted
// while messages use it (two messages in the same pages share one); the least recently used
// unused ones are deregistered once more than `max_entries` exist. All are deregistered when the
// cache goes.
//
// Every such cache has one hazard: memory freed and mapped again at the same address keeps the
// old (pinned) pages in a cached MR, so data would silently land in the old pages. Hence the
// transport keeps none unused by default (CCL_IB_REG_CACHE=0: an MR lives as long as its
// messages) and prefers a request's own key (cclCommRegister, cclMemAlloc), which is the safe way
// to register once; CCL_IB_REG_CACHE=N keeps N for jobs whose buffers stay mapped.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "transport/ib/verbs_api.h"

namespace ccl::transport::ib {

// CCL_IB_REG_CACHE: how many unused registrations a transport's cache keeps.
size_t user_buffer_cache_entries();

class IbRegCache {
 public:
  static constexpr size_t kDefaultMaxEntries = 64;
  // Access asked for a message's destination (the peer writes it); a source needs none.
  static constexpr int kRemoteWrite = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

  struct Entry {
    ibv_mr* mr = nullptr;
    uint64_t base = 0;  // page aligned
    uint64_t bytes = 0;
    int access = 0;
    int references = 0;
    uint64_t last_use = 0;
  };

  IbRegCache(const VerbsApi& api, ibv_pd* pd, size_t max_entries = kDefaultMaxEntries);
  ~IbRegCache();
  IbRegCache(const IbRegCache&) = delete;
  IbRegCache& operator=(const IbRegCache&) = delete;

  // An MR covering [addr, addr + len) that allows `access` (0 or kRemoteWrite), referenced until
  // release(). Throws SystemError when the registration fails.
  const Entry* acquire(const void* addr, size_t len, int access);
  void release(const Entry* entry);

  size_t size() const;
  uint64_t hits() const;
  uint64_t misses() const;
  uint64_t evictions() const;

 private:
  ibv_mr* register_span(uint64_t base, uint64_t bytes, int* access);
  void evict_unused();

  const VerbsApi& api_;
  ibv_pd* pd_;
  const size_t max_entries_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Entry>> entries_;  // few: a linear scan is fastest
  uint64_t clock_ = 0;
  uint64_t hits_ = 0, misses_ = 0, evictions_ = 0;
};

}  // namespace ccl::transport::ib
