// What the ucx transport puts on the wire: the 64-bit tag of every tagged message and the few
// fixed-size control messages. Integers are in host byte order (all ranks of a job share one
// architecture; magic numbers catch a peer that disagrees).
//
// One worker serves one communicator, so tags only have to tell peers, messages and chunks apart:
//
//   63..61  channel   kPayload (message chunks), kControl (RMA handshake), kNotice, kHello
//   60      last      payload: the message's last chunk
//   59      rma_done  payload: no data, the sender put the whole message by RMA (chunk 0)
//   58      p2p       payload: a point-to-point message's chunk (SendRequest::point_to_point),
//                     which a receive from any source may take (ucp_tag_probe_nb)
//   57..40  rank      the rank that sent this UCX message (18 bits: 262144 ranks)
//   39..14  sequence  per pair and direction, counts messages from 0 (wraps; only in-flight
//                     messages need distinct tags)
//   13..0   chunk     index of the chunk within its message
//
// A payload receive matches channel, rank, sequence and chunk and ignores the three flag bits,
// which it then checks against what it expects: a peer that disagrees on a message's size is
// caught at the first chunk whose length or `last` flag differs (ucx_chunking.h).
#pragma once

#include <ucp/api/ucp.h>

#include <cstddef>
#include <cstdint>

#include "transport/registered_region.h"

namespace ccl::transport::ucx {

enum class Channel : uint64_t { kPayload = 1, kControl = 2, kNotice = 3, kHello = 4 };

inline constexpr int kChannelShift = 61;
inline constexpr uint64_t kLastFlag = 1ull << 60;
inline constexpr uint64_t kRmaDoneFlag = 1ull << 59;
inline constexpr uint64_t kPointToPointFlag = 1ull << 58;
inline constexpr int kRankShift = 40;
inline constexpr int kRankBits = 18;
inline constexpr int kMaxRanks = 1 << kRankBits;
inline constexpr int kSequenceShift = 14;
inline constexpr int kSequenceBits = 26;
inline constexpr int kChunkBits = 14;
inline constexpr uint32_t kMaxChunks = 1u << kChunkBits;

inline constexpr uint64_t kChannelMask = 7ull << kChannelShift;
inline constexpr uint64_t kRankMask = ((1ull << kRankBits) - 1) << kRankShift;
inline constexpr uint64_t kSequenceMask = ((1ull << kSequenceBits) - 1) << kSequenceShift;
inline constexpr uint64_t kChunkMask = (1ull << kChunkBits) - 1;
// A payload receive ignores the flags; control, notice and hello receives take any sequence.
inline constexpr uint64_t kPayloadRecvMask = ~(kLastFlag | kRmaDoneFlag | kPointToPointFlag);
inline constexpr uint64_t kPeerChannelMask = kChannelMask | kRankMask;

inline constexpr ucp_tag_t make_tag(Channel channel, int rank, uint64_t sequence = 0,
                                    uint32_t chunk = 0) {
  return (static_cast<uint64_t>(channel) << kChannelShift) |
         (static_cast<uint64_t>(rank) << kRankShift & kRankMask) |
         (sequence << kSequenceShift & kSequenceMask) | (chunk & kChunkMask);
}
inline constexpr uint32_t tag_chunk(ucp_tag_t tag) { return tag & kChunkMask; }

// Exchanged once per pair in connect(): proves the endpoint reaches the right rank of the right
// communicator, and completes UCX's wire-up before the first message.
struct HelloWire {
  uint32_t magic;
  uint16_t version;
  uint16_t reserved;
  int32_t rank;
  int32_t nranks;
  uint64_t tag_hash;  // FNV-1a of the communicator tag
};
static_assert(sizeof(HelloWire) == 24);
inline constexpr uint32_t kHelloMagic = 0x55434348;  // "HCCU"
inline constexpr uint16_t kHelloVersion = 1;

// The RMA handshake, all on the control channel (ucx_connection.h): a sender whose buffer is
// registered asks (kReadyToSend), the receiver answers with its destination and packed rkey
// (kOffer) or tells it to send tagged chunks (kGo).
struct ControlWire {
  enum Kind : uint32_t { kReadyToSend = 1, kOffer = 2, kGo = 3 };
  uint32_t magic;
  uint32_t kind;
  uint64_t sequence;   // the message's full sequence number
  uint64_t bytes;      // the message size as the writer of this control message sees it
  uint64_t address;    // kOffer: the destination in the receiver's address space
  uint64_t region_id;  // kOffer: the receiver's registration, the rkey cache's key
  uint16_t packed_bytes;
  uint8_t point_to_point;  // kReadyToSend: 1 for a point-to-point message
  uint8_t reserved[5];
  std::byte packed[TransportKey::kMaxPacked];  // kOffer: the packed rkey
};
static_assert(sizeof(ControlWire) == 48 + TransportKey::kMaxPacked);
inline constexpr uint32_t kControlMagic = 0x55434343;  // "CCCU"

// A failure notice (failure_notice.h) or a goodbye: the last message a rank sends a peer.
struct NoticeWire {
  uint32_t magic;
  int32_t kind;  // FailureNotice::Kind, or kDeparted
  int32_t code;
  int32_t origin;
  int32_t culprit;
  uint32_t reserved;
  // The sender's messages to this peer, counted from 0, that are all complete at the sender: the
  // peer's receives of earlier messages still get their data (it may still be in UCX's queues, the
  // notice may overtake it), a receive of this one or a later one never does.
  uint64_t sent;
};
static_assert(sizeof(NoticeWire) == 32);
inline constexpr uint32_t kNoticeMagic = 0x55434e4e;  // "NNCU"
inline constexpr int32_t kDeparted = 100;             // the peer destroyed its communicator cleanly

inline uint64_t tag_hash(const char* tag, size_t len) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a 64-bit offset basis
  for (size_t i = 0; i < len; ++i) {
    h ^= static_cast<unsigned char>(tag[i]);
    h *= 1099511628211ull;  // FNV prime
  }
  return h;
}

}  // namespace ccl::transport::ucx
