// The kernels' loop (elementwise.cuh) compiled for the host and run thread by thread over
// simulated grids: for every alignment path (16-, 8-, 4-, 2-, 1-byte vectors, bytes), counts
// around the head, tile and tail boundaries, aliasing, and several grid shapes, each element
// must be computed exactly once and no byte outside dst written. Threads of a kernel are
// independent, so running them one after another is one of the orders a GPU may run them in.
// The op is a wrapping add, so an element done twice in place (dst == a) shows.
#include <cstdint>
#include <cstring>

// Just enough of CUDA for the engine to compile as host code.
#define __device__
#define __forceinline__ inline
struct uint4 {
  uint32_t x, y, z, w;
};
struct uint2 {
  uint32_t x, y;
};
struct SimDim {
  unsigned x = 0;
};
namespace ccl::reduce::cuda::dev {
SimDim blockIdx, threadIdx, blockDim, gridDim;
}  // namespace ccl::reduce::cuda::dev

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "algorithms/reduce/cuda/elementwise.cuh"

namespace ccl::reduce::cuda::dev {
namespace {

template <class T>
struct AddOp {
  using S = T;
  S elem(S x, S y) const { return S(x + y); }
  template <class V>
  V vec(const V& x, const V& y) const {
    const auto a = unpack<S>(x), b = unpack<S>(y);
    Lanes<S, V> r;
    for (int k = 0; k < r.kCount; ++k) r.e[k] = elem(a.e[k], b.e[k]);
    return pack<V>(r);
  }
};

template <class T, bool kBinary>
void simulate(unsigned blocks, unsigned threads, const Span& s) {
  gridDim.x = blocks;
  blockDim.x = threads;
  for (unsigned b = 0; b < blocks; ++b) {
    for (unsigned t = 0; t < threads; ++t) {
      blockIdx.x = b;
      threadIdx.x = t;
      elementwise<T, kBinary>(AddOp<T>{}, s);
    }
  }
}

enum class Alias { None, DstIsA, DstIsB };

template <class T>
void check(size_t count, size_t off_a, size_t off_b, size_t off_d, Alias alias, bool binary,
           unsigned blocks, unsigned threads) {
  const size_t bytes = count * sizeof(T) + 64;
  // 16-byte aligned backing stores, so the offsets alone set each pointer's alignment.
  std::vector<uint4> sa(bytes / 16 + 2), sb(bytes / 16 + 2), sd(bytes / 16 + 2);
  auto* a = reinterpret_cast<unsigned char*>(sa.data());
  auto* b = reinterpret_cast<unsigned char*>(sb.data());
  auto* d = reinterpret_cast<unsigned char*>(sd.data());
  for (size_t i = 0; i < bytes + 16; ++i) {
    a[i] = uint8_t(i * 7 + 1), b[i] = uint8_t(i * 13 + 5), d[i] = 0xa5;
  }
  const std::vector<unsigned char> a0(a, a + bytes + 16), b0(b, b + bytes + 16),
      d0(d, d + bytes + 16);
  unsigned char* dst = alias == Alias::DstIsA   ? a + off_a
                       : alias == Alias::DstIsB ? b + off_b
                                                : d + off_d;
  const Span s{dst, a + off_a, binary ? b + off_b : nullptr, count};
  if (binary) {
    simulate<T, true>(blocks, threads, s);
  } else {
    simulate<T, false>(blocks, threads, s);
  }
  const std::string what = "size " + std::to_string(sizeof(T)) + " count " + std::to_string(count) +
                           " offsets " + std::to_string(off_a) + "/" + std::to_string(off_b) + "/" +
                           std::to_string(off_d) + " alias " + std::to_string(int(alias)) +
                           " grid " + std::to_string(blocks) + "x" + std::to_string(threads) +
                           (binary ? "" : " unary");
  unsigned char* base = alias == Alias::DstIsA ? a : alias == Alias::DstIsB ? b : d;
  const std::vector<unsigned char>& before = alias == Alias::DstIsA   ? a0
                                             : alias == Alias::DstIsB ? b0
                                                                      : d0;
  const size_t off = dst - base;
  for (size_t i = 0; i < bytes + 16; ++i) {
    if (i >= off && i < off + count * sizeof(T)) continue;
    ASSERT_EQ(base[i], before[i]) << what << ": byte " << i << " outside dst written";
  }
  for (size_t i = 0; i < count; ++i) {
    T x, y = 0, got;
    std::memcpy(&x, a0.data() + off_a + i * sizeof(T), sizeof(T));
    if (binary) std::memcpy(&y, b0.data() + off_b + i * sizeof(T), sizeof(T));
    std::memcpy(&got, dst + i * sizeof(T), sizeof(T));
    ASSERT_EQ(got, T(x + y)) << what << ": element " << i;
  }
}

template <class T>
void check_all() {
  const size_t e = sizeof(T);
  // Alike (aligned, misaligned by elements, by a byte), agreeing modulo 8, 4, 2, 1 only.
  const size_t offsets[][3] = {
      {0, 0, 0}, {e, e, e}, {3 * e, 3 * e, 3 * e}, {1, 1, 1}, {8, 0, 24}, {0, 4, 12}, {2, 0, 6},
      {1, 2, 3}, {0, 0, 1}, {16, 32, 48}};
  const size_t counts[] = {0, 1, 2, 3, 15, 16, 17, 31, 33, 255, 256, 257, 1000, 4097};
  const unsigned grids[][2] = {{1, 32}, {3, 64}, {2, 4}};
  for (const auto& o : offsets) {
    for (size_t n : counts) {
      for (const auto& g : grids) {
        check<T>(n, o[0], o[1], o[2], Alias::None, true, g[0], g[1]);
        check<T>(n, o[0], o[1], o[2], Alias::None, false, g[0], g[1]);
        check<T>(n, o[0], o[1], 0, Alias::DstIsA, true, g[0], g[1]);
        check<T>(n, o[0], o[1], 0, Alias::DstIsB, true, g[0], g[1]);
        check<T>(n, o[0], 0, 0, Alias::DstIsA, false, g[0], g[1]);  // in place (divide)
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

TEST(CudaEngine, Bytes) { check_all<uint8_t>(); }
TEST(CudaEngine, Halves) { check_all<uint16_t>(); }
TEST(CudaEngine, Words) { check_all<uint32_t>(); }
TEST(CudaEngine, DoubleWords) { check_all<uint64_t>(); }

// Counts spanning several whole tiles of the 16-byte loop (512 threads x 4 vectors) plus a
// remainder, on grids smaller and larger than the tile count.
TEST(CudaEngine, ManyTiles) {
  for (unsigned blocks : {1u, 3u, 7u}) {
    check<uint32_t>(3 * 512 * 16 + 5, 4, 4, 4, Alias::None, true, blocks, 512);
    check<uint8_t>(5 * 512 * 64 + 77, 0, 0, 0, Alias::DstIsA, false, blocks, 512);
  }
}

}  // namespace
}  // namespace ccl::reduce::cuda::dev
