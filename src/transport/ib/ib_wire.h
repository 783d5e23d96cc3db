// What the two ends of an ib connection write into each other's memory, and what they exchange
// through the store at setup.
//
// Each end registers a ControlBlock. Its FIFO receives the peer's clear-to-send entries (CTS):
// the receiver of a message tells the sender where to write it (address, rkey, length) one
// segment at a time; a segment is a whole message going straight to the receiver's buffer, or
// the part of one that fits a bounce slot. Each CTS travels as an RDMA write with immediate, so
// the sender acts on an entry only after the completion of its arrival (the data is placed
// before the completion is made): a torn entry is never read. The entry's seq word is checked
// too, as a guard against a corrupt peer. Data follows as RDMA writes striped over the
// connection's QPs; the last write of each stripe carries an immediate naming the segment.
// The notice slot takes the peer's failure notice or goodbye, again with an immediate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "transport/failure_notice.h"

namespace ccl::transport::ib {

// CTS entries (and so segments) outstanding per direction: a sender with more messages posted
// waits for the receiver, which writes a slot again only once the segment it last held arrived.
inline constexpr uint32_t kFifoSlots = 16;
inline constexpr int kMaxQpsPerConnection = 16;

// One 64-byte line, 64-byte aligned, so that a CTS never spans two cache lines.
struct alignas(64) CtsEntry {
  uint64_t addr = 0;    // where the segment goes in the receiver's memory
  uint64_t offset = 0;  // of the segment within its message
  uint64_t length = 0;  // of the segment
  uint64_t total = 0;   // bytes of the whole message, as the receiver posted it
  uint32_t rkey = 0;
  uint32_t pad = 0;
  uint64_t reserved[2] = {};
  uint64_t seq = 0;  // segment number + 1 (0: never written)
};
static_assert(sizeof(CtsEntry) == 64);

struct alignas(64) NoticeSlot {
  enum State : uint32_t { kLive = 0, kFailed = 1, kDeparted = 2 };
  FailureNotice notice;
  uint32_t state = kLive;
  uint32_t pad = 0;
};

struct ControlBlock {
  CtsEntry fifo[kFifoSlots];     // written by the peer: where our next segments go
  CtsEntry cts_out[kFifoSlots];  // our CTS entries, the sources of our writes into its FIFO
  NoticeSlot notice_in;          // written by the peer
  NoticeSlot notice_out;         // the source of our notice to the peer
};

// The immediate of a write: its kind in the top two bits, a segment number in the rest.
enum class ImmKind : uint32_t { kData = 0, kCts = 1, kNotice = 2, kMismatch = 3 };
inline constexpr uint32_t kImmSeqMask = (1u << 30) - 1;
inline uint32_t make_imm(ImmKind kind, uint64_t seq) {
  return (static_cast<uint32_t>(kind) << 30) | (static_cast<uint32_t>(seq) & kImmSeqMask);
}
inline ImmKind imm_kind(uint32_t imm) { return static_cast<ImmKind>(imm >> 30); }
inline uint32_t imm_seq(uint32_t imm) { return imm & kImmSeqMask; }

// A segment is split into contiguous stripes, one per QP (from QP 0), of at least kMinStripe
// bytes each: both ends compute the split from the length alone, so the receiver knows how many
// stripe immediates complete it. Stripe boundaries are kPieceAlign-aligned.
inline constexpr size_t kMinStripe = 16 * 1024;
int stripe_count(uint64_t length, int qps);
// [*begin, *end) of stripe `index` of a segment of `length` bytes cut in `stripes`.
void stripe_range(uint64_t length, int stripes, int index, uint64_t* begin, uint64_t* end);

// What an end publishes in the store for its peer (one record per direction of a pair).
struct EndpointInfo {
  int32_t rank = -1;
  int32_t peer = -1;
  uint8_t ethernet = 0;
  uint8_t mtu = 0;  // ibv_mtu
  uint16_t lid = 0;
  uint8_t gid[16] = {};
  uint64_t control_addr = 0;  // its ControlBlock
  uint32_t control_rkey = 0;
  std::vector<uint32_t> qpn;  // one per QP
  std::vector<uint32_t> psn;  // the first PSN each QP sends
};

std::vector<uint8_t> encode_endpoint(const EndpointInfo& info);
// Throws RemoteError ("ib: ...") for bytes that are not a record encode_endpoint() wrote.
EndpointInfo decode_endpoint(const std::vector<uint8_t>& bytes);

}  // namespace ccl::transport::ib
