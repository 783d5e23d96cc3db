// The float16 / bfloat16 conversions (F16C where the CPU has it, and the integer code) against
// the compiler's own _Float16 (where it has one), values worked by hand, and bfloat16's rounding.
#include "training/ddp/half_cast.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace {

using namespace ccl::training;

std::vector<float> awkward_floats() {
  std::vector<float> v = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.0f,
                          65504.0f,
                          65520.0f,
                          1e-8f,
                          6.1e-5f,
                          5.9e-8f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          1.0f + 1.0f / 2048.0f,
                          1.0f + 3.0f / 4096.0f,
                          3.14159f};
  std::mt19937 gen(3);
  std::uniform_int_distribution<uint32_t> bits;
  while (v.size() < 1003) {  // not a multiple of 8: the scalar tail runs too
    const uint32_t b = bits(gen);
    float f;
    std::memcpy(&f, &b, sizeof f);
    if (!std::isnan(f)) v.push_back(f);
  }
  return v;
}

// g++ has _Float16 on x86; clang 14 does not (then only the hand-checked values below run).
#if defined(__FLT16_MAX__)
uint16_t reference_to_fp16(float f) {
  const auto h = static_cast<_Float16>(f);
  uint16_t bits;
  std::memcpy(&bits, &h, sizeof bits);
  return bits;
}

float reference_from_fp16(uint16_t bits) {
  _Float16 h;
  std::memcpy(&h, &bits, sizeof h);
  return static_cast<float>(h);
}

TEST(HalfCast, Fp16MatchesTheCompilersConversionBitForBit) {
  const auto in = awkward_floats();
  std::vector<uint16_t> out(in.size());
  half_cast::to_fp16(in.data(), out.data(), in.size());  // F16C where the CPU has it
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(out[i], reference_to_fp16(in[i])) << "float " << in[i];
    ASSERT_EQ(half_cast::fp16_from_float(in[i]), reference_to_fp16(in[i])) << "float " << in[i];
  }
  // Every half value back to float, both paths.
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> back(all.size());
  half_cast::from_fp16(all.data(), back.data(), all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    const float want = reference_from_fp16(all[i]);
    const float soft = half_cast::float_from_fp16(all[i]);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(back[i]) && std::isnan(soft)) << "half 0x" << std::hex << i;
    } else {
      ASSERT_EQ(back[i], want) << "half 0x" << std::hex << i;
      ASSERT_EQ(soft, want) << "half 0x" << std::hex << i;
    }
  }
}
#endif

TEST(HalfCast, Fp16ByHand) {
  EXPECT_EQ(half_cast::fp16_from_float(1.0f), 0x3c00);
  EXPECT_EQ(half_cast::fp16_from_float(-2.0f), 0xc000);
  EXPECT_EQ(half_cast::fp16_from_float(65504.0f), 0x7bff);               // the largest half
  EXPECT_EQ(half_cast::fp16_from_float(65520.0f), 0x7c00);               // a tie: to infinity
  EXPECT_EQ(half_cast::fp16_from_float(1.0f + 1.0f / 2048.0f), 0x3c00);  // a tie: to even
  EXPECT_EQ(half_cast::fp16_from_float(1.0f + 3.0f / 2048.0f), 0x3c02);  // a tie: to even
  EXPECT_EQ(half_cast::fp16_from_float(5.9604645e-8f), 0x0001);          // the smallest subnormal
  EXPECT_EQ(half_cast::fp16_from_float(2.9802322e-8f), 0x0000);          // half of it: a tie to 0
  EXPECT_EQ(half_cast::float_from_fp16(0x0001), 5.9604645e-8f);
  EXPECT_EQ(half_cast::float_from_fp16(0x3555), 0.333251953125f);
  EXPECT_TRUE(std::isinf(half_cast::float_from_fp16(0xfc00)));
  EXPECT_TRUE(std::isnan(half_cast::float_from_fp16(0x7e00)));
}

TEST(HalfCast, Bf16RoundsToNearestEvenAndKeepsNaN) {
  const std::vector<float> in = {1.0f, 1.0f + 1.0f / 256.0f,  // a tie: stays 1 (even)
                                 1.0f + 3.0f / 256.0f,        // a tie: rounds up to even
                                 std::numeric_limits<float>::quiet_NaN(), -2.5f};
  std::vector<uint16_t> out(in.size());
  half_cast::to_bf16(in.data(), out.data(), in.size());
  EXPECT_EQ(out[0], 0x3f80);
  EXPECT_EQ(out[1], 0x3f80);
  EXPECT_EQ(out[2], 0x3f82);
  std::vector<float> back(in.size());
  half_cast::from_bf16(out.data(), back.data(), out.size());
  EXPECT_TRUE(std::isnan(back[3]));
  EXPECT_EQ(back[4], -2.5f);
}

}  // namespace
