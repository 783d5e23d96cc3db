// The cclUniqueId: where the rendezvous listens, and a 128-bit random secret that every
// connection to it must present. Layout (128 bytes): magic u32, version u32, address family u16,
// port u16 (network order), 16 address bytes, 16 secret bytes, zero padding.
#pragma once

#include <array>
#include <cstdint>

#include "ccl/ccl.h"
#include "core/bootstrap/socket.h"

namespace ccl {

using Secret = std::array<uint8_t, 16>;

struct UniqueIdContents {
  SocketAddress root;
  Secret secret{};
};

Secret random_secret();  // from getrandom(); throws SystemError
cclUniqueId encode_unique_id(const UniqueIdContents& contents);
UniqueIdContents decode_unique_id(const cclUniqueId& id);  // throws InvalidArgument if malformed
bool secrets_equal(const Secret& a, const Secret& b);      // constant time
std::string secret_to_hex(const Secret& s);
bool secret_from_hex(const std::string& hex, Secret* out);

}  // namespace ccl
