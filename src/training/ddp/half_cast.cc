#include "ddp/half_cast.h"

#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace ccl::training::half_cast {

namespace {

#if defined(__x86_64__)
bool has_f16c() {
  static const bool yes = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    // AVX (which __builtin_cpu_supports also checks the OS saves) and F16C (CPUID.1:ECX bit 29).
    return __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
  }();
  return yes;
}

__attribute__((target("avx,f16c"))) size_t to_fp16_f16c(const float* in, uint16_t* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  return i;
}

__attribute__((target("avx,f16c"))) size_t from_fp16_f16c(const uint16_t* in, float* out,
                                                          size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  return i;
}
#endif

}  // namespace

uint16_t fp16_from_float(float f) {
  uint32_t x = 0;
  std::memcpy(&x, &f, sizeof x);
  const uint32_t sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 0xffu;
  uint32_t man = x & 0x7fffffu;
  if (exp == 0xffu)
    return static_cast<uint16_t>(sign | 0x7c00u | (man != 0 ? 0x200u | (man >> 13) : 0));
  const int e = static_cast<int>(exp) - 127 + 15;  // the half's biased exponent
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  uint32_t half = 0, rest = 0, tie = 0;
  if (e <= 0) {  // a subnormal half (or zero): the implicit 1 shifts into the fraction
    if (e < -10) return static_cast<uint16_t>(sign);
    man |= 0x800000u;
    const int shift = 14 - e;
    half = man >> shift;
    rest = man & ((1u << shift) - 1);
    tie = 1u << (shift - 1);
  } else {
    half = static_cast<uint32_t>(e) << 10 | (man >> 13);
    rest = man & 0x1fffu;
    tie = 0x1000u;
  }
  if (rest > tie || (rest == tie && (half & 1u) != 0)) ++half;  // may carry into the exponent
  return static_cast<uint16_t>(sign | half);
}

float float_from_fp16(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu, x = 0;
  if (exp == 0x1fu) {
    x = sign | 0x7f800000u | (man << 13) | (man != 0 ? 0x400000u : 0);  // NaN stays quiet
  } else if (exp == 0) {
    if (man == 0) {
      x = sign;
    } else {  // subnormal: normalize
      uint32_t shifts = 0;
      while ((man & 0x400u) == 0) {
        man <<= 1;
        ++shifts;
      }
      x = sign | (113u - shifts) << 23 | (man & 0x3ffu) << 13;
    }
  } else {
    x = sign | (exp + 112u) << 23 | man << 13;
  }
  float f = 0;
  std::memcpy(&f, &x, sizeof f);
  return f;
}

void to_fp16(const float* in, uint16_t* out, size_t n) {
  size_t i = 0;
#if defined(__x86_64__)
  if (has_f16c()) i = to_fp16_f16c(in, out, n);
#endif
  for (; i < n; ++i) out[i] = fp16_from_float(in[i]);
}

void from_fp16(const uint16_t* in, float* out, size_t n) {
  size_t i = 0;
#if defined(__x86_64__)
  if (has_f16c()) i = from_fp16_f16c(in, out, n);
#endif
  for (; i < n; ++i) out[i] = float_from_fp16(in[i]);
}

void to_bf16(const float* in, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits = 0;
    std::memcpy(&bits, &in[i], sizeof bits);
    const bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
    const uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);  // to nearest even
    out[i] = static_cast<uint16_t>(nan ? (bits >> 16) | 0x40u : rounded >> 16);
  }
}

void from_bf16(const uint16_t* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const uint32_t bits = static_cast<uint32_t>(in[i]) << 16;
    std::memcpy(&out[i], &bits, sizeof bits);
  }
}

}  // namespace ccl::training::half_cast
