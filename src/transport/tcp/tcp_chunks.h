// How a message is spread over a pair's sockets when it has several (tcp_multi_connection.h).
// A pure function of the message's size, the socket count and its sequence number, which both
// sides know, so no chunk carries a header of its own: each socket's stream is the concatenation
// of the chunks it was given, message after message.
//
// Messages under kSplitBytes go whole on socket 0, after their header. Larger ones are cut into
// `count` chunks of `chunk` bytes, the last one taking the remainder too (so every chunk has at
// least kMinChunk bytes, and every chunk starts at a multiple of kPieceAlign): bytes / nsockets
// rounded down to a multiple of kPieceAlign, at least kMinChunk (no chunk is small enough for its
// per-call costs to show) and at most kMaxChunk. Chunk k goes on socket (sequence + k) % nsockets,
// so that a run of messages just above the threshold does not load socket 0 and 1 alone.
//
// kMaxChunk: 1 MiB, so that a large message's chunks interleave over the sockets (a consume()
// sink is fed from all of them at once, and a socket that lags holds back 1 MiB, not 1/N of the
// message). No chunk carries a header, so the cap costs nothing per chunk but one queue entry.
// Other caps were not measured apart: on the 2 shared cores this was written on, one
// configuration's 64 MiB figures varied from 1.4 to 3.4 GB/s between runs (tcp_transport.h).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "transport/transport.h"

namespace ccl::transport::tcp {

inline constexpr size_t kMinChunk = 64 * 1024;
inline constexpr size_t kSplitBytes = 2 * kMinChunk;
inline constexpr size_t kMaxChunk = 1024 * 1024;

struct ChunkLayout {
  size_t bytes = 0;
  size_t chunk = 0;  // 0: not split
  size_t count = 0;
  int nsockets = 1;
  uint32_t sequence = 0;

  int socket_of(size_t k) const {
    return static_cast<int>((sequence + k) % static_cast<size_t>(nsockets));
  }
  size_t offset_of(size_t k) const { return k * chunk; }
  size_t length_of(size_t k) const { return k + 1 < count ? chunk : bytes - k * chunk; }
};

inline ChunkLayout chunk_layout(size_t bytes, int nsockets, uint32_t sequence) {
  ChunkLayout l;
  l.bytes = bytes;
  l.nsockets = nsockets;
  l.sequence = sequence;
  if (nsockets < 2 || bytes < kSplitBytes) return l;
  // Rounded down, so that count = bytes / chunk is at least nsockets (or 2, at kMinChunk).
  const size_t share = bytes / static_cast<size_t>(nsockets) / kPieceAlign * kPieceAlign;
  l.chunk = std::clamp(share, kMinChunk, kMaxChunk);
  l.count = bytes / l.chunk;
  return l;
}

}  // namespace ccl::transport::tcp
