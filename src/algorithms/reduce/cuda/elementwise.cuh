// The loop every kernel runs: dst[i] = fn(a[i], b[i]) (or fn(a[i]) for the unary ones) over
// `count` elements of type S, for pointers of any alignment, dst equal to a or b or neither.
//
// Where all pointers share their offset modulo W bytes (and it is a multiple of the element
// size), the elements before the first W-aligned address (the head) and after the last whole
// vector (the tail) are done one at a time, and the middle in W-byte vectors: W = 16 (uint4) in
// the common case, 8, 4, 2 where the pointers agree only that far. Where they do not even agree
// modulo the element size (or an element is misaligned), every element is read and written
// byte by byte: correct for any address, slower (about what a byte copy gets).
//
// The 16-byte middle is a grid-stride loop over tiles of blockDim.x * kVectorsPerThread vectors:
// thread t of a block takes vectors t, t + blockDim.x, ... of its tile, so each load instruction
// of a warp reads contiguous memory, and a thread issues all its loads before its first store.
#pragma once

#include <cstdint>

#include "algorithms/reduce/cuda/cuda_launch.h"
#include "algorithms/reduce/cuda/lanes.cuh"

namespace ccl::reduce::cuda::dev {

using u64 = unsigned long long;

struct Span {
  unsigned char* dst;
  const unsigned char* a;
  const unsigned char* b;  // nullptr for the unary kernels
  u64 count;
};

// Fn: using S; S elem(S x, S y) const; template <class V> V vec(V x, V y) const.
// Unary functions get y = 0 and ignore it.
template <class S, int W, bool kBinary, class Fn>
__device__ __forceinline__ void run_vectors(const Fn& fn, const Span& s, u64 head) {
  using V = typename VecOf<W>::type;
  constexpr unsigned kPer = W / sizeof(S);
  constexpr unsigned kUnroll = kVectorsPerThread;
  const u64 nvec = (s.count - head) / kPer;
  const V* va = reinterpret_cast<const V*>(s.a + head * sizeof(S));
  const V* vb = kBinary ? reinterpret_cast<const V*>(s.b + head * sizeof(S)) : nullptr;
  V* vd = reinterpret_cast<V*>(s.dst + head * sizeof(S));
  u64 done = 0;
  // Whole tiles, unrolled, for the 16-byte case only: the narrower vectors are the fallback for
  // pointers that disagree modulo 16, and unrolling them too would double the fatbin.
  if constexpr (W == 16) {
    const u64 tile = u64(blockDim.x) * kUnroll;
    const u64 tiles = nvec / tile;
    for (u64 t = blockIdx.x; t < tiles; t += gridDim.x) {
      const u64 first = t * tile + threadIdx.x;
      V x[kUnroll], y[kUnroll];
#pragma unroll
      for (unsigned k = 0; k < kUnroll; ++k) {
        x[k] = va[first + k * blockDim.x];
        y[k] = kBinary ? vb[first + k * blockDim.x] : V{};
      }
#pragma unroll
      for (unsigned k = 0; k < kUnroll; ++k) vd[first + k * blockDim.x] = fn.vec(x[k], y[k]);
    }
    done = tiles * tile;
  }
  // The rest (less than a tile for W = 16): one vector a thread per step.
  const u64 stride = u64(gridDim.x) * blockDim.x;
  for (u64 i = done + blockIdx.x * u64(blockDim.x) + threadIdx.x; i < nvec; i += stride) {
    vd[i] = fn.vec(va[i], kBinary ? vb[i] : V{});
  }
}

// Elements [first, last) one at a time with typed accesses (they are element-aligned).
template <class S, bool kBinary, class Fn>
__device__ __forceinline__ void run_elements(const Fn& fn, const Span& s, u64 first, u64 last) {
  const S* a = reinterpret_cast<const S*>(s.a);
  const S* b = reinterpret_cast<const S*>(s.b);
  S* d = reinterpret_cast<S*>(s.dst);
  const u64 stride = u64(gridDim.x) * blockDim.x;
  for (u64 i = first + blockIdx.x * u64(blockDim.x) + threadIdx.x; i < last; i += stride) {
    d[i] = fn.elem(a[i], kBinary ? b[i] : S{});
  }
}

template <class S, int W, bool kBinary, class Fn>
__device__ __forceinline__ void run_aligned(const Fn& fn, const Span& s) {
  const unsigned offset = unsigned(reinterpret_cast<uintptr_t>(s.dst) % W);
  u64 head = ((W - offset) % W) / sizeof(S);
  if (head > s.count) head = s.count;
  constexpr unsigned kPer = W / sizeof(S);
  const u64 tail = head + (s.count - head) / kPer * kPer;
  run_elements<S, kBinary>(fn, s, 0, head);
  run_elements<S, kBinary>(fn, s, tail, s.count);
  run_vectors<S, W, kBinary>(fn, s, head);
}

template <class S>
__device__ __forceinline__ S load_bytes(const unsigned char* p) {
  unsigned char raw[sizeof(S)];
#pragma unroll
  for (unsigned k = 0; k < sizeof(S); ++k) raw[k] = p[k];
  S v;
  memcpy(&v, raw, sizeof v);
  return v;
}

template <class S>
__device__ __forceinline__ void store_bytes(unsigned char* p, S v) {
  unsigned char raw[sizeof(S)];
  memcpy(raw, &v, sizeof v);
#pragma unroll
  for (unsigned k = 0; k < sizeof(S); ++k) p[k] = raw[k];
}

// Any alignment: elements assembled from single bytes.
template <class S, bool kBinary, class Fn>
__device__ __forceinline__ void run_bytes(const Fn& fn, const Span& s) {
  const u64 stride = u64(gridDim.x) * blockDim.x;
  for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < s.count; i += stride) {
    const S x = load_bytes<S>(s.a + i * sizeof(S));
    const S y = kBinary ? load_bytes<S>(s.b + i * sizeof(S)) : S{};
    store_bytes<S>(s.dst + i * sizeof(S), fn.elem(x, y));
  }
}

// Picks the widest vector all pointers agree on (the same choice in every thread).
template <class S, bool kBinary, class Fn>
__device__ __forceinline__ void elementwise(const Fn& fn, const Span& s) {
  const uintptr_t d = reinterpret_cast<uintptr_t>(s.dst);
  uintptr_t differ = reinterpret_cast<uintptr_t>(s.a) ^ d;
  if (kBinary) differ |= reinterpret_cast<uintptr_t>(s.b) ^ d;
  if (d % sizeof(S) != 0 || differ % sizeof(S) != 0) return run_bytes<S, kBinary>(fn, s);
  const uintptr_t agree = (differ | 16) & (~(differ | 16) + 1);  // lowest set bit, at most 16
  if (agree >= 16) return run_aligned<S, 16, kBinary>(fn, s);
  if constexpr (sizeof(S) <= 8) {
    if (agree >= 8) return run_aligned<S, 8, kBinary>(fn, s);
  }
  if constexpr (sizeof(S) <= 4) {
    if (agree >= 4) return run_aligned<S, 4, kBinary>(fn, s);
  }
  if constexpr (sizeof(S) <= 2) {
    if (agree >= 2) return run_aligned<S, 2, kBinary>(fn, s);
  }
  run_aligned<S, sizeof(S), kBinary>(fn, s);
}

}  // namespace ccl::reduce::cuda::dev
