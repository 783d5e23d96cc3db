// A vector register (uint4, uint2, ...) seen as an array of narrower lanes. memcpy between
// locals costs nothing on the GPU: it becomes register moves.
#pragma once

#include <cstdint>
#include <cstring>

namespace ccl::reduce::cuda::dev {

// The vector type of W bytes the engine loads and stores.
template <int W>
struct VecOf;
template <>
struct VecOf<16> {
  using type = uint4;
};
template <>
struct VecOf<8> {
  using type = uint2;
};
template <>
struct VecOf<4> {
  using type = uint32_t;
};
template <>
struct VecOf<2> {
  using type = uint16_t;
};
template <>
struct VecOf<1> {
  using type = uint8_t;
};

template <class L, class V>
struct Lanes {
  static_assert(sizeof(V) % sizeof(L) == 0, "a vector holds whole lanes");
  static constexpr int kCount = int(sizeof(V) / sizeof(L));
  L e[kCount];
};

template <class L, class V>
__device__ __forceinline__ Lanes<L, V> unpack(const V& v) {
  Lanes<L, V> l;
  memcpy(l.e, &v, sizeof v);
  return l;
}

template <class V, class L>
__device__ __forceinline__ V pack(const Lanes<L, V>& l) {
  V v;
  memcpy(&v, l.e, sizeof v);
  return v;
}

// A vector whose every lane holds x.
template <class V, class S>
__device__ __forceinline__ V splat(S x) {
  Lanes<S, V> l;
#pragma unroll
  for (int k = 0; k < l.kCount; ++k) l.e[k] = x;
  return pack<V>(l);
}

}  // namespace ccl::reduce::cuda::dev
