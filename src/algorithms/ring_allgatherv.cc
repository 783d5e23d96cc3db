// Ring allgatherv (see ring.h); ring_allgather is this with equal counts.
#include <algorithm>
#include <cstdint>

#include "algorithms/ring.h"
#include "algorithms/ring_place.h"
#include "base/error.h"

namespace ccl::algo {

Schedule ring_allgatherv(const RingParams& params, std::span<const size_t> counts,
                         std::span<const size_t> displs) {
  const RingPlace ring = place_on_ring(params, "ring_allgatherv");
  const int n = ring.n;
  if (counts.size() != static_cast<size_t>(n) || displs.size() != static_cast<size_t>(n)) {
    throw_error(cclInvalidArgument,
                "ring_allgatherv: %zu counts and %zu displacements for %d ranks", counts.size(),
                displs.size(), n);
  }
  for (int q = 0; q < n; ++q) {
    if (displs[q] > SIZE_MAX - counts[q]) {
      throw_error(cclInvalidArgument, "ring_allgatherv: rank %d's piece (%zu at %zu) overflows", q,
                  counts[q], displs[q]);
    }
  }
  Schedule s;
  const int rank = params.rank;
  const size_t own = counts[rank];
  // Our own piece goes to Output by a local copy (skipped by the executor when in place, where
  // Input is that very piece of Output).
  const Step copy_own{StepKind::Copy, -1, Region{Buffer::Input, 0, own},
                      Region{Buffer::Output, displs[rank], own}};
  if (n == 1) {
    if (own != 0) s.add_round({copy_own});
    return s;
  }
  // The Output piece of the rank at ring position p.
  const auto piece = [&](long p) {
    const int q = ring.at(p);
    return Piece{displs[q], counts[q]};
  };
  const int next = ring.next(), prev = ring.prev();
  const long pos = ring.pos;
  // At step st a rank forwards the piece of position pos-st (its own, from Input, at step 0) and
  // receives that of pos-st-1. Sender and receiver cut a piece into the same chunks (they depend
  // on its count only) and skip the same empty ones, so the k-th message between two ranks is the
  // same on both sides; and as the send at (st, c) always meets the receive at (st, c), no
  // rendezvous can wait in a cycle, whatever the counts.
  for (int st = 0; st + 1 < n; ++st) {
    const Piece tx_piece = st == 0 ? Piece{0, own} : piece(pos - st);
    const Buffer tx_buffer = st == 0 ? Buffer::Input : Buffer::Output;
    const Piece rx_piece = piece(pos - st - 1);
    const size_t tx_chunks = chunks_per_piece(tx_piece.count, params.chunk_elems);
    const size_t rx_chunks = chunks_per_piece(rx_piece.count, params.chunk_elems);
    for (size_t c = 0; c < std::max(tx_chunks, rx_chunks); ++c) {
      if (c < tx_chunks) {
        const Region tx = sub_region(tx_buffer, tx_piece, tx_chunks, c);
        if (tx.count != 0) s.add(send_step(next, tx));
      }
      if (c < rx_chunks) {
        const Region rx = sub_region(Buffer::Output, rx_piece, rx_chunks, c);
        if (rx.count != 0) s.add(recv_step(prev, rx));
      }
      // After the transfers are posted, so the copy overlaps them.
      if (st == 0 && c == 0 && own != 0) s.add(copy_own);
      s.end_round();
    }
  }
  return s;
}

}  // namespace ccl::algo
