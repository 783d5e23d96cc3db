// The TcpStore wire format (described in tcp_store.h), shared by the client and the server.
// Parsing is incremental and checks every length as soon as it arrives, so the server can drop a
// client announcing an oversize message before buffering any of it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/bootstrap/store.h"
#include "core/bootstrap/unique_id.h"

namespace ccl::store_wire {

constexpr uint32_t kHelloMagic = 0x534c4343;  // the bytes "CCLS" read as a little-endian u32
constexpr uint32_t kVersion = 1;
constexpr size_t kHelloBytes = 4 + 4 + 16 + 4 + 4;
constexpr size_t kMaxKeyBytes = 4096;
constexpr size_t kMaxValueBytes = size_t{16} << 20;
constexpr uint32_t kMaxWaitKeys = 65536;
// A whole request (a WAIT with many keys included) never exceeds this.
constexpr size_t kMaxRequestBytes = kMaxValueBytes + 64 * 1024;
constexpr int32_t kMaxRanks = 1 << 24;

enum class Op : uint8_t { kSet = 1, kGet = 2, kAdd = 3, kWait = 4 };
constexpr uint8_t kStatusOk = 0;

struct Hello {
  uint32_t magic = kHelloMagic;
  uint32_t version = kVersion;
  Secret secret{};
  int32_t rank = 0;
  int32_t nranks = 0;
};

struct Request {
  Op op = Op::kGet;
  std::string key;                // SET, GET, ADD (empty for WAIT)
  Bytes value;                    // SET
  int64_t delta = 0;              // ADD
  std::vector<std::string> keys;  // WAIT
};

enum class Parse { kIncomplete, kComplete, kInvalid };

Bytes encode_hello(const Hello& hello);
// Needs exactly kHelloBytes bytes. Checks nothing but the layout: hello_problem judges the fields.
Hello decode_hello(const uint8_t* data);
// Why the server (holding `secret`, and expecting `expected` ranks, or any count when <= 0) must
// refuse `hello`; empty when it may accept it.
std::string hello_problem(const Hello& hello, const Secret& secret, int expected);

Bytes encode_request(const Request& request);
// kComplete: *out holds the request and *consumed its size. kIncomplete: *need is a lower bound
// on the bytes the whole request takes (do not call again before that many are buffered).
// kInvalid: *error says why (an unknown op, or a length over its bound).
Parse parse_request(const uint8_t* data, size_t size, Request* out, size_t* consumed, size_t* need,
                    std::string* error);

// The server's answer: a status byte (kStatusOk), then for GET the value (u32 length and bytes),
// for ADD the new counter (u64); SET and WAIT have nothing more.
struct Reply {
  Bytes value;           // GET
  uint64_t counter = 0;  // ADD
};
// The answer to a request of type `op`, with parse_request's contract. kInvalid for a status
// other than kStatusOk or a value over kMaxValueBytes.
Parse parse_reply(Op op, const uint8_t* data, size_t size, Reply* out, size_t* consumed,
                  size_t* need, std::string* error);

// Little-endian field helpers.
inline void put_u32(Bytes& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
inline void put_u64(Bytes& b, uint64_t v) {
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
inline uint32_t get_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}
inline uint64_t get_u64(const uint8_t* p) {
  return static_cast<uint64_t>(get_u32(p)) | static_cast<uint64_t>(get_u32(p + 4)) << 32;
}

}  // namespace ccl::store_wire
