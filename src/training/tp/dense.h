// The dense kernels of one rank's share of a linear layer, on row-major float matrices whose
// shapes the caller has checked. Plain loops: the layer's subject is the communication, and the
// tests compare against the same loops run unsplit.
#pragma once

#include "ccl/training/tensor_parallel.hpp"

namespace ccl::training::tp_detail {

// y = x·wᵀ: x [m, k], w [n, k], y [m, n] (overwritten).
void matmul_xwt(ConstMatrix x, ConstMatrix w, Matrix y);
// dx = dy·w: dy [m, n], w [n, k], dx [m, k] (overwritten).
void matmul_dyw(ConstMatrix dy, ConstMatrix w, Matrix dx);
// dw += dyᵀ·x: dy [m, n], x [m, k], dw [n, k].
void accumulate_dytx(ConstMatrix dy, ConstMatrix x, Matrix dw);
// y[i][j] += b[j] for every row i.
void add_bias(Matrix y, std::span<const float> b);
// db[j] += Σ_i dy[i][j].
void accumulate_column_sums(ConstMatrix dy, std::span<float> db);

}  // namespace ccl::training::tp_detail
