// Inputs for tests/cuda/cuda_kernels_check: the special values of each datatype, mixed random
// data, exhaustive code sets for the 16- and 8-bit floats, and the NaN test the comparison
// needs (NaN payloads and signs are not part of the kernels' contract: a NaN matches a NaN).
// Plain C++, little-endian element bits held in uint64_t.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "algorithms/reduce/reduce.h"
#include "ccl/ccl.h"

namespace ccl::cuda_check {

inline bool is_float(cclDataType_t t) {
  return t == cclFloat16 || t == cclFloat32 || t == cclFloat64 || t == cclBfloat16 ||
         t == cclFloat8e4m3 || t == cclFloat8e5m2;
}

inline uint64_t mask_of(cclDataType_t t) {
  const size_t size = reduce::datatype_size(t);
  return size == 8 ? ~0ull : (1ull << (8 * size)) - 1;
}

inline bool is_nan(cclDataType_t t, uint64_t v) {
  switch (t) {
    case cclFloat16:
      return (v & 0x7fff) > 0x7c00;
    case cclBfloat16:
      return (v & 0x7fff) > 0x7f80;
    case cclFloat32:
      return (v & 0x7fffffff) > 0x7f800000;
    case cclFloat64:
      return (v & ~(1ull << 63)) > 0x7ff0000000000000ull;
    case cclFloat8e4m3:
      return (v & 0x7f) == 0x7f;
    case cclFloat8e5m2:
      return (v & 0x7f) > 0x7c;
    default:
      return false;
  }
}

// NaNs (quiet, signalling, negative), +-inf, +-0, the smallest and largest subnormals, the
// smallest normal, +-max, 1 and its neighbour; integers: 0, 1, -1, the signed and unsigned
// extremes and their neighbours (wrap-around).
inline std::vector<uint64_t> specials(cclDataType_t t) {
  switch (t) {
    case cclFloat16:
      return {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3c00, 0xbc00, 0x3c01,
              0x3555, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xfe00};
    case cclBfloat16:
      return {0x0000, 0x8000, 0x0001, 0x8001, 0x007f, 0x0080, 0x3f80, 0xbf80, 0x3f81,
              0x3eab, 0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x7fc0, 0x7f81, 0xffc0};
    case cclFloat8e4m3:
      return {0x00, 0x80, 0x01, 0x81, 0x07, 0x08, 0x38, 0xb8,
              0x39, 0x77, 0x7d, 0x7e, 0xfe, 0x7f, 0xff};
    case cclFloat8e5m2:
      return {0x00, 0x80, 0x01, 0x81, 0x03, 0x04, 0x3c, 0xbc, 0x3d,
              0x7a, 0x7b, 0xfb, 0x7c, 0xfc, 0x7d, 0x7e, 0xfe};
    case cclFloat32:
      return {0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007fffff, 0x00800000,
              0x3f800000, 0xbf800000, 0x3f800001, 0x3eaaaaab, 0x7f7fffff, 0xff7fffff,
              0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, 0xffc00000};
    case cclFloat64:
      return {0x0000000000000000, 0x8000000000000000, 0x0000000000000001, 0x8000000000000001,
              0x000fffffffffffff, 0x0010000000000000, 0x3ff0000000000000, 0xbff0000000000000,
              0x3ff0000000000001, 0x3fd5555555555555, 0x7fefffffffffffff, 0xffefffffffffffff,
              0x7ff0000000000000, 0xfff0000000000000, 0x7ff8000000000000, 0x7ff0000000000001,
              0xfff8000000000000};
    default: {
      const uint64_t m = mask_of(t), top = (m >> 1) + 1;
      return {0, 1, 2, 3, m, m - 1, top, top - 1, top + 1, m >> 2, 0x5a & m};
    }
  }
}

// A value that sums and multiplies to ordinary results: integers in [-100, 100], floats k/8 for
// |k| <= 512 (ties and exact values), encoded in the type by the CPU's conversions.
inline uint64_t ordinary(cclDataType_t t, std::mt19937_64& rng) {
  const int64_t k = int64_t(rng() % 1025) - 512;
  const float f = float(k) / 8.0f;
  switch (t) {
    case cclFloat16:
      return reduce::float_to_half(f);
    case cclBfloat16:
      return reduce::float_to_bf16(f);
    case cclFloat8e4m3:
      return reduce::float_to_fp8e4m3(f);
    case cclFloat8e5m2:
      return reduce::float_to_fp8e5m2(f);
    case cclFloat32: {
      uint32_t u;
      std::memcpy(&u, &f, sizeof u);
      return u;
    }
    case cclFloat64: {
      const double d = f;
      uint64_t u;
      std::memcpy(&u, &d, sizeof u);
      return u;
    }
    default:
      return uint64_t(k / 5) & mask_of(t);
  }
}

// n elements: a quarter special values, a quarter random bits, half ordinary values.
inline std::vector<uint64_t> mixed(cclDataType_t t, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::vector<uint64_t> sp = specials(t);
  std::vector<uint64_t> v(n);
  for (auto& x : v) {
    const uint64_t r = rng() % 4;
    x = r == 0 ? sp[rng() % sp.size()] : r == 1 ? rng() & mask_of(t) : ordinary(t, rng);
  }
  return v;
}

// Element bits <-> the bytes of a buffer (little-endian).
inline std::vector<unsigned char> to_bytes(cclDataType_t t, const std::vector<uint64_t>& v) {
  const size_t size = reduce::datatype_size(t);
  std::vector<unsigned char> out(v.size() * size);
  for (size_t i = 0; i < v.size(); ++i) std::memcpy(&out[i * size], &v[i], size);
  return out;
}

inline uint64_t element(cclDataType_t t, const unsigned char* p, size_t i) {
  const size_t size = reduce::datatype_size(t);
  uint64_t v = 0;
  std::memcpy(&v, p + i * size, size);
  return v;
}

}  // namespace ccl::cuda_check
