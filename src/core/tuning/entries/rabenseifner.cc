// Rabenseifner's allreduce (algorithms/rabenseifner.h): reduce-scatter by recursive halving,
// allgather by recursive doubling.
#include "algorithms/rabenseifner.h"

#include "core/tuning/entries/entries.h"

namespace ccl::tune::entries {

namespace {

// The reduce-scatter's distance d = p/2 ... 1 moves S d/p and reduces it, the allgather moves
// the same sizes back, the fold as in recursive doubling:
//   sum_d 2 (a_d + (S d/p)/b_d) + (p-1)/p S/g + [n>p] (2 (a_F + S/b_F) + S/g)
double cost(const CostModel& m, Protocol, double S) {
  const CostModel::Terms& t = m.terms();
  const double rounds = t.rab_a + S * t.rab_inv + t.reduce(S * (t.pow2 - 1) / t.pow2);
  return t.n > t.pow2 ? rounds + 2 * t.fold.step(S) + t.reduce(S) : rounds;
}

algo::Schedule build(const BuildArgs& a) {
  return algo::rabenseifner_allreduce(a.ring.nranks, a.ring.rank, a.ring.count);
}

constexpr AlgorithmEntry kEntries[] = {
    {Collective::AllReduce, Algorithm::Rabenseifner, unchunked, cost, build, nullptr},
};

}  // namespace

std::span<const AlgorithmEntry> rabenseifner() { return kEntries; }

}  // namespace ccl::tune::entries
