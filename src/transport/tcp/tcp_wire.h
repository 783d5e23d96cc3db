// What the tcp transport puts on the wire. Integers are in host byte order: all ranks of a job
// run on one architecture, and the magic numbers catch a peer that disagrees.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ccl::transport::tcp {

// Precedes every message: the receiver checks it against the RecvRequest it has posted.
struct FrameHeader {
  uint32_t magic;
  uint32_t sequence;  // per direction, counts messages from 0; catches a desynchronized stream
  uint64_t bytes;     // payload bytes that follow
};
static_assert(sizeof(FrameHeader) == 16);
inline constexpr uint32_t kFrameMagic = 0x4d4c4343;  // "CCLM"
// A point-to-point message's frame (SendRequest::point_to_point), which a receive from any
// source may take; otherwise as kFrameMagic.
inline constexpr uint32_t kPointToPointMagic = 0x504c4343;  // "CCLP"
inline constexpr uint32_t frame_magic(bool point_to_point) {
  return point_to_point ? kPointToPointMagic : kFrameMagic;
}
inline constexpr bool is_frame_magic(uint32_t magic) {
  return magic == kFrameMagic || magic == kPointToPointMagic;
}

// Sent in place of a FrameHeader, at a frame boundary, as the last thing on a connection: the
// sender's communicator failed (notice.kind kFailed or kAborted; failure_notice.h), or it is
// being destroyed cleanly (kind kDeparted), so that its peers can tell a goodbye from a crash.
struct NoticeFrame {
  uint32_t magic;
  int16_t code;  // cclResult_t
  int16_t kind;  // FailureNotice::Kind, or kDeparted
  int32_t origin;
  int32_t culprit;
};
static_assert(sizeof(NoticeFrame) == sizeof(FrameHeader));
inline constexpr uint32_t kNoticeMagic = 0x4e4c4343;  // "CCLN"
inline constexpr int16_t kDeparted = 100;

// Setup handshake: the connecting (higher) rank sends a Hello, the accepting (lower) rank answers
// with the same struct, kind = kAck and its own rank, once it has accepted the connection. A pair
// uses `nsockets` connections (CCL_SOCKET_NTHREADS x CCL_NSOCKS_PERTHREAD, the same on both
// sides); each one's hello names its index `socket`, which its ack echoes, so that the accepting
// rank matches them whatever order they connect in.
// `token` is the accepting rank's listener token: 128 random bits it published with its address
// through the store, which only holders of the unique id's secret can read. The tag hash is no
// secret (the tag names shared-memory segments that anyone can list), so it only tells
// communicators apart; the token is what keeps a stranger from posing as a rank.
struct Hello {
  uint32_t magic;
  uint16_t version;
  uint16_t kind;
  int32_t rank;
  int32_t nranks;
  uint64_t tag_hash;  // FNV-1a of the communicator tag: a connection for another comm is refused
  uint8_t token[16];
  uint16_t socket = 0;    // this connection's index among the pair's, < nsockets
  uint16_t nsockets = 1;  // connections per pair, at most kMaxSockets
  uint32_t reserved = 0;
};
static_assert(sizeof(Hello) == 48);
inline constexpr uint32_t kHelloMagic = 0x54434343;  // "CCCT"
inline constexpr uint16_t kHelloVersion = 3;
inline constexpr int kMaxSockets = 64;
inline constexpr uint16_t kHelloKindHello = 1;
inline constexpr uint16_t kHelloKindAck = 2;

inline uint64_t tag_hash(std::string_view tag) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a 64-bit offset basis
  for (unsigned char c : tag) {
    h ^= c;
    h *= 1099511628211ull;  // FNV prime
  }
  return h;
}

}  // namespace ccl::transport::tcp
