// The bytes of a shared-memory segment, as every process that maps it sees them.
//
// One segment per receiving rank (its owner). Layout, all offsets from the segment start:
//   0      SegmentHeader (one cache line)
//   64     Doorbell: the futex sequence word and the waiter count, each on its own cache line
//   192    FailureLine: the owner's failure notice, or that it left cleanly (failure_notice.h)
//   256    the channel table: the sending rank of each inbound channel (int32 each)
//   then, kPage aligned, the shared window (only when window_bytes > 0; shared_window.h):
//     +0    two MailboxLines (parity 0 and 1): the flag and the inline bytes
//     +4096 two bulk areas of window_bytes each (rounded up to 4 KiB), parity 0 then 1
//   then, kPage aligned, one Channel per sending peer, `channel_stride` bytes apart:
//     +0    head: slots the producer has published (only the producer writes it)
//     +64   tail: slots the consumer has released (only the consumer writes it)
//     +128  K slots of (SlotHeader: 64 bytes, then S data bytes); S is a multiple of 64, so
//           every slot's data is 64-byte aligned and a slot is a kPieceAlign-respecting piece.
// Peers map everything before the channels, so they read the window where it lies.
// Counters are monotonic slot counts (2^64 slots never wrap); counter c lives in slot c % K.
// The producer may write slot `head` only while head - tail < K, then publishes it by storing
// head + 1 (release); the consumer reads slots [tail, head) and frees them by storing tail
// (release). So each slot has exactly one writer at a time and no lock is needed.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "transport/failure_notice.h"

namespace ccl::transport::shm {

inline constexpr uint64_t kSegmentMagic = 0x63636c2d73686d31ull;  // "ccl-shm1"
inline constexpr uint32_t kLayoutVersion = 3;
inline constexpr size_t kCacheLine = 64;
// Channels start at multiples of this, so a peer can map just its channel (64 KiB: a multiple
// of every page size Linux uses, 4 KiB to 64 KiB).
inline constexpr size_t kPage = 64 * 1024;

static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "futex words are raw u32");

struct alignas(kCacheLine) SegmentHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t channels;
  uint64_t slots;           // K
  uint64_t slot_bytes;      // S
  uint64_t channel_stride;  // bytes from one channel to the next
  uint64_t channels_offset;
  int32_t owner_rank;
  int32_t owner_pid;
  uint64_t window_bytes;  // bulk bytes per mailbox; 0: no window
};

// The futex word a rank sleeps on while it waits for any of its connections, and the count of
// sleepers (so that the other side pays for FUTEX_WAKE only when someone sleeps).
struct Doorbell {
  alignas(kCacheLine) std::atomic<uint32_t> sequence;
  alignas(kCacheLine) std::atomic<uint32_t> waiters;
};

// The owner's state as its peers see it: written only by the owner, read by every peer (rarely:
// when they sleep or are asked for the communicator's health). The notice is written before
// `state` is stored, and read after `state` is loaded.
struct alignas(kCacheLine) FailureLine {
  enum State : uint32_t { kLive = 0, kFailed = 1, kDeparted = 2 };
  std::atomic<uint32_t> state;
  uint32_t reserved;
  FailureNotice notice;
};

struct alignas(kCacheLine) CounterLine {
  std::atomic<uint64_t> value;
};

struct ChannelControl {
  CounterLine head;  // written by the producer (the peer), read by the consumer (the owner)
  CounterLine tail;  // written by the consumer, read by the producer
};

// Written by the producer before it publishes the slot with the head counter.
struct alignas(kCacheLine) SlotHeader {
  uint64_t message_sequence;  // n-th message on this channel, from 0
  uint64_t message_bytes;     // the whole message, as the sender posted it
  uint64_t offset;            // of this piece within the message
  uint64_t length;            // of this piece (<= S; only the message's last piece is shorter)
  uint64_t point_to_point;    // 1: a point-to-point message (SendRequest::point_to_point)
};

// One mailbox's flag, with the few bytes of a tiny message in the same cache line: a reader
// that sees the flag has the data too, one line transfer for the whole exchange.
struct alignas(kCacheLine) MailboxLine {
  std::atomic<uint64_t> flag;
  uint64_t reserved;
  std::byte inline_data[48];
};

static_assert(sizeof(SegmentHeader) == kCacheLine);
static_assert(sizeof(MailboxLine) == kCacheLine);
static_assert(sizeof(Doorbell) == 2 * kCacheLine);
static_assert(sizeof(ChannelControl) == 2 * kCacheLine);
static_assert(sizeof(FailureLine) == kCacheLine);
static_assert(sizeof(SlotHeader) == kCacheLine);

inline constexpr size_t kDoorbellOffset = sizeof(SegmentHeader);
inline constexpr size_t kFailureLineOffset = kDoorbellOffset + sizeof(Doorbell);
inline constexpr size_t kChannelTableOffset = kFailureLineOffset + sizeof(FailureLine);

constexpr size_t round_up(size_t value, size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// Where everything lies in a segment with `channels` channels of `slots` x `slot_bytes`.
struct SegmentGeometry {
  size_t slots = 0;
  size_t slot_bytes = 0;
  size_t channels = 0;
  size_t window_bytes = 0;

  static constexpr size_t kWindowBulkOffset = 4096;
  size_t window_offset() const {
    return round_up(kChannelTableOffset + channels * sizeof(int32_t), kPage);
  }
  size_t window_bulk_stride() const { return round_up(window_bytes, 4096); }
  size_t window_total() const {
    return window_bytes == 0 ? 0 : kWindowBulkOffset + 2 * window_bulk_stride();
  }

  size_t slot_stride() const { return sizeof(SlotHeader) + slot_bytes; }
  size_t channel_stride() const {
    return round_up(sizeof(ChannelControl) + slots * slot_stride(), kPage);
  }
  size_t channels_offset() const { return round_up(window_offset() + window_total(), kPage); }
  size_t total_bytes() const { return channels_offset() + channels * channel_stride(); }
};

// A view of one channel inside a mapped segment (the owner's or a peer's mapping).
struct ChannelView {
  ChannelControl* control = nullptr;
  std::byte* slots_base = nullptr;
  size_t slots = 0;
  size_t slot_bytes = 0;

  SlotHeader* header(uint64_t counter) const {
    return reinterpret_cast<SlotHeader*>(slots_base + (counter % slots) * stride());
  }
  std::byte* data(uint64_t counter) const {
    return slots_base + (counter % slots) * stride() + sizeof(SlotHeader);
  }
  size_t stride() const { return sizeof(SlotHeader) + slot_bytes; }
};

}  // namespace ccl::transport::shm
