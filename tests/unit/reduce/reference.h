// A slow, independent reference for the reduction kernels: formats decoded to double by their
// definition, results rounded once by nearbyint at the format's quantum, ops in double or in
// 64-bit integers. It shares no code with src/algorithms/reduce.
#pragma once

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "ccl/ccl.h"

namespace ccl::reduce::ref {

struct Format {
  int ebits;
  int mbits;
  int bias;
  bool has_inf;  // false: OCP E4M3 (only S.1111.111 is NaN, no inf, saturating)
};
constexpr Format kHalf{5, 10, 15, true};
constexpr Format kBf16{8, 7, 127, true};
constexpr Format kE4m3{4, 3, 7, false};
constexpr Format kE5m2{5, 2, 15, true};

inline uint32_t all_ones(int bits) { return (1u << bits) - 1; }

inline bool is_nan_code(uint32_t code, Format f) {
  const uint32_t exp = (code >> f.mbits) & all_ones(f.ebits);
  const uint32_t mant = code & all_ones(f.mbits);
  if (exp != all_ones(f.ebits)) return false;
  return f.has_inf ? mant != 0 : mant == all_ones(f.mbits);
}

inline double decode(uint32_t code, Format f) {
  const bool neg = (code >> (f.ebits + f.mbits)) & 1;
  const uint32_t exp = (code >> f.mbits) & all_ones(f.ebits);
  const uint32_t mant = code & all_ones(f.mbits);
  double v;
  if (is_nan_code(code, f)) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (f.has_inf && exp == all_ones(f.ebits)) {
    v = std::numeric_limits<double>::infinity();
  } else if (exp == 0) {
    v = std::ldexp(double(mant), 1 - f.bias - f.mbits);
  } else {
    v = std::ldexp(double(mant + (1u << f.mbits)), int(exp) - f.bias - f.mbits);
  }
  return neg ? -v : v;
}

inline double max_finite(Format f) {
  const int top = int(all_ones(f.ebits)) - (f.has_inf ? 1 : 0);
  const double mant = f.has_inf ? double((2u << f.mbits) - 1) : double((2u << f.mbits) - 2);
  return std::ldexp(mant, top - f.bias - f.mbits);
}

// Nearest even; overflow gives inf, or the largest finite value for E4M3 (inf included). A NaN
// gives some NaN code (callers only check NaN-ness).
inline uint32_t encode(double x, Format f) {
  const uint32_t sign = std::signbit(x) ? 1u << (f.ebits + f.mbits) : 0;
  const uint32_t inf_code = all_ones(f.ebits) << f.mbits;
  if (std::isnan(x)) return sign | inf_code | all_ones(f.mbits);
  double a = std::fabs(x);
  const int emin = 1 - f.bias;
  if (!std::isinf(a) && a != 0) {
    int e;
    std::frexp(a, &e);
    const int lead = e - 1 < emin ? emin : e - 1;
    const double q = std::ldexp(1.0, lead - f.mbits);
    a = std::nearbyint(a / q) * q;  // default rounding mode: ties to even
  }
  if (a > max_finite(f)) {
    if (f.has_inf) return sign | inf_code;
    a = max_finite(f);
  }
  if (a == 0) return sign;
  if (a < std::ldexp(1.0, emin)) {
    return sign | uint32_t(a / std::ldexp(1.0, emin - f.mbits));
  }
  int e;
  std::frexp(a, &e);
  const uint32_t mant = uint32_t(a / std::ldexp(1.0, e - 1 - f.mbits)) - (1u << f.mbits);
  return sign | (uint32_t(e - 1 + f.bias) << f.mbits) | mant;
}

// IEEE 754-2019 maximum / minimum in double: NaN wins, -0 < +0.
inline double maximum(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  if (a == 0 && b == 0) return std::signbit(a) && std::signbit(b) ? -0.0 : 0.0;
  return a > b ? a : b;
}

inline double minimum(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  if (a == 0 && b == 0) return std::signbit(a) || std::signbit(b) ? -0.0 : 0.0;
  return a < b ? a : b;
}

inline double apply(cclRedOp_t op, double a, double b) {
  switch (op) {
    case cclSum:
    case cclAvg:
      return a + b;
    case cclProd:
      return a * b;
    case cclMax:
      return maximum(a, b);
    case cclMin:
      return minimum(a, b);
    default:
      return std::numeric_limits<double>::quiet_NaN();
  }
}

// The expected element: bits of `size` bytes, and whether it must be (any) NaN.
struct Expected {
  uint64_t bits;
  bool nan;
};

inline bool is_float_type(cclDataType_t t) {
  return t == cclFloat16 || t == cclFloat32 || t == cclFloat64 || t == cclBfloat16 ||
         t == cclFloat8e4m3 || t == cclFloat8e5m2;
}

inline bool is_signed_int(cclDataType_t t) {
  return t == cclInt8 || t == cclInt32 || t == cclInt64;
}

inline size_t size_of(cclDataType_t t) {
  switch (t) {
    case cclInt8:
    case cclUint8:
    case cclFloat8e4m3:
    case cclFloat8e5m2:
      return 1;
    case cclFloat16:
    case cclBfloat16:
      return 2;
    case cclInt32:
    case cclUint32:
    case cclFloat32:
      return 4;
    default:
      return 8;
  }
}

inline uint64_t mask_of(cclDataType_t t) {
  return size_of(t) == 8 ? ~uint64_t(0) : (uint64_t(1) << (8 * size_of(t))) - 1;
}

inline int64_t sign_extend(uint64_t bits, cclDataType_t t) {
  const int shift = 64 - 8 * int(size_of(t));
  return int64_t(bits << shift) >> shift;
}

// Narrow float formats: their Format; float and double are handled directly.
inline Format format_of(cclDataType_t t) {
  switch (t) {
    case cclFloat16:
      return kHalf;
    case cclBfloat16:
      return kBf16;
    case cclFloat8e4m3:
      return kE4m3;
    default:
      return kE5m2;
  }
}

inline double to_double(uint64_t bits, cclDataType_t t) {
  if (t == cclFloat32) {
    float f;
    uint32_t u = uint32_t(bits);
    std::memcpy(&f, &u, 4);
    return f;
  }
  if (t == cclFloat64) {
    double d;
    std::memcpy(&d, &bits, 8);
    return d;
  }
  return decode(uint32_t(bits), format_of(t));
}

// Rounds an exact (or double-rounded-innocuously) double result to the type.
inline Expected from_double(double v, cclDataType_t t) {
  if (std::isnan(v)) return {0, true};
  if (t == cclFloat32) {
    const float f = float(v);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return {u, false};
  }
  if (t == cclFloat64) {
    uint64_t u;
    std::memcpy(&u, &v, 8);
    return {u, false};
  }
  return {encode(v, format_of(t)), false};
}

inline Expected reduce(cclDataType_t t, cclRedOp_t op, uint64_t a, uint64_t b) {
  if (is_float_type(t)) return from_double(apply(op, to_double(a, t), to_double(b, t)), t);
  const uint64_t m = mask_of(t);
  switch (op) {
    case cclSum:
    case cclAvg:
      return {(a + b) & m, false};
    case cclProd:
      return {(a * b) & m, false};
    default:
      break;
  }
  bool a_greater;
  if (is_signed_int(t)) {
    a_greater = sign_extend(a, t) > sign_extend(b, t);
  } else {
    a_greater = a > b;
  }
  const bool pick_a = op == cclMax ? a_greater : !a_greater;
  return {(pick_a ? a : b) & m, false};
}

inline Expected divide(cclDataType_t t, uint64_t x, uint64_t divisor) {
  if (t == cclFloat64) return from_double(to_double(x, t) / double(divisor), t);
  if (is_float_type(t)) {
    // In float: the quotient of two floats rounds innocuously through double.
    const double d = double(float(divisor));
    return from_double(double(float(to_double(x, t) / d)), t);
  }
  const uint64_t m = mask_of(t);
  if (is_signed_int(t)) {
    const __int128 q = __int128(sign_extend(x, t)) / __int128(divisor);  // truncates
    return {uint64_t(q) & m, false};
  }
  return {((x & m) / divisor) & m, false};
}

}  // namespace ccl::reduce::ref
