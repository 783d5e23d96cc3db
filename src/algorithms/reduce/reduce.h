// Reduction kernels for host memory: dst[i] = a[i] op b[i], for every datatype and base op.
// 16-bit and 8-bit floats are computed in float and rounded back to nearest-even. Each kernel has
// a scalar version and, where the CPU has them, AVX2 and AVX-512 versions picked at run time.
// Later, device memory kinds get their own table (CUDA kernels), chosen by the executor.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ccl/ccl.h"

namespace ccl::reduce {

// dst, a and b may alias each other exactly (dst == a or dst == b); no other overlap.
// No alignment is required.
using ReduceFn = void (*)(void* dst, const void* a, const void* b, size_t count);
// data[i] = data[i] / divisor (avg's last step). Integers: truncating division, as NCCL.
using DivideFn = void (*)(void* data, size_t count, uint64_t divisor);

// dst[i] = src[i] * *scalar, the scalar stored as one element of the same datatype (PreMulSum).
// dst may equal src.
using ScaleFn = void (*)(void* dst, const void* src, size_t count, const void* scalar);

enum class Isa { Scalar, Avx2, Avx512 };

size_t datatype_size(cclDataType_t type);       // 0 for an invalid type
const char* datatype_name(cclDataType_t type);  // "float", "half", ... as nccl-tests prints
const char* op_name(cclRedOp_t op);             // "sum", "prod", "max", "min", "avg"

// The best kernel this CPU runs (op must be one of the 5 base ops; avg reduces as sum).
ReduceFn reduce_kernel(cclDataType_t type, cclRedOp_t op);
DivideFn divide_kernel(cclDataType_t type);
ScaleFn scale_kernel(cclDataType_t type);  // nullptr for an invalid type
// A specific ISA's kernel, nullptr if this CPU lacks it (for tests and benchmarks).
ReduceFn reduce_kernel_for(Isa isa, cclDataType_t type, cclRedOp_t op);
Isa best_isa();
const char* isa_name(Isa isa);

// Conversions, exposed for tests, tools and the perf checkers.
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);  // round to nearest even; overflow to inf
float bf16_to_float(uint16_t h);
uint16_t float_to_bf16(float f);    // round to nearest even
float fp8e4m3_to_float(uint8_t v);  // OCP E4M3: no inf, 0x7f/0xff are NaN, max 448
uint8_t float_to_fp8e4m3(float f);  // nearest even; out of range saturates to +-448; NaN -> NaN
float fp8e5m2_to_float(uint8_t v);  // OCP E5M2: IEEE-like, has inf
uint8_t float_to_fp8e5m2(float f);  // nearest even; overflow to inf

}  // namespace ccl::reduce
