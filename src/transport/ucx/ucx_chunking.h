// How a message is cut into tagged chunks. Sender and receiver cut it the same way from the size
// each believes in, so a receive can go to a staging buffer of one chunk without the sender
// knowing, and a size disagreement shows as a chunk whose length or `last` flag is not the one
// expected (ucx_wire.h).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "transport/transport.h"
#include "transport/ucx/ucx_wire.h"

namespace ccl::transport::ucx {

// 256 KiB: a staged receive holds kStagingBuffers of them per peer (512 KiB; tcp's staging is
// 256 KiB per peer), and larger chunks gained nothing here: a 64 MiB direct message over
// UCX 1.13's tcp/lo moved at 0.84 GB/s with 256 KiB chunks (quiet machine), and at 0.33-0.37
// GB/s with 1 MiB chunks against 0.42-0.46 GB/s with 256 KiB ones in a run beside other builds;
// kDirectWindow chunks in flight hide the rendezvous of each.
inline constexpr size_t kChunkBytes = 256 * 1024;
static_assert(kChunkBytes % kPieceAlign == 0);

// Messages over kMaxChunks chunks of kChunkBytes (4 GiB) get larger chunks, still multiples of
// kPieceAlign.
inline size_t chunk_bytes_for(size_t bytes) {
  const size_t per_chunk = (bytes + kMaxChunks - 1) / kMaxChunks;
  const size_t aligned = (per_chunk + kPieceAlign - 1) / kPieceAlign * kPieceAlign;
  return std::max(kChunkBytes, aligned);
}

// At least one: a zero-byte message is one empty chunk.
inline uint32_t chunk_count(size_t bytes, size_t chunk_bytes) {
  return bytes == 0 ? 1 : static_cast<uint32_t>((bytes + chunk_bytes - 1) / chunk_bytes);
}

inline size_t chunk_length(size_t bytes, size_t chunk_bytes, uint32_t index) {
  const size_t offset = static_cast<size_t>(index) * chunk_bytes;
  return std::min(chunk_bytes, bytes - offset);
}

}  // namespace ccl::transport::ucx
