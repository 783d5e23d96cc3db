// RowParallelLinear: W split by input features; g (or the sequence reduce-scatter) on the output,
// the bias added once after the reduction.
#include "ccl/training/tensor_parallel.hpp"
#include "tp/dense.h"
#include "tp/tp_checks.h"

namespace ccl::training {

using namespace tp_detail;

namespace {
constexpr const char* kForward = "RowParallelLinear::forward";
constexpr const char* kBackward = "RowParallelLinear::backward";
}  // namespace

RowParallelLinear::RowParallelLinear(Communicator& tp, LinearShape shape,
                                     std::vector<float> weight_shard, std::vector<float> bias)
    : LinearParameters(std::move(weight_shard), std::move(bias)), tp_(tp), shape_(shape) {
  constexpr const char* where = "RowParallelLinear";
  check_divides(where, "shape.in_features", shape_.in_features, tp_.size());
  local_in_ = shape_.in_features / static_cast<std::size_t>(tp_.size());
  if (weight_.size() != shape_.out_features * local_in_) {
    invalid(where, "weight_shard has " + std::to_string(weight_.size()) +
                       " elements, expected out_features " + std::to_string(shape_.out_features) +
                       " * in_features/tp " + std::to_string(local_in_));
  }
  if (!bias_.empty() && bias_.size() != shape_.out_features) {
    invalid(where, "bias has " + std::to_string(bias_.size()) +
                       " elements, expected 0 (no bias) or out_features " +
                       std::to_string(shape_.out_features));
  }
}

// The rows of y (and dy): all tokens, or this rank's block of them with sequence parallelism.
static std::size_t output_rows(Communicator& tp, const LinearShape& shape, const char* where,
                               ConstMatrix x, std::size_t local_in) {
  check_matrix(where, "x", x);
  if (x.cols != local_in) {
    invalid(where, "x has " + std::to_string(x.cols) + " columns, expected in_features/tp " +
                       std::to_string(local_in));
  }
  if (!shape.sequence_parallel) return x.rows;
  check_divides(where, "x.rows (tokens)", x.rows, tp.size());
  return x.rows / static_cast<std::size_t>(tp.size());
}

void RowParallelLinear::forward(ConstMatrix x, Matrix y) {
  const std::size_t rows = output_rows(tp_, shape_, kForward, x, local_in_);
  check_shape(kForward, "y", y, rows, shape_.out_features);
  const ConstMatrix w{weight_, shape_.out_features, local_in_};
  if (shape_.sequence_parallel) {
    partial_.resize(x.rows * shape_.out_features);
    Matrix partial{partial_, x.rows, shape_.out_features};
    matmul_xwt(x, w, partial);
    scatter_sequence_forward(tp_, partial, y);
  } else {
    matmul_xwt(x, w, y);
    g_forward(tp_, y.data);
  }
  if (!bias_.empty()) add_bias(y, bias_);
}

void RowParallelLinear::backward(ConstMatrix x, ConstMatrix dy, Matrix dx) {
  const std::size_t rows = output_rows(tp_, shape_, kBackward, x, local_in_);
  check_shape(kBackward, "dy", dy, rows, shape_.out_features);
  check_shape(kBackward, "dx", dx, x.rows, local_in_);
  ConstMatrix full = dy;
  if (shape_.sequence_parallel) {
    gathered_.resize(x.rows * shape_.out_features);
    Matrix gathered{gathered_, x.rows, shape_.out_features};
    scatter_sequence_backward(tp_, dy, gathered);
    full = gathered;
  }  // else g's backward is the identity: dy already holds every output feature of every token
  matmul_dyw(full, ConstMatrix{weight_, shape_.out_features, local_in_}, dx);
  accumulate_dytx(full, x, Matrix{grad_weight_, shape_.out_features, local_in_});
  if (!bias_.empty()) accumulate_column_sums(full, grad_bias_);
}

}  // namespace ccl::training
