// float32 <-> float16 / bfloat16 for the reducer's Fp16 and Bf16 hooks. float16 uses the CPU's
// F16C conversions where it has them (one instruction per 8 values): g++'s _Float16 casts are
// calls into a software routine without -mf16c, and made the fp16 hook 3x slower than sending
// float32 (perf/training). bfloat16 rounds to nearest even in plain integer code.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ccl::training::half_cast {

void to_fp16(const float* in, uint16_t* out, size_t n);
void from_fp16(const uint16_t* in, float* out, size_t n);
void to_bf16(const float* in, uint16_t* out, size_t n);
void from_bf16(const uint16_t* in, float* out, size_t n);

}  // namespace ccl::training::half_cast
