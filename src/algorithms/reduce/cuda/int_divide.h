// Truncating division of 8- and 32-bit integers by a 64-bit divisor without a divide per
// element: GPUs have no integer divide instruction (a 32-bit `/` is a ~20-instruction
// sequence, a 64-bit one several times that), so ccl_divide_<t> computes a multiplier once per
// thread and then needs one 64x64 high multiply per element. Host-compilable, so that
// tests/unit/cuda_kernels checks it against `/` without a GPU.
//
// Why it is exact: for 1 < d < 2^32 let m = ceil(2^64 / d) = 2^64 / d + e / d with 0 <= e < d.
// For n < 2^32, n * m / 2^64 = n / d + n * e / (d * 2^64), and the added term is below 1 / d
// (n * e < 2^64), less than the gap from n / d up to the next integer; so floor(n * m / 2^64) is
// floor(n / d). m fits in 64 bits for every d > 1; d = 1 and d >= 2^32 are handled apart.
#pragma once

#include <cstdint>

#include "algorithms/reduce/cuda/soft_float8.h"  // CCL_CUDA_HD

namespace ccl::reduce::cuda {

struct Divide32 {
  uint64_t magic;  // ceil(2^64 / d) for 1 < d < 2^32; unused otherwise
  uint64_t divisor;

  CCL_CUDA_HD explicit Divide32(uint64_t d) : magic(d > 1 ? ~uint64_t(0) / d + 1 : 0), divisor(d) {}

  // n / d for n < 2^32 (magnitudes of 8- and 32-bit integers).
  CCL_CUDA_HD uint32_t quotient(uint32_t n) const {
    if (divisor == 1) return n;
    if (divisor >> 32) return 0;  // n < 2^32 <= d
#if defined(__CUDA_ARCH__)
    return uint32_t(__umul64hi(n, magic));
#else
    return uint32_t((static_cast<unsigned __int128>(n) * magic) >> 64);
#endif
  }
};

}  // namespace ccl::reduce::cuda
