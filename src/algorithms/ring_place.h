// Helpers shared by the ring, chain and tree builders (ring.cc, ring_allgatherv.cc,
// chain_reduce.cc, double_binary_tree.cc, tree_rooted.cc, hierarchical.cc): a rank's place on a
// ring order, checked once, the small step constructors, and ring phases over a subset of the
// ranks. Internal to src/algorithms; not part of any interface.
#pragma once

#include <functional>
#include <span>
#include <vector>

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

// The tree builders' pipelines: a flow is one step that chunk c (0 <= c < chunks) of a pipeline
// makes in round `first + c`. Rounds are numbered alike on every rank; finish() appends the steps
// in round order, a rank's idle rounds dropped, generating them as it goes (nothing per step is
// kept). In a round, steps come by group, then by chunk index, then in the order the flows were
// added: the order of a loop "for each group, for each chunk, for each flow", which is what both
// ends of a pair must agree on when they exchange two messages in one round.
class PipelineTable {
 public:
  void add(size_t group, size_t first, size_t chunks, std::function<Step(size_t)> step) {
    if (chunks != 0) flows_.push_back(Flow{group, first, chunks, std::move(step)});
  }
  Schedule finish(Schedule s);

 private:
  struct Flow {
    size_t group, first, chunks;
    std::function<Step(size_t)> step;
  };
  std::vector<Flow> flows_;
};

// Ring phases on a sub-range of the vector among the ranks of `ring`, appended to `s`: the pieces
// of collectives made of several rings (hierarchical.cc). `ring` may hold a subset of the
// communicator (build the RingPlace directly, `order` listing the member ranks). `range` is cut
// into ring.n pieces (split_even), piece p belonging to the rank at position p, and each piece into
// chunks of at most `chunk_elems` (the largest piece's count for all); zero-count chunks exchange
// nothing and rounds left empty are dropped.
//
// Reduce-scatter, n-1 steps: at step st a rank forwards the partial sum of piece pos-1-st and
// folds its own operand into piece pos-2-st as that arrives, ending with piece pos reduced over
// the ring in Output (not finalized). The own operand is read from `local`: Input, or Output where
// an earlier phase left partial sums. Each piece reaches a rank once, so an element of `local` is
// read before its Output alias is written (in place is correct). One rank: `local` copied into
// Output (nothing if it is Output). Sends (n-1)/n of the range.
void append_ring_reduce_scatter(Schedule& s, const RingPlace& ring, Piece range, Buffer local,
                                size_t chunk_elems);
// Allgather, n-1 steps: the rank at position p holds piece p of the range in Output; at step st it
// forwards piece pos-st and receives piece pos-st-1, ending with the whole range. Sends (n-1)/n
// of the range.
void append_ring_allgather(Schedule& s, const RingPlace& ring, Piece range, size_t chunk_elems);

}  // namespace ccl::algo
