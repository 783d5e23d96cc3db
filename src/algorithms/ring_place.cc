#include "algorithms/ring_place.h"

#include <algorithm>
#include <vector>

#include "base/error.h"

namespace ccl::algo {

namespace {

// Piece p (any integer: it wraps around) of `range` cut into n.
Piece piece_of_range(Piece range, int n, long p) {
  const Piece q = split_even(range.count, n, static_cast<size_t>(((p % n) + n) % n));
  return Piece{range.offset + q.offset, q.count};
}

}  // namespace

int RingPlace::position_of(int rank) const {
  if (order.empty()) return rank;
  for (int i = 0; i < n; ++i) {
    if (order[i] == rank) return i;
  }
  throw_error(cclInternalError, "ring order has no rank %d", rank);
}

int RingPlace::chain_index(int root, const char* who) const {
  if (root < 0 || root >= n)
    throw_error(cclInvalidArgument, "%s: root %d not in [0,%d)", who, root, n);
  return ((pos - position_of(root)) % n + n) % n;
}

RingPlace place_on_ring(const RingParams& p, const char* who) {
  if (p.nranks < 1) throw_error(cclInvalidArgument, "%s: nranks %d < 1", who, p.nranks);
  if (p.rank < 0 || p.rank >= p.nranks) {
    throw_error(cclInvalidArgument, "%s: rank %d not in [0,%d)", who, p.rank, p.nranks);
  }
  RingPlace ring{p.nranks, p.rank, p.order};
  if (p.order.empty()) return ring;
  if (p.order.size() != static_cast<size_t>(p.nranks)) {
    throw_error(cclInvalidArgument, "%s: ring order has %zu entries for %d ranks", who,
                p.order.size(), p.nranks);
  }
  std::vector<bool> seen(p.nranks, false);
  for (size_t i = 0; i < p.order.size(); ++i) {
    const int r = p.order[i];
    if (r < 0 || r >= p.nranks || seen[r]) {
      throw_error(cclInvalidArgument, "%s: ring order is not a permutation (entry %zu is %d)", who,
                  i, r);
    }
    seen[r] = true;
    if (r == p.rank) ring.pos = static_cast<int>(i);
  }
  return ring;
}

Schedule PipelineTable::finish(Schedule s) {
  // In one round r a flow is at chunk r - first: a later chunk index means an earlier first round.
  std::stable_sort(flows_.begin(), flows_.end(), [](const Flow& x, const Flow& y) {
    return x.group != y.group ? x.group < y.group : x.first > y.first;
  });
  size_t rounds = 0, steps = 0;
  for (const Flow& f : flows_) {
    rounds = std::max(rounds, f.first + f.chunks);
    steps += f.chunks;
  }
  s.reserve(s.step_count() + steps, s.round_count() + rounds);
  for (size_t r = 0; r < rounds; ++r) {
    for (const Flow& f : flows_) {
      if (r >= f.first && r - f.first < f.chunks) s.add(f.step(r - f.first));
    }
    s.end_round();  // dropped if empty
  }
  return s;
}

void append_ring_reduce_scatter(Schedule& s, const RingPlace& ring, Piece range, Buffer local,
                                size_t chunk_elems) {
  const int n = ring.n;
  if (range.count == 0) return;
  if (n == 1) {
    if (local != Buffer::Output) {  // skipped by the executor when in place
      s.add_round({Step{StepKind::Copy, -1, Region{local, range.offset, range.count},
                        Region{Buffer::Output, range.offset, range.count}}});
    }
    return;
  }
  const auto piece = [&](long p) { return piece_of_range(range, n, p); };
  const size_t nchunks = chunks_per_piece(split_even(range.count, n, 0).count, chunk_elems);
  const int next = ring.next(), prev = ring.prev();
  const long pos = ring.pos;
  for (int st = 0; st + 1 < n; ++st) {
    const Piece out_piece = piece(pos - 1 - st), in_piece = piece(pos - 2 - st);
    const Buffer from = st == 0 ? local : Buffer::Output;
    for (size_t c = 0; c < nchunks; ++c) {
      const Region tx = sub_region(from, out_piece, nchunks, c);
      if (tx.count != 0) s.add(send_step(next, tx));
      const Region rx_local = sub_region(local, in_piece, nchunks, c);
      const Region rx_out = sub_region(Buffer::Output, in_piece, nchunks, c);
      if (rx_out.count != 0) s.add(Step{StepKind::RecvReduce, prev, rx_local, rx_out});
      s.end_round();
    }
  }
}

void append_ring_allgather(Schedule& s, const RingPlace& ring, Piece range, size_t chunk_elems) {
  const int n = ring.n;
  if (range.count == 0 || n == 1) return;
  const auto piece = [&](long p) { return piece_of_range(range, n, p); };
  const size_t nchunks = chunks_per_piece(split_even(range.count, n, 0).count, chunk_elems);
  const int next = ring.next(), prev = ring.prev();
  const long pos = ring.pos;
  for (int st = 0; st + 1 < n; ++st) {
    const Piece out_piece = piece(pos - st), in_piece = piece(pos - st - 1);
    for (size_t c = 0; c < nchunks; ++c) {
      const Region tx = sub_region(Buffer::Output, out_piece, nchunks, c);
      if (tx.count != 0) s.add(send_step(next, tx));
      const Region rx = sub_region(Buffer::Output, in_piece, nchunks, c);
      if (rx.count != 0) s.add(recv_step(prev, rx));
      s.end_round();
    }
  }
}

}  // namespace ccl::algo
