// Every entry of the registry that builds schedules, for every collective and protocol it has,
// simulated on one and on two hosts at several rank counts and sizes: each run ends (no deadlock,
// every message received), takes at least the latency of one message, and gives the same times
// twice. The direct entries have no schedule: plan.h gives them their cost model's time.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cluster.h"
#include "core/comm/comm_layout.h"
#include "core/tuning/registry.h"
#include "core/tuning/tuner.h"
#include "model.h"
#include "plan.h"

namespace ccl::sim {
namespace {

struct Shape {
  int nodes;
  int per_node;
};

TEST(SimRegistry, EveryEntryRunsToTheEndOnOneAndTwoHosts) {
  const SimModel model = from_figures(tune::default_figures());
  int simulated = 0;
  std::set<std::pair<int, int>> covered;  // (collective, algorithm) simulated
  for (const Shape s :
       {Shape{1, 2}, Shape{1, 3}, Shape{1, 5}, Shape{2, 2}, Shape{2, 3}, Shape{3, 4}}) {
    ClusterSpec spec;
    spec.nodes = s.nodes;
    spec.per_node = s.per_node;
    const Cluster cluster(spec, model);
    const tune::Shape shape = cluster.shape(size_t{1} << 20, size_t{1} << 20);
    const tune::Tuner tuner(shape, tune::default_figures(), tune::Selection());
    const CommLayout layout = CommLayout::build(cluster.places());
    for (const tune::Collective c : tune::kCollectives) {
      if (c == tune::Collective::Barrier) continue;
      for (const size_t count : {size_t{1}, size_t{37}, size_t{4096}, size_t{300000}}) {
        for (const Candidate& cand : candidates(tuner, c, count * 4, true)) {
          SCOPED_TRACE(std::string(tune::collective_name(c)) + " " + candidate_name(cand) + " " +
                       std::to_string(s.nodes) + "x" + std::to_string(s.per_node) + " count " +
                       std::to_string(count));
          Call call;
          call.collective = c;
          call.count = count;
          call.root = cluster.nranks() - 1;
          const Outcome a = run_candidate(cluster, cand, call, layout.host_of_rank,
                                          layout.ring_order, layout.tree_order);
          EXPECT_GT(a.time_us, 0);
          if (!a.simulated) continue;
          ++simulated;
          covered.insert({int(c), int(cand.entry->algorithm)});
          EXPECT_GE(a.time_us, model.call_overhead_us + model.shm.alpha_us * 0.999);
          const Outcome b = run_candidate(cluster, cand, call, layout.host_of_rank,
                                          layout.ring_order, layout.tree_order);
          EXPECT_EQ(a.detail.finish_us, b.detail.finish_us);
        }
      }
    }
  }
  EXPECT_GT(simulated, 200);
  // Every entry that builds schedules was among them (barrier aside: ccl-sim sweeps sizes).
  for (const tune::AlgorithmEntry* e : tune::registry()) {
    if (e->build == nullptr || e->collective == tune::Collective::Barrier) continue;
    EXPECT_TRUE(covered.count({int(e->collective), int(e->algorithm)}))
        << tune::collective_name(e->collective) << " " << tune::algorithm_name(e->algorithm);
  }
}

TEST(SimPlan, FootprintIsTheCallsBuffersOnARank) {
  // 1000 floats by the tuner's convention (algo_selection.h), 4 ranks.
  Call c;
  c.count = 1000;
  c.elem_size = 4;
  const std::pair<tune::Collective, double> out_of_place[] = {
      {tune::Collective::AllReduce, 8000},
      {tune::Collective::Broadcast, 8000},
      {tune::Collective::AllGather, 20000},      // 4000 in, 16000 out
      {tune::Collective::ReduceScatter, 20000},  // 16000 in, 4000 out
      {tune::Collective::AlltoAll, 32000}};
  for (const auto& [collective, bytes] : out_of_place) {
    c.collective = collective;
    c.in_place = false;
    EXPECT_EQ(footprint_bytes(c, 4), bytes) << tune::collective_name(collective);
  }
  c.collective = tune::Collective::AllGather;
  c.in_place = true;
  EXPECT_EQ(footprint_bytes(c, 4), 16000);  // one buffer, the output
}

}  // namespace
}  // namespace ccl::sim
