// Scalar conversions between float and the 16- and 8-bit float formats, shared by convert.cc and
// the scalar kernels. They compute exactly what the SIMD kernels compute (F16C for fp16, the same
// integer rounding for bf16 and fp8), so every ISA gives bit-identical results.
//
// NaN rules (any NaN input gives a NaN output; payloads and the sign of a NaN result are not
// part of the contract):
//   fp16 -> float: quiet, payload shifted up (as vcvtph2ps); float -> fp16: quiet, payload
//   truncated (as vcvtps2ph); bf16 -> float: the bits shifted up unchanged; float -> bf16: quiet,
//   payload truncated; fp8 e4m3 NaN is 0x7f/0xff; fp8 e5m2 NaN made from a float is 0x7e/0xfe.
#pragma once

#include <cstdint>
#include <cstring>

namespace ccl::reduce::detail {

// static: every including file gets its own copy (see simd_kernels.inc for why that matters).
static inline uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

static inline float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Rounds |x| (given as its float bits a, not NaN) to nearest even in a format with mbits
// mantissa bits and exponent bias `bias`, returning the magnitude code, capped at max_code (the
// infinity code, or the largest finite one for a saturating format).
static inline uint32_t round_magnitude(uint32_t a, int mbits, int bias, uint32_t max_code) {
  const int shift = 23 - mbits;
  const uint32_t min_normal = uint32_t(127 + 1 - bias) << 23;
  if (a >= min_normal) {
    // Rebias the exponent, then add just under half an ulp plus the kept lsb: ties go to even.
    uint32_t r = a + (uint32_t(bias - 127) << 23) + ((1u << (shift - 1)) - 1) + ((a >> shift) & 1);
    r >>= shift;
    return r < max_code ? r : max_code;
  }
  // Subnormal in the target: adding 2^(24-bias-mbits), whose float ulp is the target's subnormal
  // step, makes the FPU round to nearest even at exactly that step.
  const uint32_t magic = uint32_t(127 + 24 - bias - mbits) << 23;
  return bits_of(float_of(a) + float_of(magic)) - magic;
}

static inline float half_to_float_inl(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ff;
  if (exp == 0x1f) return float_of(sign | 0x7f800000 | (mant ? 0x400000 | (mant << 13) : 0));
  if (exp != 0) return float_of(sign | ((exp + 112) << 23) | (mant << 13));
  const float v = float(mant) * 0x1p-24f;  // subnormal or zero: exact in float
  return sign ? -v : v;
}

static inline uint16_t float_to_half_inl(float f) {
  const uint32_t u = bits_of(f);
  const uint32_t sign = (u >> 16) & 0x8000;
  const uint32_t a = u & 0x7fffffff;
  if (a > 0x7f800000) return uint16_t(sign | 0x7e00 | ((a >> 13) & 0x3ff));
  return uint16_t(sign | round_magnitude(a, 10, 15, 0x7c00));
}

static inline float bf16_to_float_inl(uint16_t h) { return float_of(uint32_t(h) << 16); }

static inline uint16_t float_to_bf16_inl(float f) {
  const uint32_t u = bits_of(f);
  if ((u & 0x7fffffff) > 0x7f800000) return uint16_t((u >> 16) | 0x40);
  return uint16_t((u + 0x7fff + ((u >> 16) & 1)) >> 16);  // no wrap: u <= 0xff800000 here
}

static inline float fp8e4m3_to_float_inl(uint8_t v) {
  const uint32_t sign = uint32_t(v & 0x80) << 24;
  const uint32_t exp = (v >> 3) & 0xf;
  const uint32_t mant = v & 0x7;
  if ((v & 0x7f) == 0x7f) return float_of(sign | 0x7fc00000);
  if (exp != 0) return float_of(sign | ((exp + 120) << 23) | (mant << 20));
  const float x = float(mant) * 0x1p-9f;
  return sign ? -x : x;
}

static inline uint8_t float_to_fp8e4m3_inl(float f) {
  const uint32_t u = bits_of(f);
  const uint32_t sign = (u >> 24) & 0x80;
  const uint32_t a = u & 0x7fffffff;
  if (a > 0x7f800000) return uint8_t(sign | 0x7f);
  return uint8_t(sign | round_magnitude(a, 3, 7, 0x7e));  // saturates at 448 (0x7e), inf too
}

// E5M2 is the top byte of an fp16.
static inline float fp8e5m2_to_float_inl(uint8_t v) { return half_to_float_inl(uint16_t(v << 8)); }

static inline uint8_t float_to_fp8e5m2_inl(float f) {
  const uint32_t u = bits_of(f);
  const uint32_t sign = (u >> 24) & 0x80;
  const uint32_t a = u & 0x7fffffff;
  if (a > 0x7f800000) return uint8_t(sign | 0x7e);
  return uint8_t(sign | round_magnitude(a, 2, 15, 0x7c));  // overflow gives inf (0x7c)
}

}  // namespace ccl::reduce::detail
