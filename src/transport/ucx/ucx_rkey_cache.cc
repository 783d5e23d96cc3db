#include "transport/ucx/ucx_rkey_cache.h"

#include "base/error.h"

namespace ccl::transport::ucx {

ucp_rkey_h RkeyCache::get(ucp_ep_h ep, int peer, uint64_t region_id,
                          std::span<const std::byte> packed) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->region_id != region_id) continue;
    Entry entry = *it;
    ++entry.users;
    entries_.erase(it);
    entries_.push_back(entry);  // the most recently used
    return entry.rkey;
  }
  ucp_rkey_h rkey = nullptr;
  const ucs_status_t status = ucp_ep_rkey_unpack(ep, packed.data(), &rkey);
  if (status != UCS_OK) {
    throw_peer_error(cclRemoteError, peer, "ucx: cannot unpack the remote key of rank %d: %s", peer,
                     ucs_status_string(status));
  }
  ++unpacks_;
  if (entries_.size() >= kCapacity) {
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->users > 0) continue;
      ucp_rkey_destroy(it->rkey);
      entries_.erase(it);
      break;
    }
  }
  entries_.push_back(Entry{region_id, rkey, 1});
  return rkey;
}

void RkeyCache::release(uint64_t region_id) {
  for (Entry& entry : entries_) {
    if (entry.region_id == region_id && entry.users > 0) {
      --entry.users;
      return;
    }
  }
}

void RkeyCache::clear() {
  for (Entry& entry : entries_) ucp_rkey_destroy(entry.rkey);
  entries_.clear();
}

}  // namespace ccl::transport::ucx
