// ColumnParallelLinear: W split by output features; f (or the sequence all-gather) on the input.

#include "ccl/training/tensor_parallel.hpp"
#include "tp/dense.h"
#include "tp/tp_checks.h"

namespace ccl::training {

using namespace tp_detail;

namespace {
constexpr const char* kForward = "ColumnParallelLinear::forward";
constexpr const char* kBackward = "ColumnParallelLinear::backward";
}  // namespace

ColumnParallelLinear::ColumnParallelLinear(Communicator& tp, LinearShape shape,
                                           std::vector<float> weight_shard,
                                           std::vector<float> bias_shard)
    : LinearParameters(std::move(weight_shard), std::move(bias_shard)), tp_(tp), shape_(shape) {
  constexpr const char* where = "ColumnParallelLinear";
  check_divides(where, "shape.out_features", shape_.out_features, tp_.size());
  local_out_ = shape_.out_features / static_cast<std::size_t>(tp_.size());
  if (weight_.size() != local_out_ * shape_.in_features) {
    invalid(where, "weight_shard has " + std::to_string(weight_.size()) +
                       " elements, expected out_features/tp " + std::to_string(local_out_) +
                       " * in_features " + std::to_string(shape_.in_features));
  }
  if (!bias_.empty() && bias_.size() != local_out_) {
    invalid(where, "bias_shard has " + std::to_string(bias_.size()) +
                       " elements, expected 0 (no bias) or out_features/tp " +
                       std::to_string(local_out_));
  }
}

// Checked before any communication, so a bad shape fails every rank that passes it alike and
// leaves no collective half-entered.
static std::size_t tokens_of(Communicator& tp, const LinearShape& shape, const char* where,
                             ConstMatrix x) {
  check_matrix(where, "x", x);
  if (x.cols != shape.in_features) {
    invalid(where, "x has " + std::to_string(x.cols) + " columns, expected in_features " +
                       std::to_string(shape.in_features));
  }
  return shape.sequence_parallel ? x.rows * static_cast<std::size_t>(tp.size()) : x.rows;
}

ConstMatrix ColumnParallelLinear::full_input(ConstMatrix x) {
  if (!shape_.sequence_parallel) return x;
  const std::size_t tokens = x.rows * static_cast<std::size_t>(tp_.size());
  gathered_.resize(tokens * x.cols);
  Matrix full{gathered_, tokens, x.cols};
  gather_sequence_forward(tp_, x, full);
  return full;
}

void ColumnParallelLinear::forward(ConstMatrix x, Matrix y) {
  const std::size_t tokens = tokens_of(tp_, shape_, kForward, x);
  check_shape(kForward, "y", y, tokens, local_out_);
  const ConstMatrix full = full_input(x);
  matmul_xwt(full, ConstMatrix{weight_, local_out_, shape_.in_features}, y);
  if (!bias_.empty()) add_bias(y, bias_);
}

void ColumnParallelLinear::backward(ConstMatrix x, ConstMatrix dy, Matrix dx) {
  const std::size_t tokens = tokens_of(tp_, shape_, kBackward, x);
  check_shape(kBackward, "dy", dy, tokens, local_out_);
  check_shape(kBackward, "dx", dx, x.rows, x.cols);
  const ConstMatrix w{weight_, local_out_, shape_.in_features};
  const ConstMatrix full = full_input(x);
  accumulate_dytx(dy, full, Matrix{grad_weight_, local_out_, shape_.in_features});
  if (!bias_.empty()) accumulate_column_sums(dy, grad_bias_);
  if (!shape_.sequence_parallel) {
    matmul_dyw(dy, w, dx);
    f_backward(tp_, dx.data);
    return;
  }
  // The gathered input has served dW; its buffer, of the same [tokens, in] shape, now takes this
  // rank's share of the full dx, which the reduce-scatter sums and cuts along the sequence.
  Matrix partial{gathered_, tokens, shape_.in_features};
  matmul_dyw(dy, w, partial);
  gather_sequence_backward(tp_, partial, dx);
}

}  // namespace ccl::training
