// float32 <-> float16 / bfloat16 for the reducer's Fp16 and Bf16 hooks and TopK's fp16 values.
// float16 uses the CPU's F16C conversions where it has them (one instruction per 8 values): g++'s
// _Float16 casts are calls into a software routine without -mf16c, and made the fp16 hook 3x
// slower than sending float32 (perf/training). Elsewhere, and for the tails, plain integer code
// rounds to nearest even (no _Float16: clang 14, which builds the fuzz targets, lacks it on x86).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ccl::training::half_cast {

/// One value, in integer code: round to nearest even, overflow to infinity, subnormals, NaN kept
/// quiet (as F16C's vcvtps2ph / vcvtph2ps do).
uint16_t fp16_from_float(float f);
float float_from_fp16(uint16_t h);

void to_fp16(const float* in, uint16_t* out, size_t n);
void from_fp16(const uint16_t* in, float* out, size_t n);
void to_bf16(const float* in, uint16_t* out, size_t n);
void from_bf16(const uint16_t* in, float* out, size_t n);

}  // namespace ccl::training::half_cast
