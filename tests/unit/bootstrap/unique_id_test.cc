// cclUniqueId encoding: round trips and rejection of damaged ids; the secret helpers.
#include "core/bootstrap/unique_id.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "base/error.h"

namespace ccl {
namespace {

Secret sample_secret() {
  Secret s;
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(0xa0 + i);
  return s;
}

TEST(UniqueId, RoundTripsIpv4AndIpv6) {
  for (const char* addr : {"192.0.2.17:29500", "[fd00::2]:65535", "127.0.0.1:1"}) {
    UniqueIdContents in;
    in.root = SocketAddress::parse(addr);
    in.secret = sample_secret();
    cclUniqueId id = encode_unique_id(in);
    UniqueIdContents out = decode_unique_id(id);
    EXPECT_EQ(out.root.to_string(), addr);
    EXPECT_EQ(out.root.length, in.root.length);
    EXPECT_EQ(out.secret, in.secret);
  }
}

TEST(UniqueId, LayoutIsAsDocumented) {
  UniqueIdContents in;
  in.root = SocketAddress::parse("10.1.2.3:4660");  // port 0x1234
  in.secret = sample_secret();
  cclUniqueId id = encode_unique_id(in);
  const auto* p = reinterpret_cast<const uint8_t*>(id.internal);
  EXPECT_EQ(p[8] | p[9] << 8, AF_INET);
  EXPECT_EQ(p[10], 0x12);  // network order
  EXPECT_EQ(p[11], 0x34);
  EXPECT_EQ(p[12], 10);
  EXPECT_EQ(p[15], 3);
  EXPECT_EQ(memcmp(p + 28, in.secret.data(), 16), 0);
  for (size_t i = 44; i < CCL_UNIQUE_ID_BYTES; ++i) EXPECT_EQ(p[i], 0) << i;
}

void expect_rejected(const cclUniqueId& id, const char* what) {
  try {
    decode_unique_id(id);
    ADD_FAILURE() << "accepted an id with " << what;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclInvalidArgument) << what;
    EXPECT_NE(std::string(e.what()).find("unique id is not valid"), std::string::npos) << e.what();
  }
}

TEST(UniqueId, RejectsDamagedIds) {
  UniqueIdContents in;
  in.root = SocketAddress::parse("10.1.2.3:4660");
  in.secret = sample_secret();
  const cclUniqueId good = encode_unique_id(in);
  auto damaged = [&](size_t at, uint8_t value) {
    cclUniqueId id = good;
    id.internal[at] = static_cast<char>(value);
    return id;
  };
  cclUniqueId zero;
  memset(&zero, 0, sizeof(zero));
  expect_rejected(zero, "all zeros");
  expect_rejected(damaged(0, 0x00), "a wrong magic");
  expect_rejected(damaged(4, 0x07), "a wrong version");
  expect_rejected(damaged(8, 0x01), "address family AF_UNIX");
  cclUniqueId no_port = good;
  no_port.internal[10] = no_port.internal[11] = 0;
  expect_rejected(no_port, "port 0");
  expect_rejected(damaged(20, 0x01), "bytes after an IPv4 address");
  expect_rejected(damaged(127, 0xff), "nonzero padding");
  try {
    decode_unique_id(zero);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("wrong magic"), std::string::npos) << e.what();
  }
  // Any byte of the secret may be anything.
  UniqueIdContents out = decode_unique_id(damaged(30, 0x00));
  EXPECT_EQ(out.secret[2], 0);
}

TEST(Secret, RandomSecretsDiffer) {
  Secret a = random_secret(), b = random_secret();
  EXPECT_NE(a, b);
  EXPECT_FALSE(secrets_equal(a, b));
  EXPECT_TRUE(secrets_equal(a, a));
}

TEST(Secret, CompareSeesEveryByte) {
  Secret a = sample_secret();
  for (size_t i = 0; i < a.size(); ++i) {
    Secret b = a;
    b[i] ^= 0x80;
    EXPECT_FALSE(secrets_equal(a, b)) << i;
  }
}

TEST(Secret, HexRoundTrip) {
  Secret s = sample_secret();
  std::string hex = secret_to_hex(s);
  EXPECT_EQ(hex, "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf");
  Secret back{};
  ASSERT_TRUE(secret_from_hex(hex, &back));
  EXPECT_EQ(back, s);
  ASSERT_TRUE(secret_from_hex("A0A1A2A3A4A5A6A7A8A9AAABACADAEAF", &back));
  EXPECT_EQ(back, s);
  Secret untouched = sample_secret();
  for (const char* bad :
       {"", "a0", "a0a1a2a3a4a5a6a7a8a9aaabacadaea", "a0a1a2a3a4a5a6a7a8a9aaabacadaeafff",
        "g0a1a2a3a4a5a6a7a8a9aaabacadaeaf", "a0a1a2a3a4a5a6a7a8a9aaabacadae f"}) {
    EXPECT_FALSE(secret_from_hex(bad, &untouched)) << bad;
  }
  EXPECT_EQ(untouched, sample_secret());
}

}  // namespace
}  // namespace ccl
