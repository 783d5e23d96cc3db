// Broadcast and reduce along one binary tree with any root: log2(n) hops instead of the chain's
// n-1 (ring.h, chain_reduce.h), for messages small enough that latency, not bandwidth, decides.
//
// The shape. Tree 0 of double_binary_tree_links (in-order layout) drawn over the ranks relabelled
// so that the root is node 0: with positions p in `params.order` (empty: rank = position), the
// rank at position p is node (p - position of root) mod n. Node 0 has one child; every other node
// at most two; for n > 1 the tree is at most floor(log2(n-1)) + 1 edges deep. The message is
// cut into near-equal chunks of at most `chunk_elems` (0: one chunk), which follow each other one
// round apart, each moving one edge per round; every message sits in the same round at the sender
// and the receiver, so the schedules need no buffering (correct with rendezvous sends).
//
// tree_broadcast: the root sends chunk c of its Input to its child in round c (and copies Input to
//   Output, skipped when in place); a node at depth d receives chunk c into Output in round
//   d-1+c and sends it on to its children in round d+c. With K chunks and depth h: K + h - 1
//   rounds. Every non-root receives `count` once; a node sends `count` per child (at most 2, the
//   root 1): (n-1) * count on the wire, twice the chain's per-rank send load at inner nodes, so
//   the chain wins for large messages. Only the root's Input is read.
// tree_reduce: the up flow of the double binary tree (double_binary_tree.h) through one tree: a
//   leaf sends its Input chunk; an inner node receives a chunk from each child, one child per
//   round (the first reduces with Input, the second with that partial sum), and sends the sum to
//   its parent; the root reduces into Output and finalizes (avg) each chunk the round after its
//   last part arrives. About K + 2h rounds (two children of equal height cost a round each per
//   level). Every non-root sends `count` once; a node receives `count` per child. Non-roots never
//   touch Output (their recvbuff may be NULL): an inner node keeps its partial sums in a ring of
//   Scratch chunk slots, one per round a chunk waits between its first child's arrival and its
//   send (at most about 2h + 1 chunks, and never more than `count`). At the root each Input
//   element is read before its Output alias is written, so in place is correct.
// One rank: broadcast copies, reduce copies then finalizes. count 0: no steps. A root or order
// that is not valid: InvalidArgument.
#pragma once

#include "algorithms/double_binary_tree.h"
#include "algorithms/schedule.h"

namespace ccl::algo {

Schedule tree_broadcast(const TreeParams& params, int root);
Schedule tree_reduce(const TreeParams& params, int root);

}  // namespace ccl::algo
