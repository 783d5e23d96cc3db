#include "algorithms/double_binary_tree.h"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "algorithms/ring_place.h"
#include "base/error.h"

namespace ccl::algo {

namespace {

// Node v of the in-order binary tree over 0..n-1 (the header draws it). Links are virtual nodes.
TreeLinks btree_node(int n, int v) {
  TreeLinks node;
  if (v == 0) {
    if (n > 1) node.children[0] = static_cast<int>(std::bit_floor(static_cast<unsigned>(n - 1)));
    return node;
  }
  const int64_t b = v & -v;  // lowest set bit
  // The parent is the nearest node above with the next bit: v + b if bit 2b of v is clear (v is a
  // left child), v - b if it is set (a right child); past the end, v - b takes the right child in.
  int64_t up = (v & 2 * b) != 0 ? v - b : v + b;
  if (up >= n) up = v - b;
  node.parent = static_cast<int>(up);
  if (b > 1) {
    node.children[0] = static_cast<int>(v - b / 2);  // always < v < n
    for (int64_t h = b / 2; h >= 1; h /= 2) {
      if (v + h < n) {
        node.children[1] = static_cast<int>(v + h);
        break;
      }
    }
  }
  return node;
}

int to_virtual(int n, int rank, int tree) {
  if (tree == 0) return rank;
  return n % 2 == 0 ? n - 1 - rank : (rank - 1 + n) % n;
}
int to_rank(int n, int v, int tree) {
  if (v < 0 || tree == 0) return v;
  return n % 2 == 0 ? n - 1 - v : (v + 1) % n;
}

int ready_round(int n, int v);

}  // namespace

int tree_depth(int n, int v) {
  int depth = 0;
  for (; v != 0; v = btree_node(n, v).parent) ++depth;
  return depth;
}

// Timing of the up flow, in rounds relative to the chunk index (chunk c of an offset o moves in
// round o + c). A node's partial sum of a chunk is complete `ready` rounds after its children's
// sends.
TreeUpTiming tree_up_timing(int n, int v) {
  const TreeLinks node = btree_node(n, v);
  TreeUpTiming t;
  for (int i = 0; i < 2; ++i) {
    if (node.children[i] >= 0) t.child_send[i] = ready_round(n, node.children[i]) + 1;
  }
  // Both children's chunks reduce into the same elements: they must arrive in different rounds.
  if (node.children[1] >= 0 && t.child_send[1] == t.child_send[0]) ++t.child_send[1];
  t.ready = std::max(t.child_send[0], t.child_send[1]);
  return t;
}

namespace {

int ready_round(int n, int v) {
  if (v != 0) {
    const int64_t b = v & -v;
    // A complete subtree of height log2(b): two equal children cost two rounds per level. Left
    // children always are complete, so only the right spine recurses: O(log n) in all.
    if (v + b - 1 < n) return 2 * std::countr_zero(static_cast<uint64_t>(b)) - 1;
  }
  return tree_up_timing(n, v).ready;
}

void check_ranks(int nranks, int rank, const char* who) {
  if (nranks < 1) throw_error(cclInvalidArgument, "%s: nranks %d < 1", who, nranks);
  if (rank < 0 || rank >= nranks) {
    throw_error(cclInvalidArgument, "%s: rank %d not in [0,%d)", who, rank, nranks);
  }
}

}  // namespace

TreeLinks double_binary_tree_links(int nranks, int rank, int tree) {
  check_ranks(nranks, rank, "double_binary_tree_links");
  if (tree != 0 && tree != 1) {
    throw_error(cclInvalidArgument, "double_binary_tree_links: tree %d is not 0 or 1", tree);
  }
  const TreeLinks v = btree_node(nranks, to_virtual(nranks, rank, tree));
  return TreeLinks{to_rank(nranks, v.parent, tree),
                   {to_rank(nranks, v.children[0], tree), to_rank(nranks, v.children[1], tree)}};
}

int double_binary_tree_root(int nranks, int tree) {
  check_ranks(nranks, 0, "double_binary_tree_root");
  if (tree != 0 && tree != 1) {
    throw_error(cclInvalidArgument, "double_binary_tree_root: tree %d is not 0 or 1", tree);
  }
  return to_rank(nranks, 0, tree);
}

Schedule double_binary_tree_allreduce(const TreeParams& params) {
  const RingPlace place = place_on_ring(params, "double_binary_tree_allreduce");
  const int n = place.n;
  const size_t count = params.count;
  Schedule s;
  if (count == 0) return s;  // touches nothing; buffers may be NULL
  if (n == 1) return single_rank_reduction(count);
  const size_t nchunks = chunks_per_piece(split_even(count, 2, 0).count, params.chunk_elems);
  // Both trees have the same shape, so the same timing; rounds are numbered alike on every rank
  // and every message sits in the same round at both ends (so no send waits on a later round).
  const int root_ready = ready_round(n, 0);
  PipelineTable table;
  // Tree 0's steps come before tree 1's in every round, at both ends of a pair, so that two
  // messages between one pair in one round (one per tree) match in the same order.
  for (int tree = 0; tree < 2; ++tree) {
    const Piece half = split_even(count, 2, static_cast<size_t>(tree));
    if (half.count == 0) continue;
    const int v = to_virtual(n, place.pos, tree);
    // The rank at virtual node u (u >= 0) of this tree.
    const auto rank_of = [&](int u) { return place.at(to_rank(n, u, tree)); };
    const TreeLinks node = btree_node(n, v);
    const TreeUpTiming up = tree_up_timing(n, v);
    // The child whose chunks arrive first reduces with Input; the later one with that sum.
    const int first = node.children[1] >= 0 && up.child_send[1] < up.child_send[0] ? 1 : 0;
    int send_up = -1;
    if (node.parent >= 0) {
      const TreeLinks parent = btree_node(n, node.parent);
      send_up = tree_up_timing(n, node.parent).child_send[parent.children[0] == v ? 0 : 1];
    }
    // Round of chunk 0's arrival from the parent; at the root, of its finalize.
    const size_t down = static_cast<size_t>(root_ready + 1 + tree_depth(n, v));
    const bool leaf = node.children[0] < 0;
    // The smaller half may have fewer chunks: the empty ones are the last (split_even).
    const size_t chunks = std::min(nchunks, half.count);
    const auto in = [=](size_t c) { return sub_region(Buffer::Input, half, nchunks, c); };
    const auto out = [=](size_t c) { return sub_region(Buffer::Output, half, nchunks, c); };
    const auto g = static_cast<size_t>(tree);
    for (int i = 0; i < 2; ++i) {
      if (node.children[i] < 0) continue;
      const int child = rank_of(node.children[i]);
      const bool with_input = i == first;
      table.add(g, static_cast<size_t>(up.child_send[i]), chunks, [=](size_t c) {
        return Step{StepKind::RecvReduce, child, with_input ? in(c) : out(c), out(c)};
      });
    }
    if (node.parent >= 0) {
      const int parent = rank_of(node.parent);
      table.add(g, static_cast<size_t>(send_up), chunks,
                [=](size_t c) { return send_step(parent, leaf ? in(c) : out(c)); });
      table.add(g, down, chunks, [=](size_t c) { return recv_step(parent, out(c)); });
    } else {
      table.add(g, down, chunks, [=](size_t c) {
        return Step{StepKind::Finalize, -1, Region{}, out(c)};
      });
    }
    for (int child : node.children) {
      if (child < 0) continue;
      const int to = rank_of(child);
      table.add(g, down + 1, chunks, [=](size_t c) { return send_step(to, out(c)); });
    }
  }
  return table.finish(std::move(s));
}

}  // namespace ccl::algo
