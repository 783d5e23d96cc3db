// A column -> row parallel MLP block at tp 1, 2 and 4, plain and sequence parallel, against the
// same block unsplit in one thread: outputs, input gradients and every shard's weight and bias
// gradients, exactly (small-integer inputs).
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "../support/rank_threads.h"
#include "ccl/training/tensor_parallel.hpp"
#include "tp_reference.h"

namespace ccl::training {
namespace {

using ccl_test::tp::Mlp;
using ccl_test::tp::rows_block;
using ccl_test::tp::small_ints;
using ccl_test::tp::varied;

constexpr std::size_t kTokens = 8, kHidden = 4, kFfn = 8;

Mlp reference() {
  Mlp m;
  m.tokens = kTokens;
  m.hidden = kHidden;
  m.ffn = kFfn;
  m.x = small_ints(kTokens * kHidden, 1);
  m.w1 = small_ints(kFfn * kHidden, 2);
  m.b1 = small_ints(kFfn, 3);
  m.w2 = small_ints(kHidden * kFfn, 4);
  m.b2 = small_ints(kHidden, 5);
  m.dy = small_ints(kTokens * kHidden, 6);
  m.run();
  return m;
}

class TpMlpTest : public testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(TpMlpTest, MatchesTheUnsplitBlock) {
  const auto [tp, sequence_parallel] = GetParam();
  const Mlp ref = reference();
  // The reference itself must be worth matching: varied outputs and gradients, and a ReLU that
  // cuts some of the hidden units.
  ASSERT_TRUE(varied(ref.y) && varied(ref.dx) && varied(ref.dw1) && varied(ref.dw2));
  ASSERT_NE(ref.pre, ref.act);
  ccl_test::run_ranks(tp, [&, tp = tp, sp = sequence_parallel](Communicator& comm) {
    const int rank = comm.rank();
    const std::size_t local_ffn = kFfn / static_cast<std::size_t>(tp);
    ColumnParallelLinear fc1(
        comm, {.in_features = kHidden, .out_features = kFfn, .sequence_parallel = sp},
        shard_rows(ConstMatrix{ref.w1, kFfn, kHidden}, tp, rank), shard_rows(ref.b1, tp, rank));
    RowParallelLinear fc2(comm,
                          {.in_features = kFfn, .out_features = kHidden, .sequence_parallel = sp},
                          shard_cols(ConstMatrix{ref.w2, kHidden, kFfn}, tp, rank), ref.b2);
    ASSERT_EQ(fc1.local_out(), local_ffn);
    ASSERT_EQ(fc2.local_in(), local_ffn);
    // Outside the block, activations hold this rank's block of the sequence when sp.
    const std::size_t outer_rows = sp ? kTokens / static_cast<std::size_t>(tp) : kTokens;
    std::vector<float> x = sp ? rows_block(ref.x, kHidden, tp, rank) : ref.x;
    std::vector<float> dy = sp ? rows_block(ref.dy, kHidden, tp, rank) : ref.dy;
    std::vector<float> want_y = sp ? rows_block(ref.y, kHidden, tp, rank) : ref.y;
    std::vector<float> want_dx = sp ? rows_block(ref.dx, kHidden, tp, rank) : ref.dx;

    std::vector<float> pre(kTokens * local_ffn), y(outer_rows * kHidden, -99.0f);
    fc1.forward(ConstMatrix{x, outer_rows, kHidden}, Matrix{pre, kTokens, local_ffn});
    EXPECT_EQ(pre, shard_cols(ConstMatrix{ref.pre, kTokens, kFfn}, tp, rank));
    std::vector<float> act = pre;
    for (float& a : act) a = a > 0 ? a : 0;
    fc2.forward(ConstMatrix{act, kTokens, local_ffn}, Matrix{y, outer_rows, kHidden});
    EXPECT_EQ(y, want_y);

    // Backward twice: the second pass must double every weight gradient (they accumulate) and
    // give the same input gradient (it is overwritten).
    for (int pass = 1; pass <= 2; ++pass) {
      std::vector<float> dact(kTokens * local_ffn, -99.0f), dx(outer_rows * kHidden, -99.0f);
      fc2.backward(ConstMatrix{act, kTokens, local_ffn}, ConstMatrix{dy, outer_rows, kHidden},
                   Matrix{dact, kTokens, local_ffn});
      for (std::size_t i = 0; i < dact.size(); ++i) dact[i] = pre[i] > 0 ? dact[i] : 0;
      fc1.backward(ConstMatrix{x, outer_rows, kHidden}, ConstMatrix{dact, kTokens, local_ffn},
                   Matrix{dx, outer_rows, kHidden});
      EXPECT_EQ(dx, want_dx) << "pass " << pass;
      auto times = [pass](std::vector<float> v) {
        for (float& e : v) e *= static_cast<float>(pass);
        return v;
      };
      EXPECT_EQ(fc1.grad_weight(), times(shard_rows(ConstMatrix{ref.dw1, kFfn, kHidden}, tp, rank)))
          << "pass " << pass;
      EXPECT_EQ(fc1.grad_bias(), times(shard_rows(ref.db1, tp, rank))) << "pass " << pass;
      EXPECT_EQ(fc2.grad_weight(), times(shard_cols(ConstMatrix{ref.dw2, kHidden, kFfn}, tp, rank)))
          << "pass " << pass;
      EXPECT_EQ(fc2.grad_bias(), times(ref.db2)) << "pass " << pass;
    }
    fc1.zero_grad();
    EXPECT_EQ(fc1.grad_weight(), std::vector<float>(local_ffn * kHidden, 0.0f));
  });
}

INSTANTIATE_TEST_SUITE_P(Tp, TpMlpTest, testing::Combine(testing::Values(1, 2, 4), testing::Bool()),
                         [](const testing::TestParamInfo<std::tuple<int, bool>>& info) {
                           return "tp" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_sequence_parallel" : "_plain");
                         });

}  // namespace
}  // namespace ccl::training
