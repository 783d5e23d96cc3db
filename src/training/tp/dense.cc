// Dense kernels of the tensor-parallel layers (see dense.h).
#include "tp/dense.h"

namespace ccl::training::tp_detail {

void matmul_xwt(ConstMatrix x, ConstMatrix w, Matrix y) {
  const std::size_t m = x.rows, k = x.cols, n = w.rows;
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      float sum = 0;
      for (std::size_t t = 0; t < k; ++t) sum += x.data[i * k + t] * w.data[j * k + t];
      y.data[i * n + j] = sum;
    }
  }
}

void matmul_dyw(ConstMatrix dy, ConstMatrix w, Matrix dx) {
  const std::size_t m = dy.rows, n = dy.cols, k = w.cols;
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t t = 0; t < k; ++t) dx.data[i * k + t] = 0;
    for (std::size_t j = 0; j < n; ++j) {
      const float g = dy.data[i * n + j];
      for (std::size_t t = 0; t < k; ++t) dx.data[i * k + t] += g * w.data[j * k + t];
    }
  }
}

void accumulate_dytx(ConstMatrix dy, ConstMatrix x, Matrix dw) {
  const std::size_t m = dy.rows, n = dy.cols, k = x.cols;
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      const float g = dy.data[i * n + j];
      for (std::size_t t = 0; t < k; ++t) dw.data[j * k + t] += g * x.data[i * k + t];
    }
  }
}

void add_bias(Matrix y, std::span<const float> b) {
  for (std::size_t i = 0; i < y.rows; ++i) {
    for (std::size_t j = 0; j < y.cols; ++j) y.data[i * y.cols + j] += b[j];
  }
}

void accumulate_column_sums(ConstMatrix dy, std::span<float> db) {
  for (std::size_t i = 0; i < dy.rows; ++i) {
    for (std::size_t j = 0; j < dy.cols; ++j) db[j] += dy.data[i * dy.cols + j];
  }
}

}  // namespace ccl::training::tp_detail
