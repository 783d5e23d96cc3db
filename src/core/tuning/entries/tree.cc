// Binary trees: the double binary tree allreduce (algorithms/double_binary_tree.h) and one
// pipelined binary tree from the root for broadcast and reduce (algorithms/tree_rooted.h), both
// over the tree order.
#include "algorithms/double_binary_tree.h"
#include "algorithms/tree_rooted.h"
#include "core/tuning/entries/entries.h"

namespace ccl::tune::entries {

namespace {

// Double binary tree: each half S/2 goes up one tree and down again, in K chunks of
// q = S/(2K). Depth D = 3h rounds (h edges up, up to h more where a node reduces its two
// children one per round, h edges down); the chunks follow one round apart, so R = D + K - 1
// rounds. The busiest rank sends E halves (a half to its parent and one to each child, in each
// tree: up to 4, so 2S, for large n; 2, so S, for n = 2, like the ring) plus the pipeline fill,
// (D - 1) q, and reduces C halves (one per child):
//   (D + K - 1) a_F + (E S/2 + (D-1) q)/b_F + C S/2 /g
double allreduce_cost(const CostModel& m, Protocol protocol, double S) {
  const CostModel::Terms& t = m.terms();
  const double D = 3 * t.tree_height;
  const double half = S / 2;
  const double K = t.chunks(half, protocol);
  const double q = half / K;
  return (D + K - 1) * t.flat.a + (t.tree_sent_halves * half + (D - 1) * q) * t.flat.inv +
         t.reduce(t.tree_reduced_halves * half);
}

// One binary tree with the root on top, h = ceil(log2 n) edges deep, K chunks of q one round
// apart. Broadcast: a chunk moves one edge per round, an inner rank sends it to its two
// children; reduce: an inner rank receives a chunk from each child one round apart (two children
// of equal height cost a round each per level: depth 2h) and reduces both, so in steady state it
// takes in 2q per round:
//   broadcast (h + K-1)(a_F + 2q/b_F)         reduce (2h + K-1)(a_F + 2q/b_F + 2q/g)
double rooted(const CostModel& m, Protocol protocol, double S, bool reducing) {
  const CostModel::Terms& t = m.terms();
  const double K = t.chunks(S, protocol);
  const double q = S / K;
  const double depth = reducing ? 2 * t.tree_height : t.tree_height;
  return (depth + K - 1) * (t.flat.step(2 * q) + (reducing ? t.reduce(2 * q) : 0.0));
}
double broadcast_cost(const CostModel& m, Protocol p, double S) { return rooted(m, p, S, false); }
double reduce_cost(const CostModel& m, Protocol p, double S) { return rooted(m, p, S, true); }

algo::Schedule build_allreduce(const BuildArgs& a) {
  return algo::double_binary_tree_allreduce(a.tree);
}
algo::Schedule build_broadcast(const BuildArgs& a) { return algo::tree_broadcast(a.tree, a.root); }
algo::Schedule build_reduce(const BuildArgs& a) { return algo::tree_reduce(a.tree, a.root); }

constexpr AlgorithmEntry kEntries[] = {
    {Collective::AllReduce, Algorithm::Tree, always, allreduce_cost, build_allreduce, nullptr},
    {Collective::Broadcast, Algorithm::Tree, always, broadcast_cost, build_broadcast, nullptr},
    {Collective::Reduce, Algorithm::Tree, always, reduce_cost, build_reduce, nullptr},
};

}  // namespace

std::span<const AlgorithmEntry> tree() { return kEntries; }

}  // namespace ccl::tune::entries
