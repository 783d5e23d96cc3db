// Input patterns for the kernel tests: random bits, ordinary values and the special values of
// each type (NaN, inf, -0, subnormals, the largest finite, integer extremes), mixed.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "reference.h"

namespace ccl::reduce::testdata {

inline std::vector<cclDataType_t> all_types() {
  std::vector<cclDataType_t> types;
  for (int t = 0; t < cclNumTypes; ++t) types.push_back(cclDataType_t(t));
  return types;
}

inline std::vector<uint64_t> special_values(cclDataType_t t) {
  switch (t) {
    case cclFloat16:  // NaNs, +-inf, +-0, smallest/largest subnormal, min normal, max, 1, ties
      return {0x7e00, 0x7c01, 0xfe00, 0x7c00, 0xfc00, 0x0000, 0x8000, 0x0001,
              0x8001, 0x03ff, 0x0400, 0x7bff, 0xfbff, 0x3c00, 0x3c01, 0x1400};
    case cclBfloat16:
      return {0x7fc0, 0x7f81, 0xffc0, 0x7f80, 0xff80, 0x0000, 0x8000, 0x0001,
              0x8001, 0x007f, 0x0080, 0x7f7f, 0xff7f, 0x3f80, 0x3f81};
    case cclFloat8e4m3:
      return {0x7f, 0xff, 0x00, 0x80, 0x01, 0x81, 0x07, 0x08, 0x7e, 0xfe, 0x38, 0x39};
    case cclFloat8e5m2:
      return {0x7e, 0x7d, 0xfe, 0x7c, 0xfc, 0x00, 0x80, 0x01, 0x81, 0x03, 0x04, 0x7b, 0xfb, 0x3c};
    case cclFloat32:
      return {0x7fc00000, 0x7f800001, 0xffc00000, 0x7f800000, 0xff800000,
              0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007fffff,
              0x00800000, 0x7f7fffff, 0xff7fffff, 0x3f800000, 0x3f800001};
    case cclFloat64:
      return {0x7ff8000000000000, 0x7ff0000000000001, 0xfff8000000000000, 0x7ff0000000000000,
              0xfff0000000000000, 0x0000000000000000, 0x8000000000000000, 0x0000000000000001,
              0x000fffffffffffff, 0x0010000000000000, 0x7fefffffffffffff, 0x3ff0000000000000};
    default: {  // integers: 0, 1, -1 (all ones), min and max of the signed and unsigned ranges
      const uint64_t m = ref::mask_of(t);
      const uint64_t top = (m >> 1) + 1;
      return {0, 1, m, top, top - 1, top + 1, 2, m - 1};
    }
  }
}

// One element: every 5th a special value, else half random bits, half an ordinary value.
class ValueGen {
 public:
  ValueGen(cclDataType_t t, uint64_t seed) : t_(t), rng_(seed), specials_(special_values(t)) {}

  uint64_t next() {
    const uint64_t r = rng_();
    if (r % 5 == 0) return specials_[(r / 5) % specials_.size()];
    if (r % 2 == 0 || !ref::is_float_type(t_)) return rng_() & ref::mask_of(t_);
    // An ordinary value in [-64, 64) with few significant bits, so that sums round and tie.
    const double v = double(int64_t(rng_() % 8192) - 4096) / 64.0;
    return ref::from_double(v, t_).bits;
  }

 private:
  cclDataType_t t_;
  std::mt19937_64 rng_;
  std::vector<uint64_t> specials_;
};

inline uint64_t load_elem(const unsigned char* p, size_t size) {
  uint64_t v = 0;
  std::memcpy(&v, p, size);  // little-endian
  return v;
}

inline void store_elem(unsigned char* p, size_t size, uint64_t v) { std::memcpy(p, &v, size); }

}  // namespace ccl::reduce::testdata
