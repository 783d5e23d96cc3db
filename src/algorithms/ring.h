// Ring schedules over a rank order (a permutation of 0..nranks-1; the topology picks it).
//
// allreduce: reduce-scatter then allgather, 2(n-1) steps, each piece of count/n elements split
//   into chunks of at most `chunk_elems`; every rank sends and receives 2(n-1)/n of the data.
// broadcast: a pipelined chain root -> order[next] -> ... ; chunks of at most `chunk_elems`
//   flow down the chain one round behind each other.
// allgather: n-1 steps, each rank forwarding the piece it received last; `count` is the elements
//   each rank contributes (Output holds n * count, rank q's at q * count). Every rank sends and
//   receives (n-1) * count elements. It is allgatherv with equal counts.
// allgatherv: the same ring, rank q contributing counts[q] elements (its Input holds
//   counts[rank]) that land at Output + displs[q]; `params.count` is not used. At step st (0..n-2)
//   a rank sends the piece of the rank st places before it on the ring (its own at step 0, from
//   Input) and receives the piece of the rank st+1 places before it; the copy of its own piece
//   into Output rides along with the first transfer. Each piece is cut into chunks of at most
//   `chunk_elems` on its own, and a rank sends sum(counts) - counts[next] elements. Zero-count
//   pieces exchange no messages (sender and receiver both skip them) and rounds left empty are
//   dropped. In place, Input is Output + displs[rank]. The pieces must not overlap in Output
//   (not checked: that would cost n log n per rank); gaps between them are left untouched.
// reduce-scatter: n-1 steps of receive-reduce-forward; `count` is the elements each rank ends
//   with (Input holds n * count, rank q's result is piece q); partial sums go through Scratch.
// barrier: dissemination, ceil(log2 n) rounds of zero-element messages.
#pragma once

#include <span>

#include "algorithms/schedule.h"

namespace ccl::algo {

using RingParams = ScheduleParams;

Schedule ring_allreduce(const RingParams& params);
Schedule chain_broadcast(const RingParams& params, int root);
Schedule ring_allgather(const RingParams& params);
Schedule ring_allgatherv(const RingParams& params, std::span<const size_t> counts,
                         std::span<const size_t> displs);
Schedule ring_reduce_scatter(const RingParams& params);
Schedule dissemination_barrier(int nranks, int rank);

}  // namespace ccl::algo
