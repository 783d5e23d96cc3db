// Bad shapes are refused with ccl::Error(cclInvalidArgument) naming the argument, on every rank
// and before any communication (so no rank is left waiting in a collective).
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "../support/rank_threads.h"
#include "ccl/training/tensor_parallel.hpp"

namespace ccl::training {
namespace {

void expect_refused(const std::function<void()>& call, const std::string& names) {
  try {
    call();
    ADD_FAILURE() << "accepted; expected a refusal naming '" << names << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find(names), std::string::npos) << e.what();
  }
}

TEST(TpErrors, ShardsOfUnevenSplits) {
  std::vector<float> w(6 * 4, 1.0f);
  expect_refused(
      [&] {
        shard_rows(ConstMatrix{w, 6, 4}, 4, 0);
      },
      "full.rows 6 is not a multiple of tp 4");
  expect_refused(
      [&] {
        shard_cols(ConstMatrix{w, 6, 4}, 3, 0);
      },
      "full.cols 4 is not a multiple of tp 3");
  expect_refused([&] { shard_rows(ConstMatrix{w, 6, 4}, 2, 2); }, "index 2");
  expect_refused([&] { shard_rows(ConstMatrix{w, 5, 4}, 1, 0); }, "full has 24 elements");
}

TEST(TpErrors, LayersRefuseBadShapes) {
  ccl_test::run_ranks(2, [](Communicator& comm) {
    // Uneven splits are refused rather than padded.
    expect_refused(
        [&] { ColumnParallelLinear(comm, {.in_features = 4, .out_features = 3}, {}, {}); },
        "shape.out_features 3 is not a multiple of tp 2");
    expect_refused([&] { RowParallelLinear(comm, {.in_features = 5, .out_features = 2}, {}, {}); },
                   "shape.in_features 5 is not a multiple of tp 2");
    expect_refused([&] { VocabParallelEmbedding(comm, {.vocab = 7, .hidden = 2}, {}); },
                   "shape.vocab 7 is not a multiple of tp 2");
    // Shards of the wrong size.
    expect_refused(
        [&] {
          ColumnParallelLinear(comm, {.in_features = 4, .out_features = 4}, std::vector<float>(7),
                               {});
        },
        "weight_shard has 7 elements");
    expect_refused(
        [&] {
          ColumnParallelLinear(comm, {.in_features = 4, .out_features = 4}, std::vector<float>(8),
                               std::vector<float>(4));
        },
        "bias_shard has 4 elements");
    expect_refused(
        [&] {
          RowParallelLinear(comm, {.in_features = 4, .out_features = 3}, std::vector<float>(6),
                            std::vector<float>(2));
        },
        "bias has 2 elements");

    // Activations of the wrong shape.
    ColumnParallelLinear col(comm, {.in_features = 4, .out_features = 4}, std::vector<float>(8),
                             {});
    std::vector<float> x(3 * 5), y(3 * 2), dy(3 * 2);
    expect_refused(
        [&] {
          col.forward(ConstMatrix{x, 3, 5}, Matrix{y, 3, 2});
        },
        "x has 5 columns, expected in_features 4");
    std::vector<float> x4(3 * 4), y3(3 * 3);
    expect_refused(
        [&] {
          col.forward(ConstMatrix{x4, 3, 4}, Matrix{y3, 3, 3});
        },
        "y is [3, 3], expected [3, 2]");
    expect_refused(
        [&] {
          col.forward(ConstMatrix{x4, 2, 4}, Matrix{y, 3, 2});
        },
        "x has 12 elements, not rows 2 * cols 4");
    std::vector<float> dx(2 * 4);
    expect_refused(
        [&] {
          col.backward(ConstMatrix{x4, 3, 4}, ConstMatrix{dy, 3, 2}, Matrix{dx, 2, 4});
        },
        "dx is [2, 4], expected [3, 4]");

    // Sequence parallel: the token count must split evenly over the group.
    RowParallelLinear row(comm, {.in_features = 4, .out_features = 2, .sequence_parallel = true},
                          std::vector<float>(4), {});
    std::vector<float> xr(3 * 2), yr(1 * 2);
    expect_refused(
        [&] {
          row.forward(ConstMatrix{xr, 3, 2}, Matrix{yr, 1, 2});
        },
        "x.rows (tokens) 3 is not a multiple of tp 2");

    // Ids outside the vocabulary, named by position.
    VocabParallelEmbedding emb(comm, {.vocab = 4, .hidden = 2}, std::vector<float>(4));
    const std::vector<std::int64_t> ids = {1, 4, 0};
    std::vector<float> out(3 * 2);
    expect_refused(
        [&] {
          emb.forward(ids, Matrix{out, 3, 2});
        },
        "ids[1] = 4 is outside [0, vocab 4)");
    const std::vector<std::int64_t> negative = {-1};
    expect_refused([&] { emb.backward(negative, ConstMatrix{out, 1, 2}); }, "ids[0] = -1");

    // The sequence operators check their pair of shapes.
    std::vector<float> local(2 * 3), full(3 * 3);
    expect_refused(
        [&] {
          gather_sequence_forward(comm, ConstMatrix{local, 2, 3}, Matrix{full, 3, 3});
        },
        "full is [3, 3], expected [4, 3]");

    // A refused call leaves the group usable: the same layer still works afterwards.
    std::vector<float> good_y(3 * 2);
    col.forward(ConstMatrix{x4, 3, 4}, Matrix{good_y, 3, 2});
  });
}

}  // namespace
}  // namespace ccl::training
