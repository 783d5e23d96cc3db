#include "algorithms/chain_reduce.h"

#include "algorithms/ring_place.h"
#include "base/error.h"

namespace ccl::algo {

Schedule chain_reduce(const RingParams& params, int root) {
  const RingPlace ring = place_on_ring(params, "chain_reduce");
  const int n = ring.n;
  // 0: the root, n-1: the far end of the chain, where the data starts.
  const int index = ring.chain_index(root, "chain_reduce");
  Schedule s;
  const size_t count = params.count;
  if (count == 0) return s;  // touches nothing; buffers may be NULL
  if (n == 1) return single_rank_reduction(count);
  const size_t nchunks = chunks_per_piece(count, params.chunk_elems);
  const Piece whole{0, count};
  // Data flows towards the root: from the next rank on the ring to the previous one.
  const int from = ring.next(), to = ring.prev();
  const auto input = [&](size_t c) { return sub_region(Buffer::Input, whole, nchunks, c); };

  if (index == n - 1) {
    for (size_t c = 0; c < nchunks; ++c) s.add_round({send_step(to, input(c))});
    return s;
  }
  if (index == 0) {
    // Chunk c is reduced in round c and finalized in round c+1, after the next receive is posted.
    const auto output = [&](size_t c) { return sub_region(Buffer::Output, whole, nchunks, c); };
    for (size_t c = 0; c <= nchunks; ++c) {
      if (c < nchunks) s.add(Step{StepKind::RecvReduce, from, input(c), output(c)});
      if (c > 0) s.add(Step{StepKind::Finalize, -1, Region{}, output(c - 1)});
      s.end_round();
    }
    return s;
  }
  // A middle rank: partial sums in two alternating Scratch slots of the largest chunk.
  const size_t slot_elems = split_even(count, nchunks, 0).count;
  s.scratch_elems = (nchunks > 1 ? 2 : 1) * slot_elems;
  const auto partial = [&](size_t c) {
    return Region{Buffer::Scratch, (c % 2) * slot_elems, split_even(count, nchunks, c).count};
  };
  // Chunk c arrives in round c and leaves in round c+1: one round deep per hop, like the
  // broadcast chain, so every send meets its receive in the same round of the pair.
  for (size_t c = 0; c <= nchunks; ++c) {
    if (c < nchunks) s.add(Step{StepKind::RecvReduce, from, input(c), partial(c)});
    if (c > 0) s.add(send_step(to, partial(c - 1)));
    s.end_round();
  }
  return s;
}

}  // namespace ccl::algo
