// The conversions of reduce.h: every 16- and 8-bit pattern decoded and round-tripped, floats
// rounded (ties, the values around them, overflow, saturation, NaN) against reference.h, and the
// fp16 ones bit-identical to the F16C instructions the SIMD kernels use.
#include <cpuid.h>
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "algorithms/reduce/reduce.h"
#include "reference.h"

namespace ccl::reduce {
namespace {

// CPUID leaf 1, ECX bit 29: clang before 16 knows no "f16c" for __builtin_cpu_supports.
bool has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct Conv {
  const char* name;
  ref::Format format;
  int codes;
  float (*to_float)(uint32_t);
  uint32_t (*from_float)(float);
};

const Conv kConvs[] = {
    {"fp16", ref::kHalf, 65536, [](uint32_t c) { return half_to_float(uint16_t(c)); },
     [](float f) -> uint32_t { return float_to_half(f); }},
    {"bf16", ref::kBf16, 65536, [](uint32_t c) { return bf16_to_float(uint16_t(c)); },
     [](float f) -> uint32_t { return float_to_bf16(f); }},
    {"e4m3", ref::kE4m3, 256, [](uint32_t c) { return fp8e4m3_to_float(uint8_t(c)); },
     [](float f) -> uint32_t { return float_to_fp8e4m3(f); }},
    {"e5m2", ref::kE5m2, 256, [](uint32_t c) { return fp8e5m2_to_float(uint8_t(c)); },
     [](float f) -> uint32_t { return float_to_fp8e5m2(f); }},
};

// Checks one float's conversion against the reference; returns false (once reported) on error.
bool check_from_float(const Conv& c, float f) {
  const uint32_t got = c.from_float(f);
  if (std::isnan(f)) {
    EXPECT_TRUE(ref::is_nan_code(got, c.format)) << c.name << " of NaN 0x" << std::hex << bits(f);
    return ref::is_nan_code(got, c.format);
  }
  const uint32_t want = ref::encode(f, c.format);
  EXPECT_EQ(got, want) << c.name << " of " << f << " (0x" << std::hex << bits(f) << ")";
  return got == want;
}

TEST(ReduceConversion, EveryCodeDecodesAndRoundTrips) {
  for (const Conv& c : kConvs) {
    for (int code = 0; code < c.codes; ++code) {
      const float f = c.to_float(uint32_t(code));
      const double want = ref::decode(uint32_t(code), c.format);
      if (ref::is_nan_code(uint32_t(code), c.format)) {
        ASSERT_TRUE(std::isnan(f)) << c.name << " 0x" << std::hex << code;
        ASSERT_TRUE(ref::is_nan_code(c.from_float(f), c.format)) << c.name << " 0x" << code;
        continue;
      }
      ASSERT_EQ(bits(f), bits(float(want))) << c.name << " 0x" << std::hex << code;  // -0 too
      ASSERT_EQ(c.from_float(f), uint32_t(code)) << c.name << " 0x" << std::hex << code;
    }
  }
}

// Between every two neighbouring finite codes: the midpoint (a tie, exact in float), and the
// floats just below and above it. Past the largest finite value: overflow or saturation.
TEST(ReduceConversion, TiesAndNeighboursRoundToNearestEven) {
  for (const Conv& c : kConvs) {
    const uint32_t sign_bit = 1u << (c.format.ebits + c.format.mbits);
    for (uint32_t code = 0; code < sign_bit; ++code) {
      const double lo = ref::decode(code, c.format);
      if (std::isnan(lo) || std::isinf(lo)) continue;
      double hi = ref::decode(code + 1, c.format);
      if (code + 1 == sign_bit || std::isinf(hi) || std::isnan(hi)) {
        hi = lo + (lo - ref::decode(code - 1, c.format));  // the next step past the largest
      }
      const float mid = float((lo + hi) / 2);
      ASSERT_EQ(double(mid), (lo + hi) / 2) << c.name;
      for (float f : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY), -mid,
                      -std::nextafter(mid, 0.0f), -std::nextafter(mid, INFINITY)}) {
        ASSERT_TRUE(check_from_float(c, f)) << "between codes 0x" << std::hex << code;
      }
    }
    for (float f : {INFINITY, -INFINITY, 1e30f, -1e30f, 3.4e38f, NAN, -NAN, 0.0f, -0.0f, 1e-40f,
                    -1e-40f, from_bits(0x7f800001), from_bits(0xffc00001)}) {
      ASSERT_TRUE(check_from_float(c, f));
    }
  }
}

// A sweep over the whole float range (every 2039th bit pattern; a prime, so every low-bit
// pattern occurs).
TEST(ReduceConversion, FloatSweepMatchesReference) {
  for (const Conv& c : kConvs) {
    for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 2039) {
      ASSERT_TRUE(check_from_float(c, from_bits(uint32_t(u)))) << c.name;
    }
  }
}

TEST(ReduceConversion, Fp8SaturationAndInfinity) {
  EXPECT_EQ(float_to_fp8e4m3(INFINITY), 0x7e);
  EXPECT_EQ(float_to_fp8e4m3(-INFINITY), 0xfe);
  EXPECT_EQ(float_to_fp8e4m3(464.0f), 0x7e);  // tie between 448 and (NaN) 480: saturates
  EXPECT_EQ(float_to_fp8e4m3(1e9f), 0x7e);
  EXPECT_EQ(fp8e4m3_to_float(0x7e), 448.0f);
  EXPECT_TRUE(std::isnan(fp8e4m3_to_float(0x7f)));
  EXPECT_TRUE(std::isnan(fp8e4m3_to_float(0xff)));
  EXPECT_EQ(fp8e4m3_to_float(0x01), 0x1p-9f);
  EXPECT_EQ(float_to_fp8e5m2(57344.0f), 0x7b);
  EXPECT_EQ(float_to_fp8e5m2(61440.0f), 0x7c);  // tie between max and 2^16: to inf
  EXPECT_EQ(float_to_fp8e5m2(61439.0f), 0x7b);
  EXPECT_EQ(fp8e5m2_to_float(0x7c), INFINITY);
  EXPECT_TRUE(std::isnan(fp8e5m2_to_float(0x7d)));
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);
  EXPECT_EQ(float_to_half(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_bf16(from_bits(0x7f7fffff)), 0x7f80);
}

// The scalar fp16 conversions are bit-identical to F16C, NaN payloads included, since the SIMD
// kernels use the instructions and the scalar kernels these functions.
__attribute__((target("f16c"))) void expect_f16c_identical() {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float hw = _cvtsh_ss(uint16_t(h));
    ASSERT_EQ(bits(half_to_float(uint16_t(h))), bits(hw)) << std::hex << h;
  }
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 1021) {
    const float f = from_bits(uint32_t(u));
    const uint16_t hw = _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    ASSERT_EQ(float_to_half(f), hw) << std::hex << u;
  }
}

TEST(ReduceConversion, HalfMatchesF16c) {
  if (!has_f16c()) GTEST_SKIP() << "no F16C on this CPU";
  expect_f16c_identical();
}

}  // namespace
}  // namespace ccl::reduce
