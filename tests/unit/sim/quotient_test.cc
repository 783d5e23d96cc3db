// A quotient run (the representatives of a symmetric job) against the whole job simulated rank by
// rank, at 64 to 512 ranks: the same time, for the symmetric schedules (ring, hierarchical,
// pairwise) on clusters of one leaf and of several oversubscribed leaves.
#include <gtest/gtest.h>

#include <string>

#include "cluster.h"
#include "core/comm/comm_layout.h"
#include "core/tuning/registry.h"
#include "core/tuning/tuner.h"
#include "model.h"
#include "plan.h"

namespace ccl::sim {
namespace {

// The same cluster with its symmetry hidden: run_candidate then simulates every rank.
class Whole : public Network {
 public:
  explicit Whole(const Cluster& c) : c_(c) {}
  int nranks() const override { return c_.nranks(); }
  const std::vector<Resource>& resources() const override { return c_.resources(); }
  Route route(int from, int to) const override { return c_.route(from, to); }
  uint32_t core_of(int rank) const override { return c_.core_of(rank); }
  double copy_gbps() const override { return c_.copy_gbps(); }
  double reduce_gbps() const override { return c_.reduce_gbps(); }
  double call_overhead_us() const override { return c_.call_overhead_us(); }
  double direct_overhead_us() const override { return c_.direct_overhead_us(); }
  double memory_scale(uint64_t footprint_bytes) const override {
    return c_.memory_scale(footprint_bytes);
  }

 private:
  const Cluster& c_;
};

struct Case {
  int nodes, per_node, nodes_per_leaf;
  double oversub;
};

TEST(SimQuotient, RepresentativesTakeTheWholeJobsTime) {
  const SimModel model = from_figures(tune::default_figures());
  int quotients = 0;
  for (const Case k :
       {Case{8, 8, 16, 1}, Case{8, 8, 4, 2}, Case{16, 8, 16, 1}, Case{64, 8, 16, 4}}) {
    ClusterSpec spec;
    spec.nodes = k.nodes;
    spec.per_node = k.per_node;
    spec.nodes_per_leaf = k.nodes_per_leaf;
    spec.oversubscription = k.oversub;
    const Cluster cluster(spec, model);
    const Whole whole(cluster);
    const int n = cluster.nranks();
    const tune::Tuner tuner(cluster.shape(0, size_t{1} << 20), tune::default_figures(),
                            tune::Selection());
    const CommLayout layout = CommLayout::build(cluster.places());
    const struct {
      tune::Collective c;
      tune::Algorithm a;
      size_t count;
    } runs[] = {
        {tune::Collective::AllReduce, tune::Algorithm::Ring, size_t(n) * 2048},
        {tune::Collective::AllReduce, tune::Algorithm::Hierarchical, size_t(n) * 512},
        {tune::Collective::AllGather, tune::Algorithm::Ring, 1000},
        {tune::Collective::ReduceScatter, tune::Algorithm::Ring, 1000},
        {tune::Collective::AlltoAll, tune::Algorithm::Pairwise, 300},
        // Symmetric under XOR only: a rank's partners are r ^ 2^d.
        {tune::Collective::AllReduce, tune::Algorithm::RecursiveDoubling, size_t(n) * 64},
        {tune::Collective::AllReduce, tune::Algorithm::Rabenseifner, size_t(n) * 256},
        {tune::Collective::AllReduce, tune::Algorithm::Ring, size_t(n) * 7 + 3},  // not symmetric
    };
    for (const auto& run : runs) {
      SCOPED_TRACE(std::string(tune::collective_name(run.c)) + " " + tune::algorithm_name(run.a) +
                   " at " + std::to_string(n) + " ranks, count " + std::to_string(run.count));
      const Candidate cand{tune::find_entry(run.c, run.a), tune::Protocol::Simple, size_t{1} << 20,
                           0, false};
      Call call;
      call.collective = run.c;
      call.count = run.count;
      const Outcome q = run_candidate(cluster, cand, call, layout.host_of_rank, layout.ring_order,
                                      layout.tree_order);
      const Outcome w = run_candidate(whole, cand, call, layout.host_of_rank, layout.ring_order,
                                      layout.tree_order);
      ASSERT_TRUE(q.simulated && w.simulated);
      EXPECT_EQ(w.ranks_run, n);
      if (q.ranks_run < n) ++quotients;
      EXPECT_NEAR(q.time_us, w.time_us, 1e-9 * w.time_us);
    }
  }
  EXPECT_GE(quotients, 24);
}

}  // namespace
}  // namespace ccl::sim
