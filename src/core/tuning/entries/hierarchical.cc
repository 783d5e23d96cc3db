// The hierarchical allreduce (algorithms/hierarchical.h): a ring reduce-scatter inside each host,
// an allreduce across hosts of each piece, an allgather inside each host.
#include "algorithms/hierarchical.h"

#include "core/tuning/entries/entries.h"

namespace ccl::tune::entries {

namespace {

const char* unavailable(const Shape& s, Protocol, size_t) {
  if (s.nhosts < 2) return "needs two hosts or more";
  if (!s.uniform_hosts) return "hosts have different numbers of ranks";
  if (s.ranks_per_host < 2) return "needs two ranks per host or more";
  return nullptr;
}

// A ring reduce-scatter among the L ranks of a host (L-1 steps of SL = S/L, each reduced), then
// L concurrent ring allreduces of SL among the H hosts (rank i of every host with rank i of the
// others; 2(H-1) steps of SL/H, all L sharing the host's network link), then a ring allgather
// inside the host (L-1 steps of SL). K1 = chunks of SL, K2 = chunks of SL/H:
//   (L-1)(K1 a_I + SL/b_I + SL/g) + 2(H-1)(K2 a_N + SL/H / (b_N/L)) + (H-1) SL/H /g
//   + (L-1)(K1 a_I + SL/b_I)
double cost(const CostModel& m, Protocol protocol, double S) {
  const CostModel::Terms& t = m.terms();
  const double L = m.shape().ranks_per_host, H = m.shape().nhosts;
  const double SL = S / L, SH = SL / H;
  const double K1 = t.chunks(SL, protocol), K2 = t.chunks(SH, protocol);
  const double intra_step = K1 * t.intra.a + SL * t.intra.inv;
  const double inter = 2 * (H - 1) * (K2 * t.net.a + SH * t.net.inv * L) + (H - 1) * t.reduce(SH);
  return (L - 1) * (intra_step + t.reduce(SL)) + inter + (L - 1) * intra_step;
}

algo::Schedule build(const BuildArgs& a) {
  return algo::hierarchical_allreduce(
      {a.ring.nranks, a.ring.rank, a.ring.count, a.ring.chunk_elems, a.host_of_rank});
}

constexpr AlgorithmEntry kEntries[] = {
    {Collective::AllReduce, Algorithm::Hierarchical, unavailable, cost, build, nullptr},
};

}  // namespace

std::span<const AlgorithmEntry> hierarchical() { return kEntries; }

}  // namespace ccl::tune::entries
