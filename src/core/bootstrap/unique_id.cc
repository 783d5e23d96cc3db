// The cclUniqueId encoding (layout in unique_id.h). magic, version and family are little-endian,
// the port is in network order; every byte not named by the layout must be zero, so that a
// truncated or scribbled id is rejected instead of sending ranks to a wrong address.
#include "core/bootstrap/unique_id.h"

#include <arpa/inet.h>
#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace ccl {

namespace {

constexpr uint32_t kMagic = 0x494c4343;  // the bytes "CCLI" read as a little-endian u32
constexpr uint32_t kVersion = 1;
constexpr size_t kMagicAt = 0, kVersionAt = 4, kFamilyAt = 8, kPortAt = 10, kAddressAt = 12,
                 kSecretAt = 28, kUsedBytes = 44;
static_assert(kUsedBytes <= CCL_UNIQUE_ID_BYTES);

void put_le(uint8_t* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint64_t get_le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace

Secret random_secret() {
  Secret s{};
  size_t got = 0;
  while (got < s.size()) {
    ssize_t n = getrandom(s.data() + got, s.size() - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_system_error(errno, "getrandom");
    }
    got += static_cast<size_t>(n);
  }
  return s;
}

cclUniqueId encode_unique_id(const UniqueIdContents& contents) {
  cclUniqueId id;
  memset(&id, 0, sizeof(id));
  auto* p = reinterpret_cast<uint8_t*>(id.internal);
  const SocketAddress& a = contents.root;
  put_le(p + kMagicAt, kMagic, 4);
  put_le(p + kVersionAt, kVersion, 4);
  put_le(p + kFamilyAt, static_cast<uint16_t>(a.family()), 2);
  uint16_t port_be = htons(a.port());
  memcpy(p + kPortAt, &port_be, 2);
  if (a.family() == AF_INET) {
    memcpy(p + kAddressAt, &reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_addr, 4);
  } else if (a.family() == AF_INET6) {
    memcpy(p + kAddressAt, &reinterpret_cast<const sockaddr_in6*>(&a.storage)->sin6_addr, 16);
  } else {
    throw_error(cclInternalError, "unique id: root address has family %d", a.family());
  }
  memcpy(p + kSecretAt, contents.secret.data(), contents.secret.size());
  return id;
}

UniqueIdContents decode_unique_id(const cclUniqueId& id) {
  const auto* p = reinterpret_cast<const uint8_t*>(id.internal);
  uint32_t magic = static_cast<uint32_t>(get_le(p + kMagicAt, 4));
  if (magic != kMagic) {
    throw_error(cclInvalidArgument,
                "unique id is not valid (wrong magic 0x%08x; was it made by cclGetUniqueId and "
                "copied whole to every rank?)",
                magic);
  }
  uint32_t version = static_cast<uint32_t>(get_le(p + kVersionAt, 4));
  if (version != kVersion) {
    throw_error(cclInvalidArgument,
                "unique id is not valid (version %u, this library understands %u)", version,
                kVersion);
  }
  int family = static_cast<int>(get_le(p + kFamilyAt, 2));
  uint16_t port_be;
  memcpy(&port_be, p + kPortAt, 2);
  uint16_t port = ntohs(port_be);
  size_t address_bytes = family == AF_INET ? 4 : 16;
  if (family != AF_INET && family != AF_INET6) {
    throw_error(cclInvalidArgument, "unique id is not valid (address family %d)", family);
  }
  if (port == 0) throw_error(cclInvalidArgument, "unique id is not valid (port 0)");
  for (size_t i = kAddressAt + address_bytes; i < CCL_UNIQUE_ID_BYTES; ++i) {
    if (i >= kSecretAt && i < kUsedBytes) continue;
    if (p[i] != 0) {
      throw_error(cclInvalidArgument, "unique id is not valid (nonzero padding at byte %zu)", i);
    }
  }
  UniqueIdContents out;
  if (family == AF_INET) {
    auto* v4 = reinterpret_cast<sockaddr_in*>(&out.root.storage);
    v4->sin_family = AF_INET;
    memcpy(&v4->sin_addr, p + kAddressAt, 4);
    out.root.length = sizeof(sockaddr_in);
  } else {
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&out.root.storage);
    v6->sin6_family = AF_INET6;
    memcpy(&v6->sin6_addr, p + kAddressAt, 16);
    out.root.length = sizeof(sockaddr_in6);
  }
  out.root.set_port(port);
  memcpy(out.secret.data(), p + kSecretAt, out.secret.size());
  return out;
}

bool secrets_equal(const Secret& a, const Secret& b) {
  // No early exit: the time taken must not tell an attacker how many leading bytes were right.
  volatile uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = diff | (a[i] ^ b[i]);
  return diff == 0;
}

std::string secret_to_hex(const Secret& s) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size() * 2);
  for (uint8_t byte : s) {
    out.push_back(kDigits[byte >> 4]);
    out.push_back(kDigits[byte & 15]);
  }
  return out;
}

bool secret_from_hex(const std::string& hex, Secret* out) {
  if (hex.size() != out->size() * 2) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  Secret s{};
  for (size_t i = 0; i < s.size(); ++i) {
    int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    s[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  *out = s;
  return true;
}

}  // namespace ccl
