// The conversions reduce.h exposes; the work is in convert_inl.h, shared with the scalar kernels.
#include "algorithms/reduce/convert_inl.h"
#include "algorithms/reduce/reduce.h"

namespace ccl::reduce {

float half_to_float(uint16_t h) { return detail::half_to_float_inl(h); }
uint16_t float_to_half(float f) { return detail::float_to_half_inl(f); }
float bf16_to_float(uint16_t h) { return detail::bf16_to_float_inl(h); }
uint16_t float_to_bf16(float f) { return detail::float_to_bf16_inl(f); }
float fp8e4m3_to_float(uint8_t v) { return detail::fp8e4m3_to_float_inl(v); }
uint8_t float_to_fp8e4m3(float f) { return detail::float_to_fp8e4m3_inl(f); }
float fp8e5m2_to_float(uint8_t v) { return detail::fp8e5m2_to_float_inl(v); }
uint8_t float_to_fp8e5m2(float f) { return detail::float_to_fp8e5m2_inl(f); }

}  // namespace ccl::reduce
