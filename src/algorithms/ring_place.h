// Helpers shared by the ring and chain builders (ring.cc, ring_allgatherv.cc, chain_reduce.cc):
// a rank's place on a ring order, checked once, and the small step constructors. Internal to
// src/algorithms; not part of any interface.
#pragma once

#include <span>

#include "algorithms/ring.h"
#include "algorithms/schedule.h"

namespace ccl::algo {

// A rank's place on the ring, checked once so the builders can trust it.
struct RingPlace {
  int n = 1;
  int pos = 0;  // index of the rank in the order
  std::span<const int> order;
  int at(long p) const {  // rank at position p, any integer p (wraps around)
    const long m = ((p % n) + n) % n;
    return order.empty() ? static_cast<int>(m) : order[m];
  }
  int next() const { return at(pos + 1); }
  int prev() const { return at(pos - 1); }
  int position_of(int rank) const;  // rank must be in [0, n)
  // This rank's distance along the chain that starts at `root` and follows the ring order (0:
  // the root, n-1: the far end). Throws InvalidArgument (prefixed by `who`) unless root is a
  // rank.
  int chain_index(int root, const char* who) const;
};

// Throws InvalidArgument (prefixed by `who`) unless nranks >= 1, rank is in range and the order
// is empty or a permutation of 0..nranks-1.
RingPlace place_on_ring(const RingParams& p, const char* who);

// Every piece is cut into near-equal chunks of at most `chunk_elems` (0: one chunk), so there is
// no tiny tail chunk. Builders that need one round structure for all pieces pass the largest.
inline size_t chunks_per_piece(size_t piece_count, size_t chunk_elems) {
  if (chunk_elems == 0 || piece_count == 0) return 1;
  return (piece_count + chunk_elems - 1) / chunk_elems;
}

inline Region sub_region(Buffer buffer, Piece piece, size_t nchunks, size_t chunk) {
  const Piece c = split_even(piece.count, nchunks, chunk);
  return Region{buffer, piece.offset + c.offset, c.count};
}

inline Step send_step(int peer, Region src) { return Step{StepKind::Send, peer, src, Region{}}; }
inline Step recv_step(int peer, Region dst) { return Step{StepKind::Recv, peer, Region{}, dst}; }

// A round with no steps would cost a pass through the executor for nothing.
inline void push_nonempty(Schedule& s, Round&& round) {
  if (!round.steps.empty()) s.rounds.push_back(std::move(round));
}

}  // namespace ccl::algo
