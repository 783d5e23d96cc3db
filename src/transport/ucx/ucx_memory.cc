#include "transport/ucx/ucx_memory.h"

#include <cstring>

#include "base/error.h"
#include "base/log.h"
#include "transport/ucx/ucx_worker.h"

namespace ccl::transport::ucx {

MemoryRegistry::~MemoryRegistry() {
  for (auto& [id, handle] : handles_) ucp_mem_unmap(context_, handle);
}

size_t MemoryRegistry::mapped() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return handles_.size();
}

void MemoryRegistry::add(RegisteredRegion& region) {
  if (!is_host_memory(region.kind) || region.bytes == 0) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (handles_.count(region.id)) {
      throw_error(cclInternalError, "ucx: region %llu registered twice",
                  static_cast<unsigned long long>(region.id));
    }
  }
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  params.address = reinterpret_cast<void*>(static_cast<uintptr_t>(region.base));
  params.length = region.bytes;
  ucp_mem_h handle = nullptr;
  ucs_status_t status = ucp_mem_map(context_, &params, &handle);
  if (status != UCS_OK) {
    throw_error(cclSystemError, "ucx: registering %llu bytes at 0x%llx: %s",
                static_cast<unsigned long long>(region.bytes),
                static_cast<unsigned long long>(region.base), ucs_status_string(status));
  }
  void* packed = nullptr;
  size_t packed_size = 0;
  status = ucp_rkey_pack(context_, handle, &packed, &packed_size);
  if (status != UCS_OK || packed_size > TransportKey::kMaxPacked) {
    if (status == UCS_OK) ucp_rkey_buffer_release(packed);
    ucp_mem_unmap(context_, handle);
    if (status != UCS_OK) {
      throw_error(cclSystemError, "%s", ucx_status_text("ucp_rkey_pack", status).c_str());
    }
    CCL_INFO(kNet,
             "ucx: a packed rkey of %zu bytes does not fit a region key (%zu): region %llu "
             "goes by tagged messages",
             packed_size, TransportKey::kMaxPacked, static_cast<unsigned long long>(region.id));
    return;
  }
  try {
    TransportKey& key = region.add_key(kKeyName);
    std::memcpy(key.packed.data(), packed, packed_size);
    key.packed_bytes = static_cast<uint16_t>(packed_size);
  } catch (...) {
    ucp_rkey_buffer_release(packed);
    ucp_mem_unmap(context_, handle);
    throw;
  }
  ucp_rkey_buffer_release(packed);
  std::lock_guard<std::mutex> lock(mutex_);
  handles_.emplace(region.id, handle);
}

void MemoryRegistry::remove(const RegisteredRegion& region) {
  ucp_mem_h handle = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = handles_.find(region.id);
    if (it == handles_.end()) return;
    handle = it->second;
    handles_.erase(it);
  }
  const ucs_status_t status = ucp_mem_unmap(context_, handle);
  if (status != UCS_OK) {
    CCL_WARN(kNet, "%s", ucx_status_text("ucp_mem_unmap", status).c_str());
  }
}

}  // namespace ccl::transport::ucx
