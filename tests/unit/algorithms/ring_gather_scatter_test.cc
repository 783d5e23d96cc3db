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

std::vector<Schedule> build(Schedule (*builder)(const RingParams&), int n, size_t count,
                            size_t chunk, const std::vector<int>& order) {
  return test::for_all_ranks(n, [&](int r) {
    RingParams p;
    p.nranks = n;
    p.rank = r;
    p.count = count;
    p.chunk_elems = chunk;
    p.order = order;
    return builder(p);
  });
}

class RingGatherScatter : public ::testing::TestWithParam<std::tuple<int, OrderKind>> {};

TEST_P(RingGatherScatter, AllgatherVerified) {
  const auto [n, kind] = GetParam();
  const std::vector<int> order = test::make_order(kind, n);
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{4099}}) {
    for (size_t chunk : {size_t{0}, size_t{1}, size_t{3}, size_t{1024}}) {
      if (chunk == 1 && count > 1000) continue;  // rounds grow as count / chunk
      const std::vector<Schedule> s = build(ring_allgather, n, count, chunk, order);
      ASSERT_FALSE(test::has_empty_round(s)) << n << " " << count << " " << chunk;
      for (bool in_place : {false, true}) {
        verify::Problem problem = verify::allgather_problem(n, count, in_place);
        problem.rendezvous = true;
        ASSERT_EQ(verify::verify(s, problem), "")
            << "n=" << n << " count=" << count << " chunk=" << chunk << " in_place=" << in_place
            << " order=" << test::order_name(kind);
      }
    }
  }
}

TEST_P(RingGatherScatter, ReduceScatterVerified) {
  const auto [n, kind] = GetParam();
  const std::vector<int> order = test::make_order(kind, n);
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{4099}}) {
    for (size_t chunk : {size_t{0}, size_t{1}, size_t{3}, size_t{1024}}) {
      if (chunk == 1 && count > 1000) continue;
      const std::vector<Schedule> s = build(ring_reduce_scatter, n, count, chunk, order);
      ASSERT_FALSE(test::has_empty_round(s)) << n << " " << count << " " << chunk;
      for (bool in_place : {false, true}) {
        verify::Problem problem = verify::reducescatter_problem(n, count, in_place);
        problem.rendezvous = true;
        ASSERT_EQ(verify::verify(s, problem), "")
            << "n=" << n << " count=" << count << " chunk=" << chunk << " in_place=" << in_place
            << " order=" << test::order_name(kind);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sweep, RingGatherScatter,
                         ::testing::Combine(::testing::Range(1, 17),
                                            ::testing::Values(OrderKind::Identity,
                                                              OrderKind::Reversed,
                                                              OrderKind::Shuffled)),
                         [](const auto& info) {
                           return "n" + std::to_string(std::get<0>(info.param)) + "_" +
                                  test::order_name(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace ccl::algo
