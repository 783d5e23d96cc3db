// A peer's remote keys, unpacked once per remote region: ucp_ep_rkey_unpack costs a parse and an
// allocation per transport in the key, while a registered buffer is typically the destination of
// every message of many operations.
//
// Bounded (kCapacity, least recently used first out): a peer's registrations come and go, and an
// rkey whose region the peer has since unmapped is only dropped, never used (an offer always
// carries the packed key, so a miss costs one unpack). A key is held by the put that uses it from
// get() until release(): a held key is never evicted (the cache then grows past kCapacity until
// one is released). Region ids are unique per owner process and never reused, so a cached key
// cannot stand for another region.
#pragma once

#include <ucp/api/ucp.h>

#include <cstdint>
#include <deque>
#include <span>

namespace ccl::transport::ucx {

class RkeyCache {
 public:
  static constexpr size_t kCapacity = 64;

  RkeyCache() = default;
  ~RkeyCache() { clear(); }
  RkeyCache(const RkeyCache&) = delete;
  RkeyCache& operator=(const RkeyCache&) = delete;

  // The key of the peer's region `region_id`, unpacking `packed` for `ep` on a miss, held until
  // release(region_id). Throws RemoteError naming `peer` when UCX cannot unpack it.
  ucp_rkey_h get(ucp_ep_h ep, int peer, uint64_t region_id, std::span<const std::byte> packed);
  // The put that held the key of `region_id` is complete.
  void release(uint64_t region_id);
  // Destroys every key, held or not; after the endpoint is closed, before the worker goes.
  void clear();
  size_t size() const { return entries_.size(); }
  size_t unpacks() const { return unpacks_; }

 private:
  struct Entry {
    uint64_t region_id;
    ucp_rkey_h rkey;
    size_t users;  // puts holding it
  };
  std::deque<Entry> entries_;  // least recently used first
  size_t unpacks_ = 0;
};

}  // namespace ccl::transport::ucx
