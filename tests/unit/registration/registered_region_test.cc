// The registered-memory handle (transport/registered_region.h): page spans, keys, and a
// serialization whose reader refuses every malformed input with InvalidArgument.
#include "transport/registered_region.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "base/error.h"

namespace ccl::transport {
namespace {

const uint64_t kPage = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));

RegisteredRegion sample() {
  RegisteredRegion r;
  r.id = 7;
  r.owner_pid = 1234;
  r.owner_rank = 3;
  r.kind = MemoryKind::RegisteredHost;
  r.base = 16 * kPage;
  r.bytes = 3 * kPage;
  TransportKey& ib = r.add_key("ib");
  ib.lkey = 0x1111;
  ib.rkey = 0x2222;
  TransportKey& ucx = r.add_key("ucx");
  ucx.packed_bytes = TransportKey::kMaxPacked;  // a packed rkey of the largest size
  for (size_t i = 0; i < ucx.packed.size(); ++i) ucx.packed[i] = std::byte(i * 7);
  return r;
}

template <class F>
void expect_invalid(F&& f, const char* what) {
  try {
    f();
    ADD_FAILURE() << what << ": accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclInvalidArgument) << what << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find("registered region"), std::string::npos) << e.what();
  }
}

TEST(RegisteredRegion, PageSpanEnclosesTheRange) {
  uint64_t base = 0, bytes = 0;
  page_span(reinterpret_cast<void*>(kPage + 5), 10, &base, &bytes);
  EXPECT_EQ(base, kPage);
  EXPECT_EQ(bytes, kPage);
  page_span(reinterpret_cast<void*>(2 * kPage - 1), 2, &base, &bytes);  // straddles a boundary
  EXPECT_EQ(base, kPage);
  EXPECT_EQ(bytes, 2 * kPage);
  page_span(reinterpret_cast<void*>(3 * kPage), 0, &base, &bytes);  // empty: its page
  EXPECT_EQ(base, 3 * kPage);
  EXPECT_EQ(bytes, kPage);
  EXPECT_THROW(page_span(reinterpret_cast<void*>(UINTPTR_MAX - 10), 100, &base, &bytes), Error);
}

TEST(RegisteredRegion, CoversOnlyItsSpan) {
  const RegisteredRegion r = sample();
  const auto at = [](uint64_t a) { return reinterpret_cast<const void*>(a); };
  EXPECT_TRUE(r.covers(at(r.base), r.bytes));
  EXPECT_TRUE(r.covers(at(r.base + 100), 10));
  EXPECT_FALSE(r.covers(at(r.base - 1), 2));
  EXPECT_FALSE(r.covers(at(r.base + r.bytes - 1), 2));
  EXPECT_FALSE(r.covers(at(r.base + r.bytes + 1), 0));
  EXPECT_EQ(r.offset_of(at(r.base + 100)), 100u);
}

TEST(RegisteredRegion, KeysAreOnePerTransportAndBounded) {
  RegisteredRegion r = sample();
  EXPECT_EQ(r.key_of("ib")->rkey, 0x2222u);
  EXPECT_EQ(r.key_of("shm"), nullptr);
  EXPECT_THROW(r.add_key("ib"), Error);
  EXPECT_THROW(r.add_key(""), Error);
  EXPECT_THROW(r.add_key("much-too-long"), Error);
  r.add_key("shm");
  r.add_key("cuda");
  EXPECT_THROW(r.add_key("tcp"), Error);  // a fifth
}

TEST(RegisteredRegion, SerializesAndReadsBack) {
  const RegisteredRegion r = sample();
  const std::vector<std::byte> wire = serialize(r);
  const RegisteredRegion back = deserialize_region(wire);
  EXPECT_EQ(back.id, r.id);
  EXPECT_EQ(back.owner_pid, r.owner_pid);
  EXPECT_EQ(back.owner_rank, r.owner_rank);
  EXPECT_EQ(back.kind, r.kind);
  EXPECT_EQ(back.base, r.base);
  EXPECT_EQ(back.bytes, r.bytes);
  ASSERT_EQ(back.keys.size(), 2u);
  EXPECT_EQ(back.key_of("ib")->lkey, 0x1111u);
  EXPECT_EQ(back.key_of("ib")->rkey, 0x2222u);
  const TransportKey* ucx = back.key_of("ucx");
  ASSERT_NE(ucx, nullptr);
  ASSERT_EQ(ucx->packed_bytes, TransportKey::kMaxPacked);
  EXPECT_EQ(std::memcmp(ucx->packed.data(), r.key_of("ucx")->packed.data(), ucx->packed_bytes), 0);
  // No keys at all is a region too (a transport that needs none).
  RegisteredRegion bare;
  bare.base = kPage;
  bare.bytes = kPage;
  EXPECT_TRUE(deserialize_region(serialize(bare)).keys.empty());
}

TEST(RegisteredRegion, MalformedBytesAreRefused) {
  const std::vector<std::byte> good = serialize(sample());
  // Offsets of the wire header's fields (registered_region.cc).
  constexpr size_t kVersionAt = 4, kKindAt = 6, kCountAt = 7, kBaseAt = 24, kBytesAt = 32;
  constexpr size_t kFirstKey = 40, kKeyPackedBytesAt = 16;
  auto with = [&](size_t at, const void* value, size_t len) {
    std::vector<std::byte> w = good;
    std::memcpy(w.data() + at, value, len);
    return w;
  };
  const uint8_t big = 200;
  const uint16_t v2 = 2, too_many = TransportKey::kMaxPacked + 1;
  const uint64_t unaligned = kPage + 1, zero = 0, wrap = UINT64_MAX - kPage + 1;
  expect_invalid([&] { deserialize_region({good.data(), 10}); }, "short");
  expect_invalid([&] { deserialize_region(with(0, "XXXX", 4)); }, "magic");
  expect_invalid([&] { deserialize_region(with(kVersionAt, &v2, 2)); }, "version");
  expect_invalid([&] { deserialize_region(with(kKindAt, &big, 1)); }, "kind");
  expect_invalid([&] { deserialize_region(with(kCountAt, &big, 1)); }, "key count");
  expect_invalid([&] { deserialize_region(with(kBaseAt, &unaligned, 8)); }, "unaligned base");
  expect_invalid([&] { deserialize_region(with(kBytesAt, &zero, 8)); }, "no bytes");
  expect_invalid([&] { deserialize_region(with(kBaseAt, &wrap, 8)); }, "wraps");
  expect_invalid([&] { deserialize_region(with(kFirstKey, "\0", 1)); }, "unnamed key");
  expect_invalid([&] { deserialize_region(with(kFirstKey + kKeyPackedBytesAt, &too_many, 2)); },
                 "packed too long");
  expect_invalid([&] { deserialize_region(with(kFirstKey + 264, "ib\0", 3)); }, "duplicate key");
  std::vector<std::byte> longer = good;
  longer.push_back(std::byte{0});
  expect_invalid([&] { deserialize_region(longer); }, "trailing byte");
}

}  // namespace
}  // namespace ccl::transport
