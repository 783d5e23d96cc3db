// Ring allgather and reduce-scatter proven correct by symbolic execution over nranks 1..16 x
// count x chunk x in-place x ring order (issue 4 builds the collectives on them).
#include <gtest/gtest.h>

#include <tuple>

#include "algorithms/ring.h"
#include "schedule_verifier.h"
#include "test_util.h"

namespace ccl::algo {
namespace {

using test::OrderKind;

// Every count x chunk x in-place of `problem_for(n, count, in_place)` for one (nranks, order).
template <typename ProblemFor>
void sweep(Schedule (*builder)(const RingParams&), int n, OrderKind kind, ProblemFor problem_for) {
  const std::vector<int> order = test::make_order(kind, n);
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{4099}}) {
    for (size_t chunk : {size_t{0}, size_t{1}, size_t{3}, size_t{1024}}) {
      if (chunk == 1 && count > 1000) continue;  // rounds grow as count / chunk
      const std::vector<Schedule> s = test::build_ring(builder, n, count, chunk, order);
      ASSERT_FALSE(test::has_empty_round(s)) << n << " " << count << " " << chunk;
      for (bool in_place : {false, true}) {
        verify::Problem problem = problem_for(n, count, in_place);
        problem.rendezvous = true;
        ASSERT_EQ(verify::verify(s, problem), "")
            << "n=" << n << " count=" << count << " chunk=" << chunk << " in_place=" << in_place
            << " order=" << test::order_name(kind);
      }
    }
  }
}

class RingGatherScatter : public ::testing::TestWithParam<std::tuple<int, OrderKind>> {};

TEST_P(RingGatherScatter, AllgatherVerified) {
  const auto [n, kind] = GetParam();
  sweep(ring_allgather, n, kind, verify::allgather_problem);
}

TEST_P(RingGatherScatter, ReduceScatterVerified) {
  const auto [n, kind] = GetParam();
  sweep(ring_reduce_scatter, n, kind, verify::reducescatter_problem);
}

INSTANTIATE_TEST_SUITE_P(Sweep, RingGatherScatter, test::ring_sweep(), test::RingSweepName());

}  // namespace
}  // namespace ccl::algo
