// Ring schedules over a rank order (a permutation of 0..nranks-1; the topology picks it).
//
// allreduce: reduce-scatter then allgather, 2(n-1) steps, each piece of count/n elements split
//   into chunks of at most `chunk_elems`; every rank sends and receives 2(n-1)/n of the data.
// broadcast: a pipelined chain root -> order[next] -> ... ; chunks of at most `chunk_elems`
//   flow down the chain one round behind each other.
// allgather: n-1 steps, each rank forwarding the piece it received last; `count` is the elements
//   each rank contributes (Output holds n * count, rank q's at q * count).
// reduce-scatter: n-1 steps of receive-reduce-forward; `count` is the elements each rank ends
//   with (Input holds n * count, rank q's result is piece q); partial sums go through Scratch.
// barrier: dissemination, ceil(log2 n) rounds of zero-element messages.
#pragma once

#include <span>

#include "algorithms/schedule.h"

namespace ccl::algo {

struct RingParams {
  int nranks = 1;
  int rank = 0;
  size_t count = 0;            // elements
  size_t chunk_elems = 0;      // 0: no chunking
  std::span<const int> order;  // empty: identity
};

Schedule ring_allreduce(const RingParams& params);
Schedule chain_broadcast(const RingParams& params, int root);
Schedule ring_allgather(const RingParams& params);
Schedule ring_reduce_scatter(const RingParams& params);
Schedule dissemination_barrier(int nranks, int rank);

}  // namespace ccl::algo
