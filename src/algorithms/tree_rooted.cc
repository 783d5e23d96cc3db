#include "algorithms/tree_rooted.h"

#include <algorithm>

#include "algorithms/ring_place.h"

namespace ccl::algo {

namespace {

// This rank's node in tree 0 relabelled to `root`, and the rank of any node.
struct RootedPlace {
  RingPlace place;
  int node = 0;  // 0: the root
  TreeLinks links;
  int rank_of(int u) const { return place.at(place.pos - node + u); }  // u >= 0
};

RootedPlace rooted_place(const TreeParams& p, int root, const char* who) {
  RootedPlace r;
  r.place = place_on_ring(p, who);
  r.node = r.place.chain_index(root, who);
  r.links = double_binary_tree_links(r.place.n, r.node, 0);
  return r;
}

}  // namespace

Schedule tree_broadcast(const TreeParams& params, int root) {
  const RootedPlace me = rooted_place(params, root, "tree_broadcast");
  const size_t count = params.count;
  if (count == 0) return Schedule{};  // touches nothing; buffers may be NULL
  const size_t nchunks = chunks_per_piece(count, params.chunk_elems);
  const Piece whole{0, count};
  // Rounds are numbered alike on every rank (chunk 0's timing is the same tree everywhere).
  PipelineTable table;
  // Chunk c leaves a node at depth d in round d + c (the root's from Input).
  const auto depth = static_cast<size_t>(tree_depth(me.place.n, me.node));
  const Buffer from = me.node == 0 ? Buffer::Input : Buffer::Output;
  if (me.node == 0) {
    // Skipped by the executor when in place.
    table.add(0, 0, 1, [=](size_t) {
      return Step{StepKind::Copy, -1, Region{Buffer::Input, 0, count},
                  Region{Buffer::Output, 0, count}};
    });
  }
  if (me.links.parent >= 0) {
    const int parent = me.rank_of(me.links.parent);
    table.add(0, depth - 1, nchunks, [=](size_t c) {
      return recv_step(parent, sub_region(Buffer::Output, whole, nchunks, c));
    });
  }
  for (int child : me.links.children) {
    if (child < 0) continue;
    const int to = me.rank_of(child);
    table.add(0, depth, nchunks,
              [=](size_t c) { return send_step(to, sub_region(from, whole, nchunks, c)); });
  }
  return table.finish(Schedule{});
}

Schedule tree_reduce(const TreeParams& params, int root) {
  const RootedPlace me = rooted_place(params, root, "tree_reduce");
  const size_t count = params.count;
  Schedule s;
  if (count == 0) return s;  // touches nothing; buffers may be NULL
  const int n = me.place.n;
  if (n == 1) return single_rank_reduction(count);
  const size_t nchunks = chunks_per_piece(count, params.chunk_elems);
  const Piece whole{0, count};
  const TreeLinks& links = me.links;
  const TreeUpTiming up = tree_up_timing(n, me.node);
  const bool leaf = links.children[0] < 0;
  // The child whose chunks arrive first reduces with Input; the later one with that sum.
  const int first = links.children[1] >= 0 && up.child_send[1] < up.child_send[0] ? 1 : 0;
  int send_up = -1;  // when chunk 0 goes to the parent
  if (links.parent >= 0) {
    const TreeLinks parent = double_binary_tree_links(n, links.parent, 0);
    send_up = tree_up_timing(n, links.parent).child_send[parent.children[0] == me.node ? 0 : 1];
  }
  // Where chunk c's partial sum lives: Output at the root; at an inner node one of `slots` Scratch
  // slots, chunk c in slot c % slots, held from its first arrival to its send (a later chunk
  // reuses the slot only in the round after that send).
  size_t slots = 0, slot_elems = 0;
  if (!leaf && links.parent >= 0) {
    const auto held = static_cast<size_t>(send_up - up.child_send[first] + 1);
    slots = std::min(nchunks, held);
    slot_elems = split_even(count, nchunks, 0).count;
    s.scratch_elems = slots * slot_elems;
  }
  const auto partial = [=](size_t c) {
    if (links.parent < 0) return sub_region(Buffer::Output, whole, nchunks, c);
    return Region{Buffer::Scratch, (c % slots) * slot_elems, split_even(count, nchunks, c).count};
  };
  const auto in = [=](size_t c) { return sub_region(Buffer::Input, whole, nchunks, c); };
  PipelineTable table;
  for (int i = 0; i < 2; ++i) {
    if (links.children[i] < 0) continue;
    const int child = me.rank_of(links.children[i]);
    const bool with_input = i == first;
    table.add(0, static_cast<size_t>(up.child_send[i]), nchunks, [=](size_t c) {
      return Step{StepKind::RecvReduce, child, with_input ? in(c) : partial(c), partial(c)};
    });
  }
  if (links.parent >= 0) {
    const int parent = me.rank_of(links.parent);
    table.add(0, static_cast<size_t>(send_up), nchunks,
              [=](size_t c) { return send_step(parent, leaf ? in(c) : partial(c)); });
  } else {
    table.add(0, static_cast<size_t>(up.ready) + 1, nchunks, [=](size_t c) {
      return Step{StepKind::Finalize, -1, Region{}, partial(c)};
    });
  }
  return table.finish(std::move(s));
}

}  // namespace ccl::algo
