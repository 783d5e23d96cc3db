#include "float_format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

namespace ccl::perf {
namespace {

void expect_roundtrip(const FloatFormat& f, int bits) {
  for (uint32_t b = 0; b < (1u << bits); ++b) {
    if (is_nan_bits(b, f)) {
      EXPECT_TRUE(std::isnan(decode_float(b, f))) << b;
      EXPECT_TRUE(is_nan_bits(encode_float(decode_float(b, f), f), f)) << b;
      continue;
    }
    EXPECT_EQ(encode_float(decode_float(b, f), f), b) << "pattern " << b;
  }
}

TEST(FloatFormat, EveryPatternRoundTrips) {
  expect_roundtrip(kHalf, 16);
  expect_roundtrip(kBfloat16, 16);
  expect_roundtrip(kFp8E4M3, 8);
  expect_roundtrip(kFp8E5M2, 8);
}

TEST(FloatFormat, HalfKnownValues) {
  EXPECT_EQ(encode_float(1.0, kHalf), 0x3c00u);
  EXPECT_EQ(encode_float(-2.0, kHalf), 0xc000u);
  EXPECT_EQ(encode_float(65504.0, kHalf), 0x7bffu);
  EXPECT_EQ(encode_float(65519.0, kHalf), 0x7bffu);  // below the midpoint
  EXPECT_EQ(encode_float(65520.0, kHalf), 0x7c00u);  // midpoint, max is odd: rounds to inf
  EXPECT_EQ(encode_float(std::ldexp(1.0, -24), kHalf), 0x0001u);  // smallest subnormal
  EXPECT_EQ(encode_float(std::ldexp(1.0, -25), kHalf), 0x0000u);  // tie to even: zero
  EXPECT_EQ(encode_float(std::ldexp(3.0, -26), kHalf), 0x0001u);
  EXPECT_EQ(encode_float(std::ldexp(1.0, -14), kHalf), 0x0400u);        // smallest normal
  EXPECT_EQ(encode_float(1.0 + std::ldexp(1.0, -11), kHalf), 0x3c00u);  // tie: even
  EXPECT_EQ(encode_float(1.0 + std::ldexp(3.0, -11), kHalf), 0x3c02u);  // tie: even (up)
  EXPECT_EQ(encode_float(2047.0, kHalf), 0x67ffu);
  EXPECT_EQ(encode_float(2049.0, kHalf), 0x6800u);  // 2049 is a tie between 2048 and 2050
  EXPECT_EQ(encode_float(-0.0, kHalf), 0x8000u);
  EXPECT_EQ(encode_float(INFINITY, kHalf), 0x7c00u);
}

TEST(FloatFormat, Fp8KnownValues) {
  EXPECT_EQ(encode_float(1.0, kFp8E4M3), 0x38u);
  EXPECT_EQ(encode_float(448.0, kFp8E4M3), 0x7eu);
  EXPECT_EQ(encode_float(480.0, kFp8E4M3), 0x7eu);  // saturates (no inf in E4M3)
  EXPECT_EQ(encode_float(1e6, kFp8E4M3), 0x7eu);
  EXPECT_EQ(encode_float(-1e6, kFp8E4M3), 0xfeu);
  EXPECT_EQ(encode_float(std::ldexp(1.0, -9), kFp8E4M3), 0x01u);
  EXPECT_EQ(encode_float(17.0, kFp8E4M3), 0x58u);  // 17 ties to 16 (even)
  EXPECT_EQ(encode_float(19.0, kFp8E4M3), 0x5au);  // 19 ties to 20 (even)
  EXPECT_TRUE(is_nan_bits(0x7f, kFp8E4M3));
  EXPECT_TRUE(is_nan_bits(0xff, kFp8E4M3));
  EXPECT_FALSE(is_nan_bits(0x7e, kFp8E4M3));
  EXPECT_EQ(encode_float(1.0, kFp8E5M2), 0x3cu);
  EXPECT_EQ(encode_float(57344.0, kFp8E5M2), 0x7bu);
  EXPECT_EQ(encode_float(61440.0, kFp8E5M2), 0x7cu);  // tie above max: inf
  EXPECT_EQ(encode_float(9.0, kFp8E5M2), 0x48u);      // 9 ties to 8
  EXPECT_EQ(decode_float(0x7c, kFp8E5M2), INFINITY);
  EXPECT_EQ(decode_float(0x38, kFp8E4M3), 1.0);
  EXPECT_EQ(decode_float(0x7e, kFp8E4M3), 448.0);
}

// bfloat16 is float's top half: round-to-nearest-even of the low 16 bits, an independent
// reference for finite values.
uint16_t bf16_reference(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

TEST(FloatFormat, Bfloat16MatchesBitReference) {
  std::mt19937 gen(1234);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = bits(gen);
    float f;
    std::memcpy(&f, &u, 4);
    if (!std::isfinite(f) || std::fabs(f) > 3.0e38f) continue;
    ASSERT_EQ(encode_float(f, kBfloat16), bf16_reference(f)) << "float bits " << u;
  }
}

#if defined(__FLT16_MAX__)
TEST(FloatFormat, HalfMatchesCompiler) {
  std::mt19937 gen(99);
  std::uniform_real_distribution<double> mant(-1.0, 1.0);
  std::uniform_int_distribution<int> exp(-30, 17);
  for (int i = 0; i < 200000; ++i) {
    const double v = std::ldexp(mant(gen), exp(gen));
    const _Float16 h = static_cast<_Float16>(v);
    uint16_t ref;
    std::memcpy(&ref, &h, 2);
    ASSERT_EQ(encode_float(v, kHalf), ref) << v;
  }
}
#endif

}  // namespace
}  // namespace ccl::perf
