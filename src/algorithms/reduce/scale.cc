// PreMulSum's first step (cclRedOpCreatePreMulSum): dst[i] = src[i] * scalar, in the datatype's
// compute type. 16- and 8-bit floats are multiplied in float and rounded back once (the product
// of two such values is exact in float, so the result is the correctly rounded product);
// integers wrap like the sum kernels. Runs once per operation over the rank's own input, so a
// scalar loop (which the compiler vectorizes where it can) is enough.
#include <cstring>

#include "algorithms/reduce/convert_inl.h"
#include "algorithms/reduce/reduce.h"

namespace ccl::reduce {
namespace {

using namespace detail;

template <class S, class Compute, Compute (*Decode)(S), S (*Encode)(Compute)>
void scale(void* dst, const void* src, size_t count, const void* scalar) {
  S factor_bits;
  std::memcpy(&factor_bits, scalar, sizeof(S));
  const Compute factor = Decode(factor_bits);
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  for (size_t i = 0; i < count; ++i) {
    S x;
    std::memcpy(&x, s + i * sizeof(S), sizeof(S));
    const S r = Encode(Decode(x) * factor);
    std::memcpy(d + i * sizeof(S), &r, sizeof(S));
  }
}

template <class T>
T same(T v) {
  return v;
}

// Integers multiply in uint64_t and truncate, so overflow wraps instead of being undefined.
template <class T>
uint64_t widen(T v) {
  return static_cast<uint64_t>(v);
}
template <class T>
T narrow(uint64_t v) {
  return static_cast<T>(v);
}

template <class T>
void scale_int(void* dst, const void* src, size_t count, const void* scalar) {
  scale<T, uint64_t, widen<T>, narrow<T>>(dst, src, count, scalar);
}

template <class T>
void scale_float(void* dst, const void* src, size_t count, const void* scalar) {
  scale<T, T, same<T>, same<T>>(dst, src, count, scalar);
}

}  // namespace

ScaleFn scale_kernel(cclDataType_t type) {
  switch (type) {
    case cclInt8:
      return scale_int<int8_t>;
    case cclUint8:
      return scale_int<uint8_t>;
    case cclInt32:
      return scale_int<int32_t>;
    case cclUint32:
      return scale_int<uint32_t>;
    case cclInt64:
      return scale_int<int64_t>;
    case cclUint64:
      return scale_int<uint64_t>;
    case cclFloat16:
      return scale<uint16_t, float, half_to_float_inl, float_to_half_inl>;
    case cclFloat32:
      return scale_float<float>;
    case cclFloat64:
      return scale_float<double>;
    case cclBfloat16:
      return scale<uint16_t, float, bf16_to_float_inl, float_to_bf16_inl>;
    case cclFloat8e4m3:
      return scale<uint8_t, float, fp8e4m3_to_float_inl, float_to_fp8e4m3_inl>;
    case cclFloat8e5m2:
      return scale<uint8_t, float, fp8e5m2_to_float_inl, float_to_fp8e5m2_inl>;
    default:
      return nullptr;
  }
}

}  // namespace ccl::reduce
