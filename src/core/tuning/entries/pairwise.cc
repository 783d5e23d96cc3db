// The pairwise all-to-all (algorithms/alltoall.h): n-1 rounds, in round k rank r sends its block
// to r+k and receives from r-k.
#include "algorithms/alltoall.h"
#include "core/tuning/entries/entries.h"

namespace ccl::tune::entries {

namespace {

// S = one block: n-1 rounds of one step of S each way:  (n-1)(a_F + S/b_F)
double cost(const CostModel& m, Protocol, double S) {
  const CostModel::Terms& t = m.terms();
  return (t.n - 1) * t.flat.step(S);
}

algo::Schedule build(const BuildArgs& a) {
  return algo::pairwise_alltoall(a.ring.nranks, a.ring.rank, a.ring.count);
}

// Either protocol names the same schedule (it has no chunks).
constexpr AlgorithmEntry kEntries[] = {
    {Collective::AlltoAll, Algorithm::Pairwise, always, cost, build, nullptr, true},
};

}  // namespace

std::span<const AlgorithmEntry> pairwise() { return kEntries; }

}  // namespace ccl::tune::entries
