// The vocabulary-parallel embedding at tp 1, 2 and 4, plain and sequence parallel, against the
// unsplit lookup: every token gets its row whichever rank holds it, and each rank's table
// gradient is exactly its slice of the unsplit one (repeated ids accumulate).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "../support/rank_threads.h"
#include "ccl/training/tensor_parallel.hpp"
#include "tp_reference.h"

namespace ccl::training {
namespace {

using ccl_test::tp::rows_block;
using ccl_test::tp::small_ints;

constexpr std::size_t kVocab = 8, kHidden = 3;
// Eight tokens touching every rank's slice at tp 4, with repeats (3 three times, 0 twice).
const std::vector<std::int64_t> kIds = {3, 7, 0, 3, 5, 1, 0, 3};

class TpEmbeddingTest : public testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(TpEmbeddingTest, MatchesTheUnsplitLookup) {
  const auto [tp, sequence_parallel] = GetParam();
  // Rows numbered so that a token given the wrong row (or a sum of two) cannot match.
  std::vector<float> table(kVocab * kHidden);
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i + 1);
  const std::size_t tokens = kIds.size();
  const std::vector<float> dout = small_ints(tokens * kHidden, 7);
  std::vector<float> want_out(tokens * kHidden), want_grad(kVocab * kHidden, 0.0f);
  for (std::size_t t = 0; t < tokens; ++t) {
    for (std::size_t c = 0; c < kHidden; ++c) {
      const std::size_t id = static_cast<std::size_t>(kIds[t]);
      want_out[t * kHidden + c] = table[id * kHidden + c];
      want_grad[id * kHidden + c] += dout[t * kHidden + c];
    }
  }
  ccl_test::run_ranks(tp, [&, tp = tp, sp = sequence_parallel](Communicator& comm) {
    const int rank = comm.rank();
    VocabParallelEmbedding emb(comm, {.vocab = kVocab, .hidden = kHidden, .sequence_parallel = sp},
                               shard_rows(ConstMatrix{table, kVocab, kHidden}, tp, rank));
    EXPECT_EQ(emb.vocab_begin(),
              kVocab / static_cast<std::size_t>(tp) * static_cast<std::size_t>(rank));
    const std::size_t rows = sp ? tokens / static_cast<std::size_t>(tp) : tokens;
    std::vector<float> out(rows * kHidden, -99.0f);
    emb.forward(kIds, Matrix{out, rows, kHidden});
    EXPECT_EQ(out, sp ? rows_block(want_out, kHidden, tp, rank) : want_out);
    const std::vector<float> my_dout = sp ? rows_block(dout, kHidden, tp, rank) : dout;
    emb.backward(kIds, ConstMatrix{my_dout, rows, kHidden});
    EXPECT_EQ(emb.grad_table(), shard_rows(ConstMatrix{want_grad, kVocab, kHidden}, tp, rank));
  });
}

INSTANTIATE_TEST_SUITE_P(Tp, TpEmbeddingTest,
                         testing::Combine(testing::Values(1, 2, 4), testing::Bool()),
                         [](const testing::TestParamInfo<std::tuple<int, bool>>& info) {
                           return "tp" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_sequence_parallel" : "_plain");
                         });

}  // namespace
}  // namespace ccl::training
