#include "transport/ib/ib_reg_cache.h"

#include <cerrno>
#include <cstring>

#include "base/config.h"
#include "base/error.h"
#include "base/log.h"
#include "transport/registered_region.h"

namespace ccl::transport::ib {

size_t user_buffer_cache_entries() {
  int64_t n = config_int("CCL_IB_REG_CACHE");
  if (n < 0 || n > 65536) {
    throw_error(cclInvalidUsage, "CCL_IB_REG_CACHE=%lld: must be 0..65536",
                static_cast<long long>(n));
  }
  return static_cast<size_t>(n);
}

IbRegCache::IbRegCache(const VerbsApi& api, ibv_pd* pd, size_t max_entries)
    : api_(api), pd_(pd), max_entries_(max_entries) {}

IbRegCache::~IbRegCache() {
  for (auto& e : entries_) {
    if (e->references > 0) {
      CCL_WARN(kNet, "ib: registration of %#llx (+%llu) still in use at teardown",
               static_cast<unsigned long long>(e->base), static_cast<unsigned long long>(e->bytes));
    }
    api_.dereg_mr(e->mr);
  }
}

ibv_mr* IbRegCache::register_span(uint64_t base, uint64_t bytes, int* access) {
  // Ask for remote write even for a source, so one MR serves both directions; memory that may
  // not be written (a const buffer in read-only pages) is then registered for reading only.
  ibv_mr* mr = api_.reg_mr(pd_, reinterpret_cast<void*>(base), bytes, kRemoteWrite);
  if (mr != nullptr) {
    *access = kRemoteWrite;
    return mr;
  }
  const int err = errno;
  if (*access == 0 && (err == EFAULT || err == EACCES || err == EPERM)) {
    mr = api_.reg_mr(pd_, reinterpret_cast<void*>(base), bytes, 0);
    if (mr != nullptr) return mr;
  }
  throw_system_error(err, "ib: cannot register %llu bytes at %#llx",
                     static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(base));
}

const IbRegCache::Entry* IbRegCache::acquire(const void* addr, size_t len, int access) {
  uint64_t base = 0, bytes = 0;
  page_span(addr, len, &base, &bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  ++clock_;
  for (auto& e : entries_) {
    if (e->base <= base && base + bytes <= e->base + e->bytes && (e->access & access) == access) {
      ++e->references;
      e->last_use = clock_;
      ++hits_;
      return e.get();
    }
  }
  ++misses_;
  int got = access;
  ibv_mr* mr = register_span(base, bytes, &got);
  auto entry = std::make_unique<Entry>();
  entry->mr = mr;
  entry->base = base;
  entry->bytes = bytes;
  entry->access = got;
  entry->references = 1;
  entry->last_use = clock_;
  entries_.push_back(std::move(entry));
  const Entry* result = entries_.back().get();
  evict_unused();
  return result;
}

void IbRegCache::release(const Entry* entry) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& e : entries_) {
    if (e.get() == entry) {
      if (e->references <= 0) throw_error(cclInternalError, "ib: registration released twice");
      --e->references;
      evict_unused();
      return;
    }
  }
  throw_error(cclInternalError, "ib: release of a registration the cache does not hold");
}

void IbRegCache::evict_unused() {
  while (entries_.size() > max_entries_) {
    size_t victim = entries_.size();
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (entries_[i]->references > 0) continue;
      if (victim == entries_.size() || entries_[i]->last_use < entries_[victim]->last_use)
        victim = i;
    }
    if (victim == entries_.size()) return;  // all in use: over the bound until some are let go
    api_.dereg_mr(entries_[victim]->mr);
    entries_.erase(entries_.begin() + static_cast<long>(victim));
    ++evictions_;
  }
}

size_t IbRegCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}
uint64_t IbRegCache::hits() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return hits_;
}
uint64_t IbRegCache::misses() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return misses_;
}
uint64_t IbRegCache::evictions() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return evictions_;
}

}  // namespace ccl::transport::ib
