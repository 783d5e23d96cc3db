// Node-aware (hierarchical) allreduce: each host reduces over its own fast links first, so only
// 1/L of the vector per rank crosses hosts, the L ranks of a host crossing at once, and the slow
// steps number 2(H-1) instead of the flat ring's 2(n-1).
//
// The shape. `host_of_rank[r]` is rank r's host, 0..H-1, and every host has the same number L of
// ranks (n = H * L). A host's local order is increasing rank: local index j of host h is the j-th
// smallest rank on h. Host ring h: the L ranks of host h in local order. Cross ring j: the H ranks
// of local index j, in host order.
//
// The steps, each a ring pipelined in chunks of at most `chunk_elems` (the phases of
// ring_place.h), one after the other:
//   1. reduce-scatter on every host ring: the vector is cut in L pieces (split_even); local index
//      j ends with piece j, reduced over its host, in Output;
//   2. allreduce of piece j on cross ring j: reduce-scatter in H sub-pieces, the owner of each
//      sub-piece finalizes it (avg), allgather; piece j is then reduced over all n ranks;
//   3. allgather on every host ring: every rank ends with every piece.
// Every rank's result has the same bits: each element is summed once, on the rank that owns its
// sub-piece (step 1's chain inside each host, then step 2's chain over the hosts), and both
// allgathers only copy that rank's bits.
//
// Per rank: steps 1 and 3 send (L-1)/L * count each inside the host, step 2 sends
// 2 (H-1)/(H L) * count to other hosts; 2 (n-1)/n * count in all, as the flat ring. Rounds:
// 2 (L-1) K1 + 2 (H-1) K2 + 1 (the finalize), with K1 chunks per piece (count/L) and K2 per
// sub-piece (count/(L H)). H == 1 is a ring allreduce of the host, L == 1 one across hosts
// (without the copy a separate step 1 would need). Input is only read, and each element of it is
// read before its Output alias is written (in place is correct); no Scratch. One rank: Copy, then
// Finalize. count 0: no steps. Hosts of unequal size, or a host_of_rank that does not give every
// rank a host in 0..H-1: InvalidArgument.
#pragma once

#include <cstddef>
#include <span>

#include "algorithms/schedule.h"

namespace ccl::algo {

struct HierarchicalParams {
  int nranks = 1;
  int rank = 0;
  size_t count = 0;                   // elements
  size_t chunk_elems = 0;             // 0: no chunking
  std::span<const int> host_of_rank;  // nranks entries: the host index of every rank
};

Schedule hierarchical_allreduce(const HierarchicalParams& params);

}  // namespace ccl::algo
