// Every reduce kernel of every ISA this CPU runs, against the independent reference in
// reference.h: odd counts, misaligned pointers, dst aliasing a or b, special values, wrap-around.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "algorithms/reduce/reduce.h"
#include "reference.h"
#include "test_data.h"

namespace ccl::reduce {

// Readable test names and failure messages for the Isa parameter.
void PrintTo(Isa isa, std::ostream* os) { *os << isa_name(isa); }

namespace {

using testdata::load_elem;
using testdata::store_elem;
using testdata::ValueGen;

const Isa kIsas[] = {Isa::Scalar, Isa::Avx2, Isa::Avx512};
const cclRedOp_t kOps[] = {cclSum, cclProd, cclMax, cclMin, cclAvg};
const size_t kCounts[] = {0, 1, 7, 15, 16, 17, 63, 64, 65, 1000, 4099};

enum class Alias { None, DstIsA, DstIsB };

std::string describe(Isa isa, cclDataType_t t, cclRedOp_t op) {
  return std::string(isa_name(isa)) + " " + datatype_name(t) + " " + op_name(op);
}

// Runs fn on the given inputs, placed at the given byte offsets, and checks every element and
// that nothing outside dst changed.
::testing::AssertionResult check_run(ReduceFn fn, cclDataType_t t, cclRedOp_t op,
                                     const std::vector<uint64_t>& va,
                                     const std::vector<uint64_t>& vb, size_t off_a, size_t off_b,
                                     size_t off_d, Alias alias) {
  const size_t size = ref::size_of(t);
  const size_t count = va.size();
  const size_t guard = 64;
  const size_t bytes = count * size + 2 * guard + 8;
  std::vector<unsigned char> A(bytes, 0xa5), B(bytes, 0x5a), D(bytes, 0xc3);
  unsigned char* a = A.data() + guard + off_a;
  unsigned char* b = B.data() + guard + off_b;
  unsigned char* d = D.data() + guard + off_d;
  for (size_t i = 0; i < count; ++i) {
    store_elem(a + i * size, size, va[i]);
    store_elem(b + i * size, size, vb[i]);
  }
  if (alias == Alias::DstIsA) d = a;
  if (alias == Alias::DstIsB) d = b;
  const std::vector<unsigned char> A0 = A, B0 = B, D0 = D;

  fn(d, a, b, count);

  for (size_t i = 0; i < count; ++i) {
    const ref::Expected want = ref::reduce(t, op, va[i], vb[i]);
    const uint64_t got = load_elem(d + i * size, size);
    const bool ok = want.nan ? std::isnan(ref::to_double(got, t)) : got == want.bits;
    if (!ok) {
      return ::testing::AssertionFailure()
             << "count " << count << " element " << i << ": a=0x" << std::hex << va[i] << " b=0x"
             << vb[i] << " got 0x" << got << " want "
             << (want.nan ? std::string("NaN") : "0x" + ::testing::PrintToString(want.bits));
    }
  }
  // Everything but dst's bytes is as before.
  for (auto [buf, orig] : {std::pair{&A, &A0}, std::pair{&B, &B0}, std::pair{&D, &D0}}) {
    for (size_t k = 0; k < bytes; ++k) {
      const unsigned char* p = buf->data() + k;
      if (p >= d && p < d + count * size) continue;
      if ((*buf)[k] != (*orig)[k]) {
        return ::testing::AssertionFailure()
               << "count " << count << ": byte " << k << " outside dst was written";
      }
    }
  }
  return ::testing::AssertionSuccess();
}

class ReduceKernelTest : public ::testing::TestWithParam<std::tuple<Isa, cclDataType_t>> {
 protected:
  void SetUp() override {
    isa_ = std::get<0>(GetParam());
    type_ = std::get<1>(GetParam());
    if (reduce_kernel_for(isa_, type_, cclSum) == nullptr) {
      GTEST_SKIP() << isa_name(isa_) << " is not available on this CPU";
    }
  }
  Isa isa_;
  cclDataType_t type_;
};

TEST_P(ReduceKernelTest, CountsOffsetsAndAliasing) {
  uint64_t seed = 1;
  for (cclRedOp_t op : kOps) {
    const ReduceFn fn = reduce_kernel_for(isa_, type_, op);
    ASSERT_NE(fn, nullptr);
    for (size_t count : kCounts) {
      for (size_t off = 0; off < 8; ++off) {
        for (Alias alias : {Alias::None, Alias::DstIsA, Alias::DstIsB}) {
          ValueGen gen(type_, seed++);
          std::vector<uint64_t> va(count), vb(count);
          for (size_t i = 0; i < count; ++i) {
            va[i] = gen.next();
            vb[i] = gen.next();
          }
          ASSERT_TRUE(check_run(fn, type_, op, va, vb, off, (off + 3) % 8, (off + 5) % 8, alias))
              << describe(isa_, type_, op) << " offset " << off << " alias " << int(alias);
        }
      }
    }
  }
}

// Many random pairs in one long call: rounding of sums and products (ties included).
TEST_P(ReduceKernelTest, LongRandomRun) {
  for (cclRedOp_t op : kOps) {
    ValueGen gen(type_, 1000 + op);
    std::vector<uint64_t> va(100003), vb(100003);
    for (size_t i = 0; i < va.size(); ++i) {
      va[i] = gen.next();
      vb[i] = gen.next();
    }
    ASSERT_TRUE(
        check_run(reduce_kernel_for(isa_, type_, op), type_, op, va, vb, 1, 2, 3, Alias::None))
        << describe(isa_, type_, op);
  }
}

// Each operand in every position: a one-element special among ordinary values.
TEST_P(ReduceKernelTest, SpecialValuesEverywhere) {
  const std::vector<uint64_t> sp = testdata::special_values(type_);
  std::vector<uint64_t> va, vb;
  for (uint64_t x : sp) {
    for (uint64_t y : sp) {
      va.push_back(x);
      vb.push_back(y);
    }
  }
  for (cclRedOp_t op : kOps) {
    ASSERT_TRUE(
        check_run(reduce_kernel_for(isa_, type_, op), type_, op, va, vb, 0, 0, 0, Alias::None))
        << describe(isa_, type_, op);
  }
}

std::string param_name(const ::testing::TestParamInfo<std::tuple<Isa, cclDataType_t>>& info) {
  return std::string(isa_name(std::get<0>(info.param))) + "_" +
         datatype_name(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(AllTypes, ReduceKernelTest,
                         ::testing::Combine(::testing::ValuesIn(kIsas),
                                            ::testing::ValuesIn(testdata::all_types())),
                         param_name);

// Every pair of FP8 values, every op, every ISA.
TEST(ReduceKernelFp8, AllPairs) {
  for (cclDataType_t t : {cclFloat8e4m3, cclFloat8e5m2}) {
    std::vector<uint64_t> va(65536), vb(65536);
    for (size_t i = 0; i < va.size(); ++i) {
      va[i] = i & 0xff;
      vb[i] = i >> 8;
    }
    for (Isa isa : kIsas) {
      for (cclRedOp_t op : kOps) {
        const ReduceFn fn = reduce_kernel_for(isa, t, op);
        if (fn == nullptr) continue;
        ASSERT_TRUE(check_run(fn, t, op, va, vb, 0, 0, 0, Alias::None)) << describe(isa, t, op);
      }
    }
  }
}

// A few results worked out by hand, so that the reference itself is checked too.
TEST(ReduceKernelKnown, HandPicked) {
  struct Known {
    cclDataType_t t;
    cclRedOp_t op;
    uint64_t a, b, want;
  };
  const Known cases[] = {
      {cclInt8, cclSum, 0x7f, 0x01, 0x80},            // 127 + 1 wraps to -128
      {cclUint8, cclProd, 0x10, 0x10, 0x00},          // 256 wraps to 0
      {cclInt32, cclMax, 0xffffffff, 0x00000001, 1},  // -1 < 1
      {cclUint32, cclMax, 0xffffffff, 0x00000001, 0xffffffff},
      {cclInt64, cclMin, 0x8000000000000000, 0, 0x8000000000000000},
      {cclFloat16, cclSum, 0x3c00, 0x1000, 0x3c00},   // 1 + 2^-11: a tie, to even (1)
      {cclFloat16, cclSum, 0x3c01, 0x1000, 0x3c02},   // (1+ulp) + half ulp: tie, to even (up)
      {cclFloat16, cclSum, 0x7bff, 0x5000, 0x7c00},   // 65504 + 32 = 65536: overflows to inf
      {cclBfloat16, cclSum, 0x3f80, 0x3b80, 0x3f80},  // 1 + 2^-8: tie, to even (1)
      {cclFloat8e4m3, cclSum, 0x7e, 0x7e, 0x7e},      // 448 + 448 saturates to 448
      {cclFloat8e4m3, cclSum, 0xfe, 0xfe, 0xfe},      // -896 saturates to -448
      {cclFloat8e4m3, cclMax, 0x7f, 0x38, 0x7f},      // NaN propagates (0x7f is the NaN)
      {cclFloat8e5m2, cclSum, 0x7b, 0x7b, 0x7c},      // 57344 * 2 overflows to inf
      {cclFloat32, cclMax, 0x80000000, 0x00000000, 0x00000000},  // max(-0, +0) = +0
      {cclFloat32, cclMin, 0x00000000, 0x80000000, 0x80000000},  // min(+0, -0) = -0
  };
  for (Isa isa : kIsas) {
    for (const Known& k : cases) {
      const ReduceFn fn = reduce_kernel_for(isa, k.t, k.op);
      if (fn == nullptr) continue;
      const size_t size = datatype_size(k.t);
      unsigned char a[8] = {}, b[8] = {}, d[8] = {};
      store_elem(a, size, k.a);
      store_elem(b, size, k.b);
      fn(d, a, b, 1);
      EXPECT_EQ(load_elem(d, size), k.want)
          << describe(isa, k.t, k.op) << std::hex << " a=0x" << k.a << " b=0x" << k.b;
      const ref::Expected r = ref::reduce(k.t, k.op, k.a, k.b);
      if (r.nan) {
        EXPECT_TRUE(ref::is_nan_code(uint32_t(k.want), ref::format_of(k.t)));
      } else {
        EXPECT_EQ(r.bits, k.want) << "reference " << describe(isa, k.t, k.op);
      }
    }
  }
}

}  // namespace
}  // namespace ccl::reduce
