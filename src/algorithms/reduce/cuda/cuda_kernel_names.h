// Names of the CUDA kernels in the embedded fatbin (cuda_fatbin.h), for cuModuleGetFunction /
// cuLibraryGetKernel. Plain C++ (no CUDA header). The kernels themselves are defined in
// kernels.cu from the same type and op lists, and tests/unit/cuda_kernels checks that every name
// here is an entry of every image of the fatbin.
//
// Scheme (all extern "C", parameters as 64-bit values and pointers):
//   ccl_reduce_<t>_<op>(void* dst, const void* a, const void* b, unsigned long long count)
//   ccl_divide_<t>(void* data, unsigned long long count, unsigned long long divisor)
//   ccl_scale_<t>(void* dst, const void* src, unsigned long long count,
//                 unsigned long long scalar_bits)
//   ccl_copy(void* dst, const void* src, unsigned long long bytes)
// <t>: i8 u8 i32 u32 i64 u64 f16 f32 f64 bf16 e4m3 e5m2 (cclDataType_t order);
// <op>: sum prod max min (cclRedOp_t order; avg reduces as sum, then ccl_divide_<t>).
#pragma once

#include <cstddef>

#include "ccl/ccl.h"

// The lists behind the names, in cclDataType_t and cclRedOp_t order.
#define CCL_CUDA_FOR_EACH_TYPE(X) \
  X(i8) X(u8) X(i32) X(u32) X(i64) X(u64) X(f16) X(f32) X(f64) X(bf16) X(e4m3) X(e5m2)
#define CCL_CUDA_FOR_EACH_OP(X) X(sum) X(prod) X(max) X(min)

namespace ccl::reduce::cuda {

inline constexpr int kNumBaseOps = 4;  // sum, prod, max, min
// Reduce kernels, one a type and base op, then one divide and one scale a type, and copy.
inline constexpr int kNumKernels = cclNumTypes * kNumBaseOps + 2 * cclNumTypes + 1;  // 73

namespace detail {
#define CCL_CUDA_NAME_ROW(t)                                                   \
  {"ccl_reduce_" #t "_sum", "ccl_reduce_" #t "_prod", "ccl_reduce_" #t "_max", \
   "ccl_reduce_" #t "_min"},
inline constexpr const char* kReduceNames[][kNumBaseOps] = {
    CCL_CUDA_FOR_EACH_TYPE(CCL_CUDA_NAME_ROW)};
#undef CCL_CUDA_NAME_ROW
#define CCL_CUDA_NAME(t) "ccl_divide_" #t,
inline constexpr const char* kDivideNames[] = {CCL_CUDA_FOR_EACH_TYPE(CCL_CUDA_NAME)};
#undef CCL_CUDA_NAME
#define CCL_CUDA_NAME(t) "ccl_scale_" #t,
inline constexpr const char* kScaleNames[] = {CCL_CUDA_FOR_EACH_TYPE(CCL_CUDA_NAME)};
#undef CCL_CUDA_NAME
static_assert(sizeof(kReduceNames) / sizeof(kReduceNames[0]) == cclNumTypes,
              "one row of kernel names per cclDataType_t");
static_assert(sizeof(kDivideNames) / sizeof(kDivideNames[0]) == cclNumTypes);
static_assert(sizeof(kScaleNames) / sizeof(kScaleNames[0]) == cclNumTypes);

constexpr bool valid_type(cclDataType_t type) { return type >= 0 && type < cclNumTypes; }
}  // namespace detail

// The reduce kernel of (type, op); cclAvg gives the sum kernel (the host then launches
// divide_kernel_name(type) with the rank count). nullptr for an invalid type or op (a PreMulSum
// op made by cclRedOpCreatePreMulSum is scale_kernel_name(type) and then sum).
constexpr const char* reduce_kernel_name(cclDataType_t type, cclRedOp_t op) {
  if (!detail::valid_type(type)) return nullptr;
  if (op == cclAvg) op = cclSum;
  if (op < 0 || op >= kNumBaseOps) return nullptr;
  return detail::kReduceNames[type][op];
}

// data[i] /= divisor; the host must not launch it with divisor 0 (the CPU kernel throws
// cclInvalidArgument there; the CUDA kernel leaves the data unchanged).
constexpr const char* divide_kernel_name(cclDataType_t type) {
  return detail::valid_type(type) ? detail::kDivideNames[type] : nullptr;
}

// dst[i] = src[i] * scalar; scalar_bits holds the scalar's element bits in its low bytes (the
// bytes the CPU's ScaleFn reads from its `scalar` pointer, zero-extended).
constexpr const char* scale_kernel_name(cclDataType_t type) {
  return detail::valid_type(type) ? detail::kScaleNames[type] : nullptr;
}

constexpr const char* copy_kernel_name() { return "ccl_copy"; }

// The index in kernel_name_at of reduce_kernel_name(type, op) and of divide_kernel_name(type),
// -1 where that name is nullptr: what a loader caches its functions by.
constexpr int reduce_kernel_index(cclDataType_t type, cclRedOp_t op) {
  if (reduce_kernel_name(type, op) == nullptr) return -1;
  return type * kNumBaseOps + (op == cclAvg ? cclSum : op);
}
constexpr int divide_kernel_index(cclDataType_t type) {
  return detail::valid_type(type) ? cclNumTypes * kNumBaseOps + type : -1;
}
constexpr int scale_kernel_index(cclDataType_t type) {
  return detail::valid_type(type) ? cclNumTypes * kNumBaseOps + cclNumTypes + type : -1;
}
constexpr int copy_kernel_index() { return kNumKernels - 1; }

// Every kernel name once (kNumKernels of them): reduce in type-major order, divide, scale, copy.
constexpr const char* kernel_name_at(int index) {
  if (index < 0 || index >= kNumKernels) return nullptr;
  if (index < cclNumTypes * kNumBaseOps) {
    return detail::kReduceNames[index / kNumBaseOps][index % kNumBaseOps];
  }
  index -= cclNumTypes * kNumBaseOps;
  if (index < cclNumTypes) return detail::kDivideNames[index];
  index -= cclNumTypes;
  if (index < cclNumTypes) return detail::kScaleNames[index];
  return copy_kernel_name();
}

static_assert(kernel_name_at(reduce_kernel_index(cclBfloat16, cclAvg)) ==
              reduce_kernel_name(cclBfloat16, cclSum));
static_assert(kernel_name_at(divide_kernel_index(cclFloat8e5m2)) ==
              divide_kernel_name(cclFloat8e5m2));
static_assert(kernel_name_at(scale_kernel_index(cclInt8)) == scale_kernel_name(cclInt8));
static_assert(kernel_name_at(copy_kernel_index()) == copy_kernel_name());

}  // namespace ccl::reduce::cuda
