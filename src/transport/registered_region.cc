#include "transport/registered_region.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "base/error.h"

namespace ccl::transport {

namespace {

// The wire form: a fixed header, then `key_count` fixed-size keys (packed bytes zero padded), all
// little-endian as the machines this runs on. Versioned so that a newer reader can refuse.
constexpr uint32_t kMagic = 0x52474343;  // "CCGR"
constexpr uint16_t kVersion = 1;

struct WireHeader {
  uint32_t magic;
  uint16_t version;
  uint8_t kind;
  uint8_t key_count;
  uint64_t id;
  int32_t owner_pid;
  int32_t owner_rank;
  uint64_t base;
  uint64_t bytes;
};
static_assert(sizeof(WireHeader) == 40);

struct WireKey {
  char transport[TransportKey::kMaxName];
  uint32_t lkey;
  uint32_t rkey;
  uint16_t packed_bytes;
  uint8_t packed[TransportKey::kMaxPacked];
  uint8_t pad[6];
};
static_assert(sizeof(WireKey) == 264);

uint64_t page_size() { return static_cast<uint64_t>(sysconf(_SC_PAGESIZE)); }

}  // namespace

std::string_view TransportKey::name() const {
  return {transport.data(), strnlen(transport.data(), transport.size())};
}

bool RegisteredRegion::covers(const void* ptr, size_t len) const {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  return p >= base && p - base <= bytes && len <= bytes - (p - base);
}

const TransportKey* RegisteredRegion::key_of(std::string_view transport) const {
  for (const TransportKey& k : keys) {
    if (k.name() == transport) return &k;
  }
  return nullptr;
}

TransportKey& RegisteredRegion::add_key(std::string_view transport) {
  if (transport.empty() || transport.size() > TransportKey::kMaxName) {
    throw_error(cclInternalError, "registered region: transport name '%.*s' is not 1 to %zu bytes",
                static_cast<int>(transport.size()), transport.data(), TransportKey::kMaxName);
  }
  if (key_of(transport) != nullptr) {
    throw_error(cclInternalError, "registered region: a second key of transport %.*s",
                static_cast<int>(transport.size()), transport.data());
  }
  if (keys.size() >= kMaxKeys) {
    throw_error(cclInternalError, "registered region: more than %zu transport keys", kMaxKeys);
  }
  TransportKey& k = keys.emplace_back();
  std::copy(transport.begin(), transport.end(), k.transport.begin());
  return k;
}

void page_span(const void* ptr, size_t len, uint64_t* base, uint64_t* bytes) {
  const uint64_t page = page_size();
  const auto p = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(ptr));
  const uint64_t end = p + std::max<uint64_t>(len, 1);
  if (end < p || end + page - 1 < end) {
    throw_error(cclInvalidArgument, "registration of %zu bytes at %p wraps the address space", len,
                ptr);
  }
  *base = p / page * page;
  *bytes = (end + page - 1) / page * page - *base;
}

std::vector<std::byte> serialize(const RegisteredRegion& region) {
  if (region.keys.size() > RegisteredRegion::kMaxKeys) {
    throw_error(cclInternalError, "registered region: %zu keys", region.keys.size());
  }
  WireHeader h{kMagic,
               kVersion,
               static_cast<uint8_t>(region.kind),
               static_cast<uint8_t>(region.keys.size()),
               region.id,
               region.owner_pid,
               region.owner_rank,
               region.base,
               region.bytes};
  std::vector<std::byte> out(sizeof(h) + region.keys.size() * sizeof(WireKey));
  std::memcpy(out.data(), &h, sizeof(h));
  for (size_t i = 0; i < region.keys.size(); ++i) {
    const TransportKey& k = region.keys[i];
    WireKey w{};
    std::copy(k.transport.begin(), k.transport.end(), w.transport);
    w.lkey = k.lkey;
    w.rkey = k.rkey;
    w.packed_bytes = k.packed_bytes;
    std::memcpy(w.packed, k.packed.data(), k.packed.size());
    std::memcpy(out.data() + sizeof(h) + i * sizeof(WireKey), &w, sizeof(w));
  }
  return out;
}

RegisteredRegion deserialize_region(std::span<const std::byte> bytes) {
  WireHeader h;
  if (bytes.size() < sizeof(h)) {
    throw_error(cclInvalidArgument, "registered region: %zu bytes, shorter than its header",
                bytes.size());
  }
  std::memcpy(&h, bytes.data(), sizeof(h));
  if (h.magic != kMagic) throw_error(cclInvalidArgument, "registered region: bad magic");
  if (h.version != kVersion) {
    throw_error(cclInvalidArgument, "registered region: version %u, this reader knows %u",
                h.version, kVersion);
  }
  if (h.kind >= kNumMemoryKinds) {
    throw_error(cclInvalidArgument, "registered region: unknown memory kind %u", h.kind);
  }
  if (h.key_count > RegisteredRegion::kMaxKeys) {
    throw_error(cclInvalidArgument, "registered region: %u keys, at most %zu", h.key_count,
                RegisteredRegion::kMaxKeys);
  }
  if (bytes.size() != sizeof(h) + h.key_count * sizeof(WireKey)) {
    throw_error(cclInvalidArgument, "registered region: %zu bytes for %u keys", bytes.size(),
                h.key_count);
  }
  const uint64_t page = page_size();
  if (h.base % page != 0 || h.bytes % page != 0 || h.bytes == 0 || h.base + h.bytes < h.base) {
    throw_error(cclInvalidArgument,
                "registered region: span [%llu, +%llu) is not whole pages of the address space",
                static_cast<unsigned long long>(h.base), static_cast<unsigned long long>(h.bytes));
  }
  RegisteredRegion r;
  r.id = h.id;
  r.owner_pid = h.owner_pid;
  r.owner_rank = h.owner_rank;
  r.kind = static_cast<MemoryKind>(h.kind);
  r.base = h.base;
  r.bytes = h.bytes;
  for (unsigned i = 0; i < h.key_count; ++i) {
    WireKey w;
    std::memcpy(&w, bytes.data() + sizeof(h) + i * sizeof(WireKey), sizeof(w));
    const size_t name_len = strnlen(w.transport, sizeof(w.transport));
    if (name_len == 0) throw_error(cclInvalidArgument, "registered region: key %u has no name", i);
    if (w.packed_bytes > TransportKey::kMaxPacked) {
      throw_error(cclInvalidArgument, "registered region: key %u packs %u bytes, at most %zu", i,
                  w.packed_bytes, TransportKey::kMaxPacked);
    }
    const std::string_view name(w.transport, name_len);
    if (r.key_of(name) != nullptr) {
      throw_error(cclInvalidArgument, "registered region: two keys of transport %.*s",
                  static_cast<int>(name.size()), name.data());
    }
    TransportKey& k = r.add_key(name);
    k.lkey = w.lkey;
    k.rkey = w.rkey;
    k.packed_bytes = w.packed_bytes;
    std::memcpy(k.packed.data(), w.packed, w.packed_bytes);
  }
  return r;
}

}  // namespace ccl::transport
