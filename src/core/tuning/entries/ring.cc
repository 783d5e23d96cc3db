// The ring (algorithms/ring.h, chain_reduce.h): allreduce, allgather and reduce-scatter around
// the ring order; broadcast and reduce as a pipelined chain along it.
//
// The ring, allgather and reduce-scatter schedules run step by step (the K chunks of step s all
// go before step s+1), and every link carries one chunk per round, so their Simple form only adds
// latency: K a per step. Chunking pays off only in the chain, where it turns depth x (time of
// the message) into (depth + K) x (time of a chunk).
#include "algorithms/ring.h"

#include "algorithms/chain_reduce.h"
#include "core/tuning/entries/entries.h"

namespace ccl::tune::entries {

namespace {

// Allreduce: reduce-scatter then allgather, 2(n-1) steps, each moving a piece p = S/n (in K
// chunks), the first n-1 also reducing it:  2(n-1) (K a_F + p/b_F) + (n-1) p/g
double allreduce_cost(const CostModel& m, Protocol protocol, double S) {
  const CostModel::Terms& t = m.terms();
  const double p = S / t.n;
  const double K = t.chunks(p, protocol);
  return 2 * (t.n - 1) * (K * t.flat.a + p * t.flat.inv) + (t.n - 1) * t.reduce(p);
}

// Chain: K chunks of q = S/K, one hop per round, n-1 hops, each hop of a reduce also reducing
// the chunk:  broadcast (n-1 + K-1)(a_F + q/b_F)     reduce (n-1 + K-1)(a_F + q/b_F + q/g)
double chain(const CostModel& m, Protocol protocol, double S, bool reducing) {
  const CostModel::Terms& t = m.terms();
  const double K = t.chunks(S, protocol);
  const double q = S / K;
  return (t.n - 1 + K - 1) * (t.flat.step(q) + (reducing ? t.reduce(q) : 0.0));
}
double broadcast_cost(const CostModel& m, Protocol p, double S) { return chain(m, p, S, false); }
double reduce_cost(const CostModel& m, Protocol p, double S) { return chain(m, p, S, true); }

// Allgather (S = one rank's piece): n-1 steps of S (in K chunks):  (n-1)(K a_F + S/b_F)
// Reduce-scatter: n-1 steps of S, each reduced:  (n-1)(K a_F + S/b_F + S/g)
double pieces(const CostModel& m, Protocol protocol, double S, bool reducing) {
  const CostModel::Terms& t = m.terms();
  const double K = t.chunks(S, protocol);
  return (t.n - 1) * (K * t.flat.a + S * t.flat.inv + (reducing ? t.reduce(S) : 0.0));
}
double allgather_cost(const CostModel& m, Protocol p, double S) { return pieces(m, p, S, false); }
double reducescatter_cost(const CostModel& m, Protocol p, double S) {
  return pieces(m, p, S, true);
}

algo::Schedule build_allreduce(const BuildArgs& a) { return algo::ring_allreduce(a.ring); }
algo::Schedule build_broadcast(const BuildArgs& a) { return algo::chain_broadcast(a.ring, a.root); }
algo::Schedule build_reduce(const BuildArgs& a) { return algo::chain_reduce(a.ring, a.root); }
algo::Schedule build_allgather(const BuildArgs& a) { return algo::ring_allgather(a.ring); }
algo::Schedule build_reducescatter(const BuildArgs& a) { return algo::ring_reduce_scatter(a.ring); }

constexpr AlgorithmEntry kEntries[] = {
    {Collective::AllReduce, Algorithm::Ring, always, allreduce_cost, build_allreduce, nullptr},
    {Collective::Broadcast, Algorithm::Ring, always, broadcast_cost, build_broadcast, nullptr},
    {Collective::Reduce, Algorithm::Ring, always, reduce_cost, build_reduce, nullptr},
    {Collective::AllGather, Algorithm::Ring, always, allgather_cost, build_allgather, nullptr},
    {Collective::ReduceScatter, Algorithm::Ring, always, reducescatter_cost, build_reducescatter,
     nullptr},
};

}  // namespace

std::span<const AlgorithmEntry> ring() { return kEntries; }

}  // namespace ccl::tune::entries
