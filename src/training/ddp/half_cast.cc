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

void to_fp16(const float* in, uint16_t* out, size_t n) {
  size_t i = 0;
#if defined(__x86_64__)
  if (has_f16c()) i = to_fp16_f16c(in, out, n);
#endif
  for (; i < n; ++i) {
    const auto h = static_cast<_Float16>(in[i]);
    std::memcpy(&out[i], &h, sizeof h);
  }
}

void from_fp16(const uint16_t* in, float* out, size_t n) {
  size_t i = 0;
#if defined(__x86_64__)
  if (has_f16c()) i = from_fp16_f16c(in, out, n);
#endif
  for (; i < n; ++i) {
    _Float16 h;
    std::memcpy(&h, &in[i], sizeof h);
    out[i] = static_cast<float>(h);
  }
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
