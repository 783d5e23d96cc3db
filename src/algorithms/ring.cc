#include "algorithms/ring.h"

#include <vector>

#include "algorithms/ring_place.h"
#include "base/error.h"

namespace ccl::algo {

Schedule ring_allreduce(const RingParams& params) {
  const RingPlace ring = place_on_ring(params, "ring_allreduce");
  const size_t count = params.count;
  const int n = ring.n;
  Schedule s;
  if (count == 0) return s;  // touches nothing; buffers may be NULL
  if (n == 1) return single_rank_reduction(count);
  const auto piece = [&](long p) {
    return split_even(count, n, static_cast<size_t>(((p % n) + n) % n));
  };
  const size_t nchunks = chunks_per_piece(split_even(count, n, 0).count, params.chunk_elems);
  const int next = ring.next(), prev = ring.prev();
  const long pos = ring.pos;
  // Every chunk of every piece is non-empty unless the smallest piece has fewer elements than
  // chunks: then the bound is exact, else the vectors grow as needed.
  const size_t rounds = 2 * static_cast<size_t>(n - 1) * nchunks + 1;
  if (split_even(count, n, n - 1).count >= nchunks) s.reserve(2 * rounds - 1, rounds);

  // Reduce-scatter: at step st a rank forwards the partial sum of piece (pos-st) and folds its
  // own Input into piece (pos-st-1) as that arrives. Each piece reaches a rank exactly once, so
  // the local operand is always Input (Output of that piece has not been written yet), which is
  // also what makes in-place (Input == Output) correct.
  for (int st = 0; st + 1 < n; ++st) {
    const Piece out_piece = piece(pos - st), in_piece = piece(pos - st - 1);
    const Buffer from = st == 0 ? Buffer::Input : Buffer::Output;
    for (size_t c = 0; c < nchunks; ++c) {
      const Region tx = sub_region(from, out_piece, nchunks, c);
      if (tx.count != 0) s.add(send_step(next, tx));
      const Region rx_in = sub_region(Buffer::Input, in_piece, nchunks, c);
      const Region rx_out = sub_region(Buffer::Output, in_piece, nchunks, c);
      if (rx_out.count != 0) s.add(Step{StepKind::RecvReduce, prev, rx_in, rx_out});
      s.end_round();
    }
  }
  // The rank now holds piece pos+1 fully reduced; finalize it (avg) before anyone copies it.
  const Piece owned = piece(pos + 1);
  if (owned.count != 0) {
    s.add_round({Step{StepKind::Finalize, -1, Region{},
                      Region{Buffer::Output, owned.offset, owned.count}}});
  }
  // Allgather: pass the finished pieces around, each landing directly in Output.
  for (int st = 0; st + 1 < n; ++st) {
    const Piece out_piece = piece(pos + 1 - st), in_piece = piece(pos - st);
    for (size_t c = 0; c < nchunks; ++c) {
      const Region tx = sub_region(Buffer::Output, out_piece, nchunks, c);
      if (tx.count != 0) s.add(send_step(next, tx));
      const Region rx = sub_region(Buffer::Output, in_piece, nchunks, c);
      if (rx.count != 0) s.add(recv_step(prev, rx));
      s.end_round();
    }
  }
  return s;
}

Schedule chain_broadcast(const RingParams& params, int root) {
  const RingPlace ring = place_on_ring(params, "chain_broadcast");
  const int n = ring.n;
  const int index = ring.chain_index(root, "chain_broadcast");  // 0: root, n-1: tail
  Schedule s;
  const size_t count = params.count;
  if (count == 0) return s;
  const size_t nchunks = chunks_per_piece(count, params.chunk_elems);
  const Piece whole{0, count};
  const int next = ring.next(), prev = ring.prev();

  if (index == 0) {
    // Only the root's Input is read (non-roots' sendbuff may be NULL).
    for (size_t c = 0; c < nchunks; ++c) {
      if (c == 0) {
        // Skipped by the executor when in-place.
        s.add(Step{StepKind::Copy, -1, Region{Buffer::Input, 0, count},
                   Region{Buffer::Output, 0, count}});
      }
      if (n > 1) s.add(send_step(next, sub_region(Buffer::Input, whole, nchunks, c)));
      s.end_round();
    }
    return s;
  }
  const bool tail = index == n - 1;
  // Chunk c arrives in round c and leaves in round c+1: the chain is one round deep per hop.
  for (size_t c = 0; c <= nchunks; ++c) {
    if (c < nchunks) s.add(recv_step(prev, sub_region(Buffer::Output, whole, nchunks, c)));
    if (!tail && c > 0) s.add(send_step(next, sub_region(Buffer::Output, whole, nchunks, c - 1)));
    s.end_round();
  }
  return s;
}

Schedule ring_allgather(const RingParams& params) {
  // One implementation: allgatherv with equal pieces, rank q's at q * count. Two vectors of
  // nranks entries; nothing per element.
  if (params.nranks < 1) {
    throw_error(cclInvalidArgument, "ring_allgather: nranks %d < 1", params.nranks);
  }
  const auto n = static_cast<size_t>(params.nranks);
  std::vector<size_t> counts(n, params.count), displs(n);
  for (size_t q = 0; q < n; ++q) displs[q] = q * params.count;
  return ring_allgatherv(params, counts, displs);
}

Schedule ring_reduce_scatter(const RingParams& params) {
  const RingPlace ring = place_on_ring(params, "ring_reduce_scatter");
  const size_t count = params.count;
  const int n = ring.n;
  Schedule s;
  if (count == 0) return s;
  const Region out{Buffer::Output, 0, count};
  if (n == 1) {
    s.add_round({Step{StepKind::Copy, -1, Region{Buffer::Input, 0, count}, out}});
    s.add_round({Step{StepKind::Finalize, -1, Region{}, out}});
    return s;
  }
  // The Input piece of the rank at ring position p.
  const auto piece = [&](long p) { return Piece{static_cast<size_t>(ring.at(p)) * count, count}; };
  const size_t nchunks = chunks_per_piece(count, params.chunk_elems);
  const int next = ring.next(), prev = ring.prev();
  const long pos = ring.pos;
  // At step st a rank forwards the partial sum of piece (pos-1-st) and folds its own Input into
  // piece (pos-2-st) as that arrives; the last step's piece is its own, reduced into Output.
  // Partial sums alternate between two Scratch slots: a round sends from one while it fills the
  // other. In place, Output is Input's own piece, read only by that last reduce (elementwise).
  s.scratch_elems = n > 2 ? 2 * count : 0;
  const auto slot = [&](int st) { return Piece{static_cast<size_t>(st % 2) * count, count}; };
  for (int st = 0; st + 1 < n; ++st) {
    const bool last = st + 2 == n;
    for (size_t c = 0; c < nchunks; ++c) {
      const Region tx = st == 0 ? sub_region(Buffer::Input, piece(pos - 1), nchunks, c)
                                : sub_region(Buffer::Scratch, slot(st - 1), nchunks, c);
      if (tx.count != 0) s.add(send_step(next, tx));
      const Region local = sub_region(Buffer::Input, piece(pos - 2 - st), nchunks, c);
      const Region dst = last ? sub_region(Buffer::Output, Piece{0, count}, nchunks, c)
                              : sub_region(Buffer::Scratch, slot(st), nchunks, c);
      if (dst.count != 0) s.add(Step{StepKind::RecvReduce, prev, local, dst});
      s.end_round();
    }
  }
  s.add_round({Step{StepKind::Finalize, -1, Region{}, out}});
  return s;
}

Schedule dissemination_barrier(int nranks, int rank) {
  if (nranks < 1) throw_error(cclInvalidArgument, "dissemination_barrier: nranks %d < 1", nranks);
  if (rank < 0 || rank >= nranks) {
    throw_error(cclInvalidArgument, "dissemination_barrier: rank %d not in [0,%d)", rank, nranks);
  }
  Schedule s;
  // After round k a rank has heard, directly or not, from the 2^(k+1)-1 ranks before it.
  for (long dist = 1; dist < nranks; dist *= 2) {
    const int to = static_cast<int>((rank + dist) % nranks);
    const int from = static_cast<int>((rank - dist + nranks) % nranks);
    s.add_round({send_step(to, Region{Buffer::Input, 0, 0}),
                 recv_step(from, Region{Buffer::Output, 0, 0})});
  }
  return s;
}

}  // namespace ccl::algo
