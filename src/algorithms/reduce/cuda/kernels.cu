// The CUDA kernels of ccl, built into one fatbin (cmake/cuda_kernels.cmake) that the host side
// loads with the driver API. One extern "C" kernel per name of cuda_kernel_names.h, generated
// from its type and op lists; each is a thin entry into elementwise.cuh with the datatype's
// codec (codecs.cuh). Semantics are the CPU kernels' (src/algorithms/reduce), bit for bit for
// every non-NaN result; tests/cuda/cuda_kernels_check compares them on a GPU.
#include <cstdint>

#include "algorithms/reduce/cuda/codecs.cuh"
#include "algorithms/reduce/cuda/cuda_kernel_names.h"
#include "algorithms/reduce/cuda/cuda_launch.h"
#include "algorithms/reduce/cuda/elementwise.cuh"

namespace ccl::reduce::cuda::dev {
namespace {

template <class C, class Op>
struct ReduceOp {
  using S = typename C::S;
  __device__ __forceinline__ S elem(S x, S y) const { return C::template elem<Op>(x, y); }
  template <class V>
  __device__ __forceinline__ V vec(const V& x, const V& y) const {
    return C::template vec<Op>(x, y);
  }
};

// PreMulSum's scale: Encode(Decode(x) * Decode(factor)) for the narrow floats, x * factor for
// float/double, a wrapping product for integers, exactly the CPU's ScaleFn (codecs.cuh).
template <class C>
struct ScaleOp {
  using S = typename C::S;
  typename C::Scaler scaler;
  __device__ __forceinline__ S elem(S x, S) const { return scaler.elem(x); }
  template <class V>
  __device__ __forceinline__ V vec(const V& x, const V&) const {
    return scaler.vec(x);
  }
};

template <class C>
struct DivideOp {
  using S = typename C::S;
  typename C::Divider divider;
  __device__ __forceinline__ S elem(S x, S) const { return divider.elem(x); }
  template <class V>
  __device__ __forceinline__ V vec(const V& x, const V&) const {
    return divider.vec(x);
  }
};

struct CopyOp {
  using S = uint8_t;
  __device__ __forceinline__ S elem(S x, S) const { return x; }
  template <class V>
  __device__ __forceinline__ V vec(const V& x, const V&) const {
    return x;
  }
};

template <class C, class Op>
__device__ __forceinline__ void reduce(void* dst, const void* a, const void* b, u64 count) {
  const Span s{static_cast<unsigned char*>(dst), static_cast<const unsigned char*>(a),
               static_cast<const unsigned char*>(b), count};
  elementwise<typename C::S, true>(ReduceOp<C, Op>{}, s);
}

template <class C>
__device__ __forceinline__ void divide(void* data, u64 count, u64 divisor) {
  if (divisor == 0) return;  // the host rejects it first, as the CPU kernel throws
  auto* p = static_cast<unsigned char*>(data);
  elementwise<typename C::S, false>(DivideOp<C>{typename C::Divider(divisor)},
                                    Span{p, p, nullptr, count});
}

template <class C>
__device__ __forceinline__ void scale(void* dst, const void* src, u64 count, u64 scalar_bits) {
  using S = typename C::S;
  S factor;
  memcpy(&factor, &scalar_bits, sizeof factor);  // the low bytes (little-endian)
  const Span s{static_cast<unsigned char*>(dst), static_cast<const unsigned char*>(src), nullptr,
               count};
  elementwise<S, false>(ScaleOp<C>{typename C::Scaler(factor)}, s);
}

}  // namespace
}  // namespace ccl::reduce::cuda::dev

// The codec of each type tag and the op of each op tag of cuda_kernel_names.h's lists.
#define CCL_CODEC_i8 Plain<int8_t>
#define CCL_CODEC_u8 Plain<uint8_t>
#define CCL_CODEC_i32 Plain<int32_t>
#define CCL_CODEC_u32 Plain<uint32_t>
#define CCL_CODEC_i64 Plain<int64_t>
#define CCL_CODEC_u64 Plain<uint64_t>
#define CCL_CODEC_f16 Half
#define CCL_CODEC_f32 Plain<float>
#define CCL_CODEC_f64 Plain<double>
#define CCL_CODEC_bf16 Bf16
#define CCL_CODEC_e4m3 E4m3
#define CCL_CODEC_e5m2 E5m2
#define CCL_OP_sum Sum
#define CCL_OP_prod Prod
#define CCL_OP_max Max
#define CCL_OP_min Min

#define CCL_KERNEL                                                                  \
  extern "C" __global__ void __launch_bounds__(ccl::reduce::cuda::kThreadsPerBlock, \
                                               ccl::reduce::cuda::kBlocksPerSm)

#define CCL_REDUCE_KERNEL(t, op)                                            \
  CCL_KERNEL ccl_reduce_##t##_##op(void* dst, const void* a, const void* b, \
                                   unsigned long long count) {              \
    using namespace ccl::reduce::cuda::dev;                                 \
    reduce<CCL_CODEC_##t, CCL_OP_##op>(dst, a, b, count);                   \
  }
#define CCL_TYPE_KERNELS(t)                                                                     \
  CCL_REDUCE_KERNEL(t, sum)                                                                     \
  CCL_REDUCE_KERNEL(t, prod)                                                                    \
  CCL_REDUCE_KERNEL(t, max)                                                                     \
  CCL_REDUCE_KERNEL(t, min)                                                                     \
  CCL_KERNEL ccl_divide_##t(void* data, unsigned long long count, unsigned long long divisor) { \
    using namespace ccl::reduce::cuda::dev;                                                     \
    divide<CCL_CODEC_##t>(data, count, divisor);                                                \
  }                                                                                             \
  CCL_KERNEL ccl_scale_##t(void* dst, const void* src, unsigned long long count,                \
                           unsigned long long scalar_bits) {                                    \
    using namespace ccl::reduce::cuda::dev;                                                     \
    scale<CCL_CODEC_##t>(dst, src, count, scalar_bits);                                         \
  }

CCL_CUDA_FOR_EACH_TYPE(CCL_TYPE_KERNELS)

CCL_KERNEL ccl_copy(void* dst, const void* src, unsigned long long bytes) {
  using namespace ccl::reduce::cuda::dev;
  elementwise<uint8_t, false>(
      CopyOp{}, Span{static_cast<unsigned char*>(dst), static_cast<const unsigned char*>(src),
                     nullptr, bytes});
}
