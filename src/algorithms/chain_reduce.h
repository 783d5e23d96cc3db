// Reduce to one root along a pipelined chain over a rank order: the mirror of chain_broadcast
// (ring.h), using the same links in the other direction.
//
// The chain is the ranks of `params.order` that follow the root, root+1 ... root+(n-1) (positions
// in the order, wrapping around); data flows from the farthest back towards the root. The message
// is cut into near-equal chunks of at most `params.chunk_elems` (0: one chunk).
//   - the farthest rank sends chunk c of its Input in its round c;
//   - a middle rank receives chunk c from the rank after it and reduces it with its own Input
//     chunk into Scratch (round c), then forwards that partial sum (round c+1); two Scratch
//     chunk slots alternate, so a round fills one while the other is sent;
//   - the root reduces chunk c with its Input into Output (round c) and applies the op's final
//     step (avg's divide) to chunk c in round c+1, while chunk c+1 arrives.
// A chunk moves one hop per round: with K chunks the root is done after n-1+K-1 hops, and every
// non-root rank sends `count` elements once ((n-1) * count on the wire in all, count into the
// root). Non-roots never touch Output (their recvbuff may be NULL); Input is only read, and at
// the root each element of Input is read before its Output alias is written, so in place is
// correct. One rank: Copy, then Finalize. count 0: no steps.
#pragma once

#include "algorithms/ring.h"
#include "algorithms/schedule.h"

namespace ccl::algo {

Schedule chain_reduce(const RingParams& params, int root);

}  // namespace ccl::algo
