// The host-compilable parts of the CUDA kernels, checked without a GPU: the kernel names and the
// launch geometry the host side uses, the fp8 conversions of the sm_80 kernels (soft_float8.h)
// against the CPU's, and the division by multiplication of the 8- and 32-bit divide kernels
// (int_divide.h) against `/`.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <string>

#include "algorithms/reduce/cuda/cuda_kernel_names.h"
#include "algorithms/reduce/cuda/cuda_launch.h"
#include "algorithms/reduce/cuda/int_divide.h"
#include "algorithms/reduce/cuda/soft_float8.h"
#include "algorithms/reduce/reduce.h"

namespace ccl::reduce::cuda {
namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

TEST(CudaKernelNames, SchemeAndLookups) {
  EXPECT_STREQ(reduce_kernel_name(cclInt8, cclSum), "ccl_reduce_i8_sum");
  EXPECT_STREQ(reduce_kernel_name(cclFloat16, cclMax), "ccl_reduce_f16_max");
  EXPECT_STREQ(reduce_kernel_name(cclBfloat16, cclProd), "ccl_reduce_bf16_prod");
  EXPECT_STREQ(reduce_kernel_name(cclFloat8e5m2, cclMin), "ccl_reduce_e5m2_min");
  EXPECT_STREQ(reduce_kernel_name(cclFloat32, cclAvg), "ccl_reduce_f32_sum");
  EXPECT_STREQ(divide_kernel_name(cclUint64), "ccl_divide_u64");
  EXPECT_STREQ(scale_kernel_name(cclFloat8e4m3), "ccl_scale_e4m3");
  EXPECT_STREQ(copy_kernel_name(), "ccl_copy");
  EXPECT_EQ(reduce_kernel_name(cclNumTypes, cclSum), nullptr);
  EXPECT_EQ(reduce_kernel_name(cclInt8, cclNumOps), nullptr);
  EXPECT_EQ(reduce_kernel_name(cclInt8, cclRedOp_t(cclNumOps + 3)), nullptr);  // a PreMulSum op
  EXPECT_EQ(divide_kernel_name(cclDataType_t(-1)), nullptr);
  EXPECT_EQ(scale_kernel_name(cclNumTypes), nullptr);
  // The type tags follow cclDataType_t, the ops cclRedOp_t.
  static const char* kTags[] = {"i8",  "u8",  "i32", "u32",  "i64",  "u64",
                                "f16", "f32", "f64", "bf16", "e4m3", "e5m2"};
  static const char* kOps[] = {"sum", "prod", "max", "min"};
  for (int t = 0; t < cclNumTypes; ++t) {
    for (int op = 0; op < kNumBaseOps; ++op) {
      EXPECT_EQ(reduce_kernel_name(cclDataType_t(t), cclRedOp_t(op)),
                std::string("ccl_reduce_") + kTags[t] + "_" + kOps[op]);
    }
  }
}

TEST(CudaKernelNames, AllDistinct) {
  std::set<std::string> names;
  for (int i = 0; i < kNumKernels; ++i) {
    ASSERT_NE(kernel_name_at(i), nullptr);
    names.insert(kernel_name_at(i));
  }
  EXPECT_EQ(names.size(), size_t(kNumKernels));
  EXPECT_EQ(kernel_name_at(kNumKernels), nullptr);
  EXPECT_STREQ(kernel_name_at(kNumKernels - 1), "ccl_copy");
}

TEST(CudaLaunch, GridBlocks) {
  static_assert(kBytesPerThread == 64 && kThreadsPerBlock == 512);
  EXPECT_EQ(elements_per_thread(1), 64u);
  EXPECT_EQ(elements_per_thread(2), 32u);
  EXPECT_EQ(elements_per_thread(8), 8u);
  EXPECT_EQ(grid_blocks(0, 4, 132), 1u);
  EXPECT_EQ(grid_blocks(1, 4, 132), 1u);
  EXPECT_EQ(grid_blocks(512 * 16, 4, 132), 1u);  // one iteration of one block
  EXPECT_EQ(grid_blocks(512 * 16 + 1, 4, 132), 2u);
  EXPECT_EQ(grid_blocks(1ull << 28, 1, 132), 264u);  // 256 MiB: capped at 2 a SM
  EXPECT_EQ(grid_blocks(~0ull, 8, 108), 216u);       // no overflow
  EXPECT_EQ(grid_blocks(1ull << 20, 4, 0), kBlocksPerSm);
}

// Every fp8 code decodes to the CPU's float, NaN bits included.
TEST(CudaSoftFloat8, DecodeEveryCode) {
  for (int v = 0; v < 256; ++v) {
    EXPECT_EQ(bits(soft::e4m3_to_float(uint8_t(v))), bits(fp8e4m3_to_float(uint8_t(v)))) << v;
    EXPECT_EQ(bits(soft::e5m2_to_float(uint8_t(v))), bits(fp8e5m2_to_float(uint8_t(v)))) << v;
  }
}

void expect_encodes_like_cpu(float f) {
  ASSERT_EQ(soft::float_to_e4m3(f), float_to_fp8e4m3(f)) << std::hexfloat << f;
  ASSERT_EQ(soft::float_to_e5m2(f), float_to_fp8e5m2(f)) << std::hexfloat << f;
}

// Around every representable value of either format (its neighbours, the midpoints to the next
// code and the floats next to those, so every tie and rounding boundary), and the specials.
TEST(CudaSoftFloat8, EncodeAroundEveryBoundary) {
  for (int v = 0; v < 256; ++v) {
    for (float (*decode)(uint8_t) : {fp8e4m3_to_float, fp8e5m2_to_float}) {
      const float lo = decode(uint8_t(v)), hi = decode(uint8_t(v + 1));
      if (std::isnan(lo)) continue;
      const float points[] = {lo,
                              std::nextafter(lo, -INFINITY),
                              std::nextafter(lo, INFINITY),
                              (lo + hi) / 2,
                              std::nextafter((lo + hi) / 2, -INFINITY),
                              std::nextafter((lo + hi) / 2, INFINITY)};
      for (float f : points) {
        if (std::isnan(f)) continue;
        expect_encodes_like_cpu(f);
        expect_encodes_like_cpu(-f);
      }
    }
  }
  for (float f : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 448.0f, 464.0f, 480.0f, 57344.0f,
                  61440.0f, 65536.0f, 1e30f, 1e-30f, 0x1p-126f, 0x1p-149f}) {
    expect_encodes_like_cpu(f);
    expect_encodes_like_cpu(-f);
  }
}

TEST(CudaSoftFloat8, EncodeRandomFloats) {
  std::mt19937 rng(7);
  for (int i = 0; i < 2000000; ++i) expect_encodes_like_cpu(from_bits(rng()));
}

TEST(CudaIntDivide, QuotientsAsDivision) {
  std::mt19937_64 rng(11);
  const uint64_t divisors[] = {1,           2,           3,          7,          10,
                               255,         256,         257,        65535,      65537,
                               0x7fffffff,  0x80000000,  0x80000001, 0xfffffffe, 0xffffffff,
                               0x100000000, 0x100000001, ~0ull >> 1, ~0ull};
  const uint32_t numerators[] = {0,   1,          2,          127,        128,
                                 255, 0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff};
  auto check = [](uint64_t d, uint32_t n) {
    const Divide32 div(d);
    ASSERT_EQ(div.quotient(n), uint32_t(uint64_t(n) / d)) << n << " / " << d;
  };
  for (uint64_t d : divisors) {
    for (uint32_t n : numerators) check(d, n);
    for (int i = 0; i < 2000; ++i) check(d, uint32_t(rng()));
  }
  for (int i = 0; i < 200000; ++i) {
    const uint64_t d = (rng() >> (rng() % 64)) | 1;  // spread over every magnitude
    check(d, uint32_t(rng()));
    check(d + 1, uint32_t(rng() >> (rng() % 32)));
  }
}

}  // namespace
}  // namespace ccl::reduce::cuda
