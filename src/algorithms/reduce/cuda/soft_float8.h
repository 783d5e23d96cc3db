// fp8 <-> float in integer arithmetic, for the GPUs without fp8 conversion instructions (sm_80;
// sm_89 and later use cvt, see codecs.cuh). The same rules as the CPU's convert_inl.h, so the
// results are the CPU's bit for bit; this file compiles for the host too, so that
// tests/unit/cuda_kernels checks it against the CPU conversions without a GPU (every code, and
// floats around every rounding boundary).
//
// Why not cuda_fp8.h's software path there: it rounds through double (64-bit integer work),
// several times the instructions of this one per element, on the GPU where fp8 reductions are
// already compute-bound.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define CCL_CUDA_HD __host__ __device__ __forceinline__
#else
#define CCL_CUDA_HD inline
#endif

namespace ccl::reduce::cuda::soft {

CCL_CUDA_HD uint32_t bits_of(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

CCL_CUDA_HD float float_of(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// Rounded IEEE add and multiply (never fused, never flushed: the kernels build without -ftz).
CCL_CUDA_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

CCL_CUDA_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

// |x| (float bits a, not NaN) rounded to nearest even into a format of mbits mantissa bits and
// exponent bias `bias`, as a magnitude code capped at max_code (inf, or the largest finite code
// of a saturating format).
CCL_CUDA_HD uint32_t round_magnitude(uint32_t a, int mbits, int bias, uint32_t max_code) {
  const int drop = 23 - mbits;
  if (a >= (uint32_t(128 - bias) << 23)) {  // normal in the target
    // Rebias, then add half an ulp less one plus the kept lsb: a tie rounds to the even code.
    const uint32_t half_minus_one = (1u << (drop - 1)) - 1;
    const uint32_t r =
        (a + (uint32_t(bias - 127) << 23) + half_minus_one + ((a >> drop) & 1)) >> drop;
    return r < max_code ? r : max_code;
  }
  // Subnormal in the target: the float 2^(24 - bias - mbits) has the target's subnormal step as
  // its ulp, so adding it makes the FPU round |x| to that step, to nearest even.
  const uint32_t step_bits = uint32_t(151 - bias - mbits) << 23;
  return bits_of(add_rn(float_of(a), float_of(step_bits))) - step_bits;
}

CCL_CUDA_HD float e4m3_to_float(uint8_t v) {
  const uint32_t sign = uint32_t(v & 0x80) << 24;
  if ((v & 0x7f) == 0x7f) return float_of(sign | 0x7fc00000);  // S.1111.111: the NaN
  const uint32_t exp = (v >> 3) & 0xf;
  const uint32_t mant = v & 0x7;
  if (exp != 0) return float_of(sign | ((exp + 120) << 23) | (mant << 20));
  return float_of(sign | bits_of(mul_rn(float(mant), 0x1p-9f)));  // subnormal: exact
}

CCL_CUDA_HD uint8_t float_to_e4m3(float f) {
  const uint32_t u = bits_of(f);
  const uint32_t sign = (u >> 24) & 0x80;
  const uint32_t a = u & 0x7fffffff;
  if (a > 0x7f800000) return uint8_t(sign | 0x7f);
  return uint8_t(sign | round_magnitude(a, 3, 7, 0x7e));  // saturates at 448, inf included
}

// E5M2 is the upper byte of an fp16: the fp16 decoding of v << 8.
CCL_CUDA_HD float e5m2_to_float(uint8_t v) {
  const uint32_t sign = uint32_t(v & 0x80) << 24;
  const uint32_t exp = (v >> 2) & 0x1f;
  const uint32_t mant = v & 0x3;
  if (exp == 0x1f) return float_of(sign | 0x7f800000 | (mant ? 0x400000 | (mant << 21) : 0));
  if (exp != 0) return float_of(sign | ((exp + 112) << 23) | (mant << 21));
  return float_of(sign | bits_of(mul_rn(float(mant), 0x1p-16f)));  // subnormal: exact
}

CCL_CUDA_HD uint8_t float_to_e5m2(float f) {
  const uint32_t u = bits_of(f);
  const uint32_t sign = (u >> 24) & 0x80;
  const uint32_t a = u & 0x7fffffff;
  if (a > 0x7f800000) return uint8_t(sign | 0x7e);
  return uint8_t(sign | round_magnitude(a, 2, 15, 0x7c));  // overflow gives inf (0x7c)
}

}  // namespace ccl::reduce::cuda::soft
