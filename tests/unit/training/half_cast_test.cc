// The reducer's float16 / bfloat16 conversions (F16C where the CPU has it) against the compiler's
// own _Float16 and a bfloat16 reference, bit for bit.
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

TEST(HalfCast, Fp16MatchesTheCompilersConversionBitForBit) {
  const auto in = awkward_floats();
  std::vector<uint16_t> out(in.size());
  half_cast::to_fp16(in.data(), out.data(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const auto h = static_cast<_Float16>(in[i]);
    uint16_t want;
    std::memcpy(&want, &h, sizeof want);
    ASSERT_EQ(out[i], want) << "float " << in[i];
  }
  // Every half value back to float.
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> back(all.size());
  half_cast::from_fp16(all.data(), back.data(), all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    _Float16 h;
    std::memcpy(&h, &all[i], sizeof h);
    const float want = static_cast<float>(h);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(back[i])) << "half 0x" << std::hex << i;
    } else {
      ASSERT_EQ(back[i], want) << "half 0x" << std::hex << i;
    }
  }
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
