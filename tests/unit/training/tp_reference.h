// The unsplit computations the tensor-parallel tests compare against, written as plain loops of
// their own (not the layer's kernels), and the small-integer inputs that make every result exact.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ccl_test::tp {

// Integers in [-2, 2], different for each (index, seed): products and sums of a few of them are
// exact in float, so split and unsplit results compare with EXPECT_EQ.
inline std::vector<float> small_ints(std::size_t n, int seed) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = static_cast<float>(
        static_cast<int>((i * 7 + static_cast<std::size_t>(seed) * 3 + i / 5) % 5) - 2);
  }
  return v;
}

// Row-major dense helpers on [rows, cols] buffers.
inline std::vector<float> matmul(const std::vector<float>& a, std::size_t m, std::size_t k,
                                 const std::vector<float>& b, std::size_t n, bool b_transposed) {
  // a [m, k]; b [n, k] when b_transposed (a·bᵀ), else [k, n] (a·b). Result [m, n].
  std::vector<float> c(m * n, 0.0f);
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      for (std::size_t t = 0; t < k; ++t) {
        c[i * n + j] += a[i * k + t] * (b_transposed ? b[j * k + t] : b[t * n + j]);
      }
    }
  }
  return c;
}

inline std::vector<float> transpose(const std::vector<float>& a, std::size_t rows,
                                    std::size_t cols) {
  std::vector<float> t(a.size());
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) t[c * rows + r] = a[r * cols + c];
  }
  return t;
}

inline std::vector<float> column_sums(const std::vector<float>& a, std::size_t rows,
                                      std::size_t cols) {
  std::vector<float> s(cols, 0.0f);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) s[c] += a[r * cols + c];
  }
  return s;
}

inline std::vector<float> rows_block(const std::vector<float>& a, std::size_t cols, int parts,
                                     int index) {
  const std::size_t block = a.size() / cols / static_cast<std::size_t>(parts) * cols;
  auto first = a.begin() + static_cast<std::ptrdiff_t>(block * static_cast<std::size_t>(index));
  return {first, first + static_cast<std::ptrdiff_t>(block)};
}

// A transformer's MLP block without the split: y = relu(x·W1ᵀ + b1)·W2ᵀ + b2, and its backward
// for an output gradient dy. Sizes: x [T, H], W1 [F, H], W2 [H, F].
struct Mlp {
  std::size_t tokens = 0, hidden = 0, ffn = 0;
  std::vector<float> x, w1, b1, w2, b2, dy;
  // Results.
  std::vector<float> pre, act, y, dx, dw1, db1, dw2, db2;

  void run() {
    pre = matmul(x, tokens, hidden, w1, ffn, true);
    for (std::size_t i = 0; i < pre.size(); ++i) pre[i] += b1[i % ffn];
    act = pre;
    for (float& a : act) a = a > 0 ? a : 0;
    y = matmul(act, tokens, ffn, w2, hidden, true);
    for (std::size_t i = 0; i < y.size(); ++i) y[i] += b2[i % hidden];
    std::vector<float> dact = matmul(dy, tokens, hidden, w2, ffn, false);
    dw2 = matmul(transpose(dy, tokens, hidden), hidden, tokens, act, ffn, false);
    db2 = column_sums(dy, tokens, hidden);
    std::vector<float> dpre = dact;
    for (std::size_t i = 0; i < dpre.size(); ++i) dpre[i] = pre[i] > 0 ? dact[i] : 0;
    dw1 = matmul(transpose(dpre, tokens, ffn), ffn, tokens, x, hidden, false);
    db1 = column_sums(dpre, tokens, ffn);
    dx = matmul(dpre, tokens, ffn, w1, hidden, false);
  }
};

// True when some element is neither zero nor equal to the first: a result that a broken split
// (all zeros, one value everywhere) could not reproduce by accident.
inline bool varied(const std::vector<float>& v) {
  for (float x : v) {
    if (x != 0 && x != v[0]) return true;
  }
  return false;
}

}  // namespace ccl_test::tp
