// Double binary tree allreduce (the idea of NCCL's tree algorithm): latency that grows with
// log2(n) instead of the ring's n, at nearly the ring's bandwidth.
//
// The shape. One binary tree over 0..n-1 in in-order layout: node v with lowest set bit b has
// children v - b/2 and v + b/2 (the second shrunk to v + b/4, v + b/8, ... while it is >= n, or
// none), so the odd nodes are the leaves; node 0 is the root and its one child is the largest power
// of two < n. The second tree is the first with every rank r relabelled n-1-r (n even, a mirror) or
// r+1 mod n (n odd, a shift). Each rank is a leaf in one tree and an inner node in the other,
// except for n odd, where rank 0 is inner in both (it has one child in each). So every rank has at
// most two children over both trees, and a tree is at most floor(log2 n) + 1 edges deep.
//
// The schedule. The vector is cut in two halves (split_even); half t goes through tree t, the two
// at once. Each half is cut into chunks of at most `chunk_elems` (0: one chunk; both halves use the
// larger half's chunk count, and empty chunks are skipped). Chunk c of a half:
//   - goes up: a leaf sends its Input chunk; an inner node receives it from its children one child
//     per round (the first reduces with Input into Output, the second with that partial sum) and
//     sends the partial sum in Output on to its parent; the root then finalizes it (avg);
//   - comes down: the root sends it to its children, and every node receives it into Output and
//     forwards it to its own children the round after. Every rank's result is the root's bits.
// A chunk moves one tree edge per round (an inner node with two children of equal height takes one
// more round, to reduce them one at a time), and the chunks follow each other one round apart, so
// the up and down flows of different chunks overlap. With K chunks and tree height h that is about
// K + 3h rounds. Every message is placed in the same round number at the sender and the receiver,
// so the schedule needs no buffering (it is correct with rendezvous sends).
// Per rank, over both trees: a leaf sends count/2 up and receives count/2; an inner node also
// receives one half per child and sends one per child; at most 2 * count elements each way (the
// ring: 2(n-1)/n * count), and 2 * count * (n-1) on the wire in all.
// Input is only read (in place, the first reduction writes Output over the Input element it has
// just read, which nothing reads again); no Scratch. One rank: Copy, then Finalize. count 0: no
// steps.
//
// Positions. The trees are drawn over positions 0..n-1; `TreeParams::order` (empty: the identity)
// puts rank order[i] at position i, as RingParams::order does for rings, so the topology can put
// the ranks that share fast links next to each other. double_binary_tree_links and _root speak of
// positions.
#pragma once

#include <array>
#include <cstddef>
#include <span>

#include "algorithms/schedule.h"

namespace ccl::algo {

using TreeParams = ScheduleParams;

// A rank's neighbours in one tree; -1 where there is none. `children` holds the present ones
// first.
struct TreeLinks {
  int parent = -1;
  std::array<int, 2> children{-1, -1};
};

// Rank `rank`'s place in tree `tree` (0 or 1) of the double binary tree over `nranks` ranks.
// Pure, O(log n); throws InvalidArgument on a bad argument.
TreeLinks double_binary_tree_links(int nranks, int rank, int tree);
// The root of tree `tree`: 0 for tree 0; for tree 1, n-1 (n even) or 1 (n odd, n > 1).
int double_binary_tree_root(int nranks, int tree);

Schedule double_binary_tree_allreduce(const TreeParams& params);

// The pipelined up flow through tree 0 over `nranks` positions, shared with tree_rooted.cc (one
// tree). Chunk c of a flow moves c rounds after chunk 0, so these are the rounds of chunk 0:
// `child_send[i]` is when child i sends its partial sum to `node` (-1: no such child; the two
// differ, as both reduce into the same elements) and `ready` when the node's own partial sum is
// complete (-1 for a leaf, whose Input is complete from the start). Pure, O(log n); `node` must be
// in [0, nranks) (not checked: the builders' own checks come first).
struct TreeUpTiming {
  std::array<int, 2> child_send{-1, -1};
  int ready = -1;
};
TreeUpTiming tree_up_timing(int nranks, int node);
// Edges from the root (position 0) of tree 0 to `node`. O(log n).
int tree_depth(int nranks, int node);

}  // namespace ccl::algo
