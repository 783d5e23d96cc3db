// Recursive doubling allreduce (algorithms/recursive_doubling.h): partners swap whole vectors.
#include "algorithms/recursive_doubling.h"

#include "core/tuning/entries/entries.h"

namespace ccl::tune::entries {

namespace {

// p = 2^floor(log2 n): log2 p rounds in which partners at distance d = 1, 2, ..., p/2 swap the
// whole vector and both reduce; n > p adds a fold round before (S in, reduced) and one after
// (S back), at the flat link:
//   sum_d (a_d + S/b_d) + (log2 p + [n>p]) S/g + [n>p] 2 (a_F + S/b_F)
double cost(const CostModel& m, Protocol, double S) {
  const CostModel::Terms& t = m.terms();
  const double rounds = t.rd_a + S * t.rd_inv + t.log2_pow2 * t.reduce(S);
  return t.n > t.pow2 ? rounds + 2 * t.fold.step(S) + t.reduce(S) : rounds;
}

algo::Schedule build(const BuildArgs& a) {
  return algo::recursive_doubling_allreduce(a.ring.nranks, a.ring.rank, a.ring.count);
}

constexpr AlgorithmEntry kEntries[] = {
    {Collective::AllReduce, Algorithm::RecursiveDoubling, unchunked, cost, build, nullptr},
};

}  // namespace

std::span<const AlgorithmEntry> recursive_doubling() { return kEntries; }

}  // namespace ccl::tune::entries
