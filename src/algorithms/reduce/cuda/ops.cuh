// The four base ops on a compute type, with the CPU's rules (kernels_scalar.cc): integers wrap
// (arithmetic in the unsigned type of the same width, so no signed overflow), floats use the
// rounded IEEE operations that are never contracted into an FMA (the file also builds with
// --fmad=false), and max/min are IEEE 754-2019 maximum/minimum: a NaN operand gives a NaN,
// -0 < +0. NaN payloads and signs are not part of the contract (convert_inl.h), so a NaN result
// only has to be a NaN.
#pragma once

#include <cstdint>
#include <type_traits>

namespace ccl::reduce::cuda::dev {

template <class T>
using Unsigned = std::make_unsigned_t<T>;

__device__ __forceinline__ float add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ uint32_t bits(float a) { return __float_as_uint(a); }
__device__ __forceinline__ uint64_t bits(double a) { return uint64_t(__double_as_longlong(a)); }
__device__ __forceinline__ float from_bits(uint32_t u) { return __uint_as_float(u); }
__device__ __forceinline__ double from_bits(uint64_t u) {
  return __longlong_as_double((long long)u);
}

struct Sum {
  template <class T>
  __device__ __forceinline__ static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return T(Unsigned<T>(a) + Unsigned<T>(b));
    } else {
      return add(a, b);
    }
  }
};

struct Prod {
  template <class T>
  __device__ __forceinline__ static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return T(Unsigned<T>(a) * Unsigned<T>(b));
    } else {
      return mul(a, b);
    }
  }
};

struct Max {
  template <class T>
  __device__ __forceinline__ static T apply(T a, T b) {
    if constexpr (!std::is_integral_v<T>) {
      if (a != a || b != b) return add(a, b);           // NaN in, NaN out
      if (a == b) return from_bits(bits(a) & bits(b));  // max(-0, +0) = +0
    }
    return a > b ? a : b;
  }
};

struct Min {
  template <class T>
  __device__ __forceinline__ static T apply(T a, T b) {
    if constexpr (!std::is_integral_v<T>) {
      if (a != a || b != b) return add(a, b);
      if (a == b) return from_bits(bits(a) | bits(b));  // min(-0, +0) = -0
    }
    return a < b ? a : b;
  }
};

}  // namespace ccl::reduce::cuda::dev
