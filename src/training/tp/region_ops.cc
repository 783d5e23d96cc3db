// Megatron's f and g operators and their sequence-parallel forms, over the tp communicator.
// A rank's block of the sequence is a contiguous block of rows, so gathering or scattering along
// the sequence is a plain all-gather / reduce-scatter of the row-major buffer.
#include "ccl/training/tensor_parallel.hpp"
#include "tp/tp_checks.h"

namespace ccl::training {

using tp_detail::check_matrix;
using tp_detail::check_shape;
using tp_detail::invalid;

namespace {

// full is [tp · local.rows, local.cols]: the two shapes of one sequence-parallel exchange.
void check_sequence_pair(Communicator& tp, const char* where, const char* local_name,
                         ConstMatrix local, const char* full_name, ConstMatrix full) {
  check_matrix(where, local_name, local);
  const std::size_t n = static_cast<std::size_t>(tp.size());
  check_shape(where, full_name, full, local.rows * n, local.cols);
}

}  // namespace

void f_forward(Communicator&, std::span<float>) {}

void f_backward(Communicator& tp, std::span<float> grad) { tp.all_reduce(grad, cclSum); }

void g_forward(Communicator& tp, std::span<float> x) { tp.all_reduce(x, cclSum); }

void g_backward(Communicator&, std::span<float>) {}

void gather_sequence_forward(Communicator& tp, ConstMatrix local, Matrix full) {
  check_sequence_pair(tp, "gather_sequence_forward", "local", local, "full", full);
  tp.all_gather(local.data, full.data);
}

void gather_sequence_backward(Communicator& tp, ConstMatrix full_grad, Matrix local_grad) {
  check_sequence_pair(tp, "gather_sequence_backward", "local_grad", local_grad, "full_grad",
                      full_grad);
  tp.reduce_scatter(full_grad.data, local_grad.data, cclSum);
}

void scatter_sequence_forward(Communicator& tp, ConstMatrix full, Matrix local) {
  check_sequence_pair(tp, "scatter_sequence_forward", "local", local, "full", full);
  tp.reduce_scatter(full.data, local.data, cclSum);
}

void scatter_sequence_backward(Communicator& tp, ConstMatrix local_grad, Matrix full_grad) {
  check_sequence_pair(tp, "scatter_sequence_backward", "local_grad", local_grad, "full_grad",
                      full_grad);
  tp.all_gather(local_grad.data, full_grad.data);
}

}  // namespace ccl::training
