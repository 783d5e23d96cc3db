// Names, sizes, ISA choice, argument checks, and the divide kernels (avg's last step) of every
// ISA against the reference.
#include <cpuid.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "algorithms/reduce/kernel_table.h"
#include "algorithms/reduce/reduce.h"
#include "base/error.h"
#include "reference.h"
#include "test_data.h"

namespace ccl::reduce {
namespace {

// CPUID leaf 1, ECX bit 29: clang before 16 knows no "f16c" for __builtin_cpu_supports.
bool has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}

TEST(ReduceDispatch, NamesAndSizes) {
  const char* names[] = {"int8", "uint8", "int32",  "uint32",   "int64",  "uint64",
                         "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
  const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  for (int t = 0; t < cclNumTypes; ++t) {
    EXPECT_STREQ(datatype_name(cclDataType_t(t)), names[t]);
    EXPECT_EQ(datatype_size(cclDataType_t(t)), sizes[t]);
  }
  EXPECT_EQ(datatype_size(cclNumTypes), 0u);
  EXPECT_EQ(datatype_size(cclDataType_t(-1)), 0u);
  EXPECT_STREQ(op_name(cclSum), "sum");
  EXPECT_STREQ(op_name(cclProd), "prod");
  EXPECT_STREQ(op_name(cclMax), "max");
  EXPECT_STREQ(op_name(cclMin), "min");
  EXPECT_STREQ(op_name(cclAvg), "avg");
  EXPECT_STREQ(isa_name(Isa::Scalar), "scalar");
  EXPECT_STREQ(isa_name(Isa::Avx2), "avx2");
  EXPECT_STREQ(isa_name(Isa::Avx512), "avx512");
}

TEST(ReduceDispatch, BestIsaFollowsTheCpu) {
  const bool avx2 = __builtin_cpu_supports("avx2") && has_f16c() && __builtin_cpu_supports("fma");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512dq");
  EXPECT_EQ(best_isa(), avx512 ? Isa::Avx512 : avx2 ? Isa::Avx2 : Isa::Scalar);
  EXPECT_EQ(reduce_kernel_for(Isa::Avx2, cclFloat32, cclSum) != nullptr, avx2);
  EXPECT_EQ(reduce_kernel_for(Isa::Avx512, cclFloat32, cclSum) != nullptr, avx512);
  for (int t = 0; t < cclNumTypes; ++t) {
    const auto type = cclDataType_t(t);
    EXPECT_EQ(reduce_kernel(type, cclAvg), reduce_kernel(type, cclSum));  // avg reduces as sum
    for (int op = 0; op < cclNumOps; ++op) {
      EXPECT_EQ(reduce_kernel(type, cclRedOp_t(op)),
                reduce_kernel_for(best_isa(), type, cclRedOp_t(op)));
      EXPECT_NE(reduce_kernel_for(Isa::Scalar, type, cclRedOp_t(op)), nullptr);
    }
    EXPECT_NE(divide_kernel(type), nullptr);
  }
}

TEST(ReduceDispatch, InvalidArgumentsThrow) {
  auto expect_invalid = [](auto&& fn) {
    try {
      fn();
      ADD_FAILURE() << "no exception";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), cclInvalidArgument) << e.what();
    }
  };
  expect_invalid([] { reduce_kernel(cclNumTypes, cclSum); });
  expect_invalid([] { reduce_kernel(cclFloat32, cclNumOps); });
  expect_invalid([] { reduce_kernel(cclFloat32, cclRedOp_t(-1)); });
  expect_invalid([] { reduce_kernel_for(Isa::Scalar, cclDataType_t(-1), cclSum); });
  expect_invalid([] { divide_kernel(cclNumTypes); });
  for (int t = 0; t < cclNumTypes; ++t) {
    uint64_t x = 0;
    expect_invalid([&] { divide_kernel(cclDataType_t(t))(&x, 1, 0); });
  }
}

// Each ISA's divide kernel (integer types have only the scalar one).
std::vector<std::pair<Isa, DivideFn>> divide_kernels(cclDataType_t t) {
  std::vector<std::pair<Isa, DivideFn>> fns = {{Isa::Scalar, kScalarKernels.divide[t]}};
  if (best_isa() >= Isa::Avx2 && kAvx2Kernels.divide[t]) {
    fns.push_back({Isa::Avx2, kAvx2Kernels.divide[t]});
  }
  if (best_isa() >= Isa::Avx512 && kAvx512Kernels.divide[t]) {
    fns.push_back({Isa::Avx512, kAvx512Kernels.divide[t]});
  }
  return fns;
}

TEST(ReduceDivide, EveryIsaMatchesReference) {
  const uint64_t divisors[] = {
      1,           2, 3, 7, 10, 255, 256, 1000, 65537, (uint64_t(1) << 40) + 1, uint64_t(1) << 63,
      ~uint64_t(0)};
  const size_t counts[] = {0, 1, 17, 65, 4099};
  uint64_t seed = 7;
  for (int ti = 0; ti < cclNumTypes; ++ti) {
    const auto t = cclDataType_t(ti);
    const size_t size = datatype_size(t);
    for (auto [isa, fn] : divide_kernels(t)) {
      for (uint64_t divisor : divisors) {
        for (size_t count : counts) {
          testdata::ValueGen gen(t, seed++);
          const size_t off = seed % 8;
          std::vector<unsigned char> buf(count * size + 16, 0xee);
          std::vector<uint64_t> in(count);
          for (size_t i = 0; i < count; ++i) {
            in[i] = gen.next();
            testdata::store_elem(buf.data() + off + i * size, size, in[i]);
          }
          fn(buf.data() + off, count, divisor);
          for (size_t i = 0; i < count; ++i) {
            const ref::Expected want = ref::divide(t, in[i], divisor);
            const uint64_t got = testdata::load_elem(buf.data() + off + i * size, size);
            if (want.nan) {
              ASSERT_TRUE(std::isnan(ref::to_double(got, t)));
            } else {
              ASSERT_EQ(got, want.bits)
                  << isa_name(isa) << " " << datatype_name(t) << " 0x" << std::hex << in[i] << " / "
                  << std::dec << divisor << " count " << count << " element " << i;
            }
          }
          for (size_t k = 0; k < buf.size(); ++k) {
            if (k < off || k >= off + count * size) {
              ASSERT_EQ(buf[k], 0xee) << "byte " << k;
            }
          }
        }
      }
    }
  }
}

// Truncation toward zero, as C++ `/` (and NCCL) does for negative integers.
TEST(ReduceDivide, NegativeIntegersTruncateTowardZero) {
  int32_t v[] = {-7, 7, -1, -8, INT32_MIN, INT32_MAX};
  divide_kernel(cclInt32)(v, 6, 2);
  EXPECT_EQ(v[0], -3);
  EXPECT_EQ(v[1], 3);
  EXPECT_EQ(v[2], 0);
  EXPECT_EQ(v[3], -4);
  EXPECT_EQ(v[4], INT32_MIN / 2);
  EXPECT_EQ(v[5], INT32_MAX / 2);
  int8_t w[] = {-128, 127, -3};
  divide_kernel(cclInt8)(w, 3, 3);
  EXPECT_EQ(w[0], -42);
  EXPECT_EQ(w[1], 42);
  EXPECT_EQ(w[2], -1);
  int64_t x[] = {INT64_MIN, -5};
  divide_kernel(cclInt64)(x, 2, uint64_t(1) << 63);
  EXPECT_EQ(x[0], -1);
  EXPECT_EQ(x[1], 0);
}

}  // namespace
}  // namespace ccl::reduce
