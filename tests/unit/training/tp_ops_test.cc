// The f and g operators and the sequence-parallel pair at tp 1, 2 and 4: what each moves, with
// per-rank inputs that tell the ranks (and the rows) apart.
#include <gtest/gtest.h>

#include <vector>

#include "../support/rank_threads.h"
#include "ccl/training/tensor_parallel.hpp"

namespace ccl::training {
namespace {

class TpOpsTest : public testing::TestWithParam<int> {};

// Element i of rank r's input: r * 10 + i + 1 (never zero, different on every rank).
std::vector<float> rank_pattern(int rank, std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = static_cast<float>(rank * 10 + static_cast<int>(i) + 1);
  return v;
}

// Σ over ranks of rank_pattern(r)[i].
float summed(int nranks, std::size_t i) {
  float s = 0;
  for (int r = 0; r < nranks; ++r) s += static_cast<float>(r * 10 + static_cast<int>(i) + 1);
  return s;
}

TEST_P(TpOpsTest, FAndG) {
  const int n = GetParam();
  ccl_test::run_ranks(n, [n](Communicator& comm) {
    const std::vector<float> mine = rank_pattern(comm.rank(), 5);
    std::vector<float> v = mine;
    f_forward(comm, v);
    EXPECT_EQ(v, mine);  // identity
    g_backward(comm, v);
    EXPECT_EQ(v, mine);  // identity
    f_backward(comm, v);
    for (std::size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], summed(n, i));
    v = mine;
    g_forward(comm, v);
    for (std::size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], summed(n, i));
  });
}

TEST_P(TpOpsTest, SequenceGatherAndScatter) {
  const int n = GetParam();
  const std::size_t rows = 2, cols = 3, total = rows * static_cast<std::size_t>(n);
  ccl_test::run_ranks(n, [&](Communicator& comm) {
    const int rank = comm.rank();
    // Gather: rank r's rows land as block r.
    const std::vector<float> local = rank_pattern(rank, rows * cols);
    std::vector<float> full(total * cols, -1.0f);
    gather_sequence_forward(comm, ConstMatrix{local, rows, cols}, Matrix{full, total, cols});
    for (int r = 0; r < n; ++r) {
      const std::vector<float> block = rank_pattern(r, rows * cols);
      for (std::size_t i = 0; i < block.size(); ++i) {
        EXPECT_EQ(full[static_cast<std::size_t>(r) * rows * cols + i], block[i]);
      }
    }
    // Scatter (and gather's backward, the same reduce-scatter): block `rank` of the sum.
    const std::vector<float> partial = rank_pattern(rank, total * cols);
    std::vector<float> got(rows * cols, -1.0f), got_bwd(rows * cols, -2.0f);
    scatter_sequence_forward(comm, ConstMatrix{partial, total, cols}, Matrix{got, rows, cols});
    gather_sequence_backward(comm, ConstMatrix{partial, total, cols}, Matrix{got_bwd, rows, cols});
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i], summed(n, static_cast<std::size_t>(rank) * rows * cols + i));
    }
    EXPECT_EQ(got_bwd, got);
    // Scatter's backward is the all-gather.
    std::vector<float> back(total * cols, -1.0f);
    scatter_sequence_backward(comm, ConstMatrix{local, rows, cols}, Matrix{back, total, cols});
    EXPECT_EQ(back, full);
  });
}

INSTANTIATE_TEST_SUITE_P(Tp, TpOpsTest, testing::Values(1, 2, 4), ccl_test::ranks_name);

}  // namespace
}  // namespace ccl::training
