// Per datatype: how a vector of stored elements is combined with another (reduce, scale) or
// divided (avg), with the CPU's rules. 16- and 8-bit floats are decoded to float, computed there
// and rounded back to nearest even, two elements per conversion instruction where the GPU has a
// paired form (cvt.rn.f16x2.f32, cvt.rn.bf16x2.f32; fp8 x2 on sm_89+).
//
// Every conversion used is exact or correctly rounded to nearest even, so for every non-NaN
// result the bits are the CPU's: fp16 -> float (cvt, exact), float -> fp16 (cvt.rn: overflow to
// inf, subnormals kept), bf16 -> float (a shift), float -> bf16 (cvt.rn), fp8 -> fp16 -> float
// (exact), float -> fp8 (cvt.rn.satfinite on sm_89+, soft_float8.h below that).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "algorithms/reduce/cuda/int_divide.h"
#include "algorithms/reduce/cuda/lanes.cuh"
#include "algorithms/reduce/cuda/ops.cuh"
#include "algorithms/reduce/cuda/soft_float8.h"

namespace ccl::reduce::cuda::dev {

// ---- Integers and float/double: computed in the stored type -------------------------------

// Per-byte SIMD for the 8-bit integers (__vadd4 and friends: 4 lanes a 32-bit instruction or
// short sequence; wrapping add, signed or unsigned max/min); prod has no such form.
template <class T, class Op>
__device__ __forceinline__ uint32_t simd4(uint32_t x, uint32_t y) {
  constexpr bool kSigned = std::is_signed_v<T>;
  if constexpr (std::is_same_v<Op, Sum>) return __vadd4(x, y);
  if constexpr (std::is_same_v<Op, Max>) return kSigned ? __vmaxs4(x, y) : __vmaxu4(x, y);
  if constexpr (std::is_same_v<Op, Min>) return kSigned ? __vmins4(x, y) : __vminu4(x, y);
  return 0;
}

template <class T>
struct Plain {
  using S = T;

  template <class Op>
  __device__ __forceinline__ static S elem(S x, S y) {
    return Op::apply(x, y);
  }

  template <class Op, class V>
  __device__ __forceinline__ static V vec(const V& x, const V& y) {
    if constexpr (sizeof(T) == 1 && sizeof(V) >= 4 && !std::is_same_v<Op, Prod>) {
      const auto a = unpack<uint32_t>(x), b = unpack<uint32_t>(y);
      Lanes<uint32_t, V> r;
#pragma unroll
      for (int k = 0; k < r.kCount; ++k) r.e[k] = simd4<T, Op>(a.e[k], b.e[k]);
      return pack<V>(r);
    } else {
      const auto a = unpack<S>(x), b = unpack<S>(y);
      Lanes<S, V> r;
#pragma unroll
      for (int k = 0; k < r.kCount; ++k) r.e[k] = Op::apply(a.e[k], b.e[k]);
      return pack<V>(r);
    }
  }

  // PreMulSum's scale: the prod op against the factor in every lane (a wrapping product for
  // integers, x * factor for float and double, as the CPU's ScaleFn).
  class Scaler {
   public:
    __device__ explicit Scaler(S factor) : factor_(factor) {}
    __device__ __forceinline__ S elem(S x) const { return Prod::apply(x, factor_); }
    template <class V>
    __device__ __forceinline__ V vec(const V& x) const {
      return Plain::vec<Prod>(x, splat<V>(factor_));
    }

   private:
    S factor_;
  };

  // avg's last step: integers truncate (magnitudes divided, the sign put back, as the CPU's
  // divide_int), floats divide by the divisor rounded to the type.
  class Divider {
   public:
    __device__ explicit Divider(uint64_t d) : d_(d), small_(d), fd_(to_float(d)) {}

    __device__ __forceinline__ S elem(S x) const {
      if constexpr (std::is_floating_point_v<T>) {
        if constexpr (sizeof(T) == 4) {
          return __fdiv_rn(x, fd_);
        } else {
          return __ddiv_rn(x, fd_);
        }
      } else if constexpr (sizeof(T) <= 4) {
        if constexpr (std::is_unsigned_v<T>) {
          return T(small_.quotient(uint32_t(x)));
        } else {
          const uint32_t mag = x < 0 ? 0u - uint32_t(x) : uint32_t(x);
          const uint32_t q = small_.quotient(mag);
          return T(x < 0 ? 0u - q : q);
        }
      } else if constexpr (std::is_unsigned_v<T>) {
        return T(uint64_t(x) / d_);
      } else {
        const uint64_t mag = x < 0 ? uint64_t(0) - uint64_t(x) : uint64_t(x);
        const uint64_t q = mag / d_;
        return T(x < 0 ? uint64_t(0) - q : q);
      }
    }

    template <class V>
    __device__ __forceinline__ V vec(const V& x) const {
      const auto a = unpack<S>(x);
      Lanes<S, V> r;
#pragma unroll
      for (int k = 0; k < r.kCount; ++k) r.e[k] = elem(a.e[k]);
      return pack<V>(r);
    }

   private:
    using F = std::conditional_t<std::is_same_v<T, double>, double, float>;
    __device__ static F to_float(uint64_t d) {
      if constexpr (std::is_same_v<F, double>) {
        return __ull2double_rn(d);
      } else {
        return __ull2float_rn(d);
      }
    }
    uint64_t d_;
    Divide32 small_;
    F fd_;
  };
};

// ---- 16- and 8-bit floats: computed in float ----------------------------------------------

// Shared by the narrow codecs: Traits gives S (storage), P (two elements side by side: uint32_t
// for 16-bit types, uint16_t for 8-bit ones), and decode/encode of one element and of a pair.
template <class Traits>
struct Narrow {
  using S = typename Traits::S;
  using P = typename Traits::P;

  template <class Op>
  __device__ __forceinline__ static S elem(S x, S y) {
    return Traits::encode(Op::apply(Traits::decode(x), Traits::decode(y)));
  }

  template <class Op, class V>
  __device__ __forceinline__ static V vec(const V& x, const V& y) {
    if constexpr (sizeof(V) >= sizeof(P)) {
      const auto a = unpack<P>(x), b = unpack<P>(y);
      Lanes<P, V> r;
#pragma unroll
      for (int k = 0; k < r.kCount; ++k) {
        const float2 fa = Traits::decode2(a.e[k]), fb = Traits::decode2(b.e[k]);
        r.e[k] = Traits::encode2(Op::apply(fa.x, fb.x), Op::apply(fa.y, fb.y));
      }
      return pack<V>(r);
    } else {
      return V(elem<Op>(S(x), S(y)));  // a vector of one element
    }
  }

  // Encode(g(Decode(x))) for every element of x (divide, scale: g is a float -> float).
  template <class V, class G>
  __device__ __forceinline__ static V map(const V& x, G g) {
    if constexpr (sizeof(V) >= sizeof(P)) {
      const auto a = unpack<P>(x);
      Lanes<P, V> r;
#pragma unroll
      for (int k = 0; k < r.kCount; ++k) {
        const float2 f = Traits::decode2(a.e[k]);
        r.e[k] = Traits::encode2(g(f.x), g(f.y));
      }
      return pack<V>(r);
    } else {
      return V(Traits::encode(g(Traits::decode(S(x)))));
    }
  }

  // PreMulSum's factor, decoded once rather than once a vector.
  class Scaler {
   public:
    __device__ explicit Scaler(S factor) : f_(Traits::decode(factor)) {}
    __device__ __forceinline__ S elem(S x) const {
      return Traits::encode(__fmul_rn(Traits::decode(x), f_));
    }
    template <class V>
    __device__ __forceinline__ V vec(const V& x) const {
      const float f = f_;
      return map(x, [f](float v) { return __fmul_rn(v, f); });
    }

   private:
    float f_;
  };

  class Divider {
   public:
    // The divisor converted to float once, as every CPU kernel does.
    __device__ explicit Divider(uint64_t d) : fd_(__ull2float_rn(d)) {}
    __device__ __forceinline__ S elem(S x) const {
      return Traits::encode(__fdiv_rn(Traits::decode(x), fd_));
    }
    template <class V>
    __device__ __forceinline__ V vec(const V& x) const {
      const float fd = fd_;
      return map(x, [fd](float v) { return __fdiv_rn(v, fd); });
    }

   private:
    float fd_;
  };
};

struct HalfTraits {
  using S = uint16_t;
  using P = uint32_t;
  __device__ __forceinline__ static float decode(S v) { return __half2float(__ushort_as_half(v)); }
  __device__ __forceinline__ static S encode(float f) {
    return __half_as_ushort(__float2half_rn(f));
  }
  __device__ __forceinline__ static float2 decode2(P v) {
    __half2_raw r;
    r.x = uint16_t(v);
    r.y = uint16_t(v >> 16);
    return __half22float2(__half2(r));
  }
  __device__ __forceinline__ static P encode2(float lo, float hi) {
    const __half2_raw r = __half2_raw(__floats2half2_rn(lo, hi));
    return uint32_t(r.x) | uint32_t(r.y) << 16;
  }
};

struct Bf16Traits {
  using S = uint16_t;
  using P = uint32_t;
  // bf16 is the upper half of a float: decoding is a shift, exact by construction.
  __device__ __forceinline__ static float decode(S v) { return __uint_as_float(uint32_t(v) << 16); }
  __device__ __forceinline__ static S encode(float f) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(f));
  }
  __device__ __forceinline__ static float2 decode2(P v) {
    return make_float2(__uint_as_float(v << 16), __uint_as_float(v & 0xffff0000u));
  }
  __device__ __forceinline__ static P encode2(float lo, float hi) {
    const __nv_bfloat162_raw r = __nv_bfloat162_raw(__floats2bfloat162_rn(lo, hi));
    return uint32_t(r.x) | uint32_t(r.y) << 16;
  }
};

// fp8: on sm_89+ the conversions are instructions (cvt e4m3x2/e5m2x2 <-> f16x2); cvt from f32
// only has a saturating form, so the two out-of-range rules of the CPU are applied after it:
// E4M3 saturates to +-448 from the rounding midpoint 464 up (inf included), E5M2 overflows to
// inf from its midpoint 61440 up. With those the result no longer depends on what the
// instruction does out of range; NaN (|f| compares false) stays the instruction's NaN.
template <__nv_fp8_interpretation_t kKind>
struct Fp8Traits {
  using S = uint8_t;
  using P = uint16_t;
  static constexpr bool kE4m3 = kKind == __NV_E4M3;

  __device__ __forceinline__ static uint8_t out_of_range(uint8_t code, float f) {
    const uint8_t sign = uint8_t((__float_as_uint(f) >> 24) & 0x80);
    if constexpr (kE4m3) {
      return fabsf(f) >= 464.0f ? uint8_t(sign | 0x7e) : code;
    } else {
      return fabsf(f) >= 61440.0f ? uint8_t(sign | 0x7c) : code;
    }
  }

  __device__ __forceinline__ static float decode(S v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    return __half2float(__half(__nv_cvt_fp8_to_halfraw(v, kKind)));
#else
    return kE4m3 ? soft::e4m3_to_float(v) : soft::e5m2_to_float(v);
#endif
  }

  __device__ __forceinline__ static S encode(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    return out_of_range(uint8_t(__nv_cvt_float_to_fp8(f, __NV_SATFINITE, kKind)), f);
#else
    return kE4m3 ? soft::float_to_e4m3(f) : soft::float_to_e5m2(f);
#endif
  }

  __device__ __forceinline__ static float2 decode2(P v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    return __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(v, kKind)));
#else
    return make_float2(decode(uint8_t(v)), decode(uint8_t(v >> 8)));
#endif
  }

  __device__ __forceinline__ static P encode2(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    const P both = __nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, kKind);
    return P(out_of_range(uint8_t(both), lo) | out_of_range(uint8_t(both >> 8), hi) << 8);
#else
    return P(encode(lo) | encode(hi) << 8);
#endif
  }
};

using Half = Narrow<HalfTraits>;
using Bf16 = Narrow<Bf16Traits>;
using E4m3 = Narrow<Fp8Traits<__NV_E4M3>>;
using E5m2 = Narrow<Fp8Traits<__NV_E5M2>>;

}  // namespace ccl::reduce::cuda::dev
