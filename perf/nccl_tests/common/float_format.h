// Small binary floating-point formats (IEEE half, bfloat16, OCP fp8 E4M3 and E5M2), encoded and
// decoded here independently of the library's kernels, so that the checker's expected values do
// not share a bug with the code under test. Encoding rounds to nearest, ties to even.
#pragma once

#include <cstdint>

#include "ccl/ccl.h"

namespace ccl::perf {

struct FloatFormat {
  int exp_bits;
  int man_bits;
  // IEEE-style: the all-ones exponent holds inf and NaN. When false (OCP E4M3) it holds normal
  // numbers, only the all-ones pattern is NaN, there is no inf and overflow saturates.
  bool ieee_specials;
};

inline constexpr FloatFormat kHalf{5, 10, true};
inline constexpr FloatFormat kBfloat16{8, 7, true};
inline constexpr FloatFormat kFp8E4M3{4, 3, false};
inline constexpr FloatFormat kFp8E5M2{5, 2, true};

// The format of a 16- or 8-bit float type; nullptr for every other type.
inline const FloatFormat* small_float_format(cclDataType_t type) {
  switch (type) {
    case cclFloat16:
      return &kHalf;
    case cclBfloat16:
      return &kBfloat16;
    case cclFloat8e4m3:
      return &kFp8E4M3;
    case cclFloat8e5m2:
      return &kFp8E5M2;
    default:
      return nullptr;
  }
}

// Round v to the nearest value of fmt (ties to even) and return its bit pattern. Overflow gives
// inf (IEEE-style) or the largest finite value (E4M3); NaN gives a quiet NaN.
uint32_t encode_float(double v, const FloatFormat& fmt);
// The exact value of a bit pattern of fmt.
double decode_float(uint32_t bits, const FloatFormat& fmt);
bool is_nan_bits(uint32_t bits, const FloatFormat& fmt);

}  // namespace ccl::perf
