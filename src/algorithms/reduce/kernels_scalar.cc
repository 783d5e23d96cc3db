// Scalar kernels: the fallback for CPUs without AVX2, and the divide kernels for integers.
// Elements are read and written with memcpy since no alignment is assumed. The compiler may still
// vectorize these loops for the baseline ISA (SSE2), which only makes the fallback faster.
#include <cstring>
#include <type_traits>

#include "algorithms/reduce/convert_inl.h"
#include "algorithms/reduce/kernel_table.h"

namespace ccl::reduce {
namespace {

using namespace detail;

// A codec stores a datatype and computes it in a wider type (16- and 8-bit floats in float).
template <class T>
struct Plain {
  using Storage = T;
  using Compute = T;
  static T decode(T v) { return v; }
  static T encode(T v) { return v; }
};

template <float (*Decode)(uint16_t), uint16_t (*Encode)(float)>
struct Narrow16 {
  using Storage = uint16_t;
  using Compute = float;
  static float decode(uint16_t v) { return Decode(v); }
  static uint16_t encode(float v) { return Encode(v); }
};

template <float (*Decode)(uint8_t), uint8_t (*Encode)(float)>
struct Narrow8 {
  using Storage = uint8_t;
  using Compute = float;
  static float decode(uint8_t v) { return Decode(v); }
  static uint8_t encode(float v) { return Encode(v); }
};

template <class F>
using BitsOf = std::conditional_t<sizeof(F) == 4, uint32_t, uint64_t>;

template <class F>
BitsOf<F> to_bits(F f) {
  BitsOf<F> u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

template <class F>
F from_bits(BitsOf<F> u) {
  F f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Integers wrap (computed in uint64_t, then truncated: no signed overflow). Floats: max/min
// follow IEEE 754-2019 maximum/minimum: a NaN operand gives NaN, and -0 < +0.
struct Sum {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return T(uint64_t(a) + uint64_t(b));
    } else {
      return a + b;
    }
  }
};

struct Prod {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return T(uint64_t(a) * uint64_t(b));
    } else {
      return a * b;
    }
  }
};

struct Max {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (!std::is_integral_v<T>) {
      if (a != a || b != b) return a + b;
      if (a == b) return from_bits<T>(to_bits(a) & to_bits(b));  // max(-0, +0) = +0
    }
    return a > b ? a : b;
  }
};

struct Min {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (!std::is_integral_v<T>) {
      if (a != a || b != b) return a + b;
      if (a == b) return from_bits<T>(to_bits(a) | to_bits(b));  // min(-0, +0) = -0
    }
    return a < b ? a : b;
  }
};

template <class C, class Op>
void reduce(void* dst, const void* a, const void* b, size_t count) {
  using S = typename C::Storage;
  auto* d = static_cast<unsigned char*>(dst);
  const auto* pa = static_cast<const unsigned char*>(a);
  const auto* pb = static_cast<const unsigned char*>(b);
  for (size_t i = 0; i < count; ++i) {
    S x, y;
    std::memcpy(&x, pa + i * sizeof(S), sizeof(S));
    std::memcpy(&y, pb + i * sizeof(S), sizeof(S));
    const S r = C::encode(Op::apply(C::decode(x), C::decode(y)));
    std::memcpy(d + i * sizeof(S), &r, sizeof(S));
  }
}

// Truncating division, as C++ `/` would give if the divisor fitted in T.
template <class T>
T divide_int(T x, uint64_t divisor) {
  if constexpr (std::is_unsigned_v<T>) {
    return T(uint64_t(x) / divisor);
  } else {
    // On magnitudes, so that a divisor above INT64_MAX and x == INT64_MIN both stay defined.
    const uint64_t mag = x < 0 ? uint64_t(0) - uint64_t(x) : uint64_t(x);
    const uint64_t q = mag / divisor;
    return T(x < 0 ? uint64_t(0) - q : q);
  }
}

template <class C>
void divide(void* data, size_t count, uint64_t divisor) {
  using S = typename C::Storage;
  using F = typename C::Compute;
  if (divisor == 0) throw_zero_divisor();
  auto* p = static_cast<unsigned char*>(data);
  for (size_t i = 0; i < count; ++i) {
    S x;
    std::memcpy(&x, p + i * sizeof(S), sizeof(S));
    if constexpr (std::is_integral_v<F>) {
      x = divide_int<S>(x, divisor);
    } else {
      // In float (double for double), by the divisor converted the same way on every ISA.
      x = C::encode(C::decode(x) / F(divisor));
    }
    std::memcpy(p + i * sizeof(S), &x, sizeof(S));
  }
}

template <class C>
constexpr void fill(KernelTable& t, cclDataType_t type) {
  t.reduce[type][cclSum] = &reduce<C, Sum>;
  t.reduce[type][cclProd] = &reduce<C, Prod>;
  t.reduce[type][cclMax] = &reduce<C, Max>;
  t.reduce[type][cclMin] = &reduce<C, Min>;
  t.divide[type] = &divide<C>;
}

constexpr KernelTable make_table() {
  KernelTable t{};
  fill<Plain<int8_t>>(t, cclInt8);
  fill<Plain<uint8_t>>(t, cclUint8);
  fill<Plain<int32_t>>(t, cclInt32);
  fill<Plain<uint32_t>>(t, cclUint32);
  fill<Plain<int64_t>>(t, cclInt64);
  fill<Plain<uint64_t>>(t, cclUint64);
  fill<Narrow16<half_to_float_inl, float_to_half_inl>>(t, cclFloat16);
  fill<Plain<float>>(t, cclFloat32);
  fill<Plain<double>>(t, cclFloat64);
  fill<Narrow16<bf16_to_float_inl, float_to_bf16_inl>>(t, cclBfloat16);
  fill<Narrow8<fp8e4m3_to_float_inl, float_to_fp8e4m3_inl>>(t, cclFloat8e4m3);
  fill<Narrow8<fp8e5m2_to_float_inl, float_to_fp8e5m2_inl>>(t, cclFloat8e5m2);
  return t;
}

}  // namespace

constinit const KernelTable kScalarKernels = make_table();

}  // namespace ccl::reduce
