// The dissemination barrier (algorithms/ring.h): in round k rank r signals r + 2^k.
#include "algorithms/ring.h"
#include "core/tuning/entries/entries.h"

namespace ccl::tune::entries {

namespace {

// ceil(log2 n) rounds of an empty message:  h a_F
double cost(const CostModel& m, Protocol, double) {
  const CostModel::Terms& t = m.terms();
  return t.tree_height * t.flat.a;
}

algo::Schedule build(const BuildArgs& a) {
  return algo::dissemination_barrier(a.ring.nranks, a.ring.rank);
}

// Either protocol names the same schedule (it moves no data).
constexpr AlgorithmEntry kEntries[] = {
    {Collective::Barrier, Algorithm::Dissemination, always, cost, build, nullptr, true},
};

}  // namespace

std::span<const AlgorithmEntry> dissemination() { return kEntries; }

}  // namespace ccl::tune::entries
