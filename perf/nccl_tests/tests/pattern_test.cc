#include "pattern.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "datatype.h"
#include "float_format.h"

namespace ccl::perf {
namespace {

// A model of the library's kernels (src/algorithms/reduce/reduce.h): integers in their own type,
// float and double natively, 16- and 8-bit floats in float rounded back after every step, and
// avg as a sum followed by a division by nranks. Values travel as doubles/int64 in between.
struct Model {
  cclDataType_t type;
  size_t size() const { return type_info(type).size; }

  double load_float(const unsigned char* p) const {
    if (const FloatFormat* f = small_float_format(type)) {
      uint32_t bits = 0;
      std::memcpy(&bits, p, size());
      return decode_float(bits, *f);
    }
    if (type == cclFloat32) {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    double v;
    std::memcpy(&v, p, 8);
    return v;
  }
  void store_float(unsigned char* p, double v) const {  // v already computed in the kernel type
    if (const FloatFormat* f = small_float_format(type)) {
      const uint32_t bits = encode_float(static_cast<float>(v), *f);
      std::memcpy(p, &bits, size());
    } else if (type == cclFloat32) {
      const auto x = static_cast<float>(v);
      std::memcpy(p, &x, 4);
    } else {
      std::memcpy(p, &v, 8);
    }
  }
  int64_t load_int(const unsigned char* p) const {
    switch (type) {
      case cclInt8: {
        int8_t v;
        std::memcpy(&v, p, 1);
        return v;
      }
      case cclUint8: {
        uint8_t v;
        std::memcpy(&v, p, 1);
        return v;
      }
      case cclInt32: {
        int32_t v;
        std::memcpy(&v, p, 4);
        return v;
      }
      case cclUint32: {
        uint32_t v;
        std::memcpy(&v, p, 4);
        return v;
      }
      default: {
        int64_t v;
        std::memcpy(&v, p, 8);
        return v;
      }
    }
  }
  void store_int(unsigned char* p, int64_t v) const { store_value(type, p, 0, v); }

  // dst = dst op src, one element.
  void reduce(unsigned char* dst, const unsigned char* src, cclRedOp_t op) const {
    if (type_info(type).kind != TypeKind::Float) {
      const int64_t a = load_int(dst), b = load_int(src);
      int64_t r = a;
      switch (op) {
        case cclSum:
        case cclAvg:
          r = a + b;
          break;
        case cclProd:
          r = a * b;
          break;
        case cclMax:
          r = std::max(a, b);
          break;
        case cclMin:
          r = std::min(a, b);
          break;
        default:
          break;
      }
      store_int(dst, r);
      return;
    }
    const bool in_float = type != cclFloat64;
    auto f = [&](double x) { return in_float ? static_cast<double>(static_cast<float>(x)) : x; };
    const double a = load_float(dst), b = load_float(src);
    double r = a;
    switch (op) {
      case cclSum:
      case cclAvg:
        r = f(a + b);
        break;
      case cclProd:
        r = f(a * b);
        break;
      case cclMax:
        r = std::max(a, b);
        break;
      case cclMin:
        r = std::min(a, b);
        break;
      default:
        break;
    }
    store_float(dst, r);
  }

  void divide(unsigned char* p, int n) const {
    if (type_info(type).kind != TypeKind::Float) {
      if (type == cclUint64) {
        uint64_t v;
        std::memcpy(&v, p, 8);
        v /= static_cast<uint64_t>(n);
        std::memcpy(p, &v, 8);
      } else {
        store_int(p, load_int(p) / n);
      }
      return;
    }
    if (type == cclFloat64) {
      store_float(p, load_float(p) / n);
    } else {
      store_float(p, static_cast<float>(load_float(p)) / static_cast<float>(n));
    }
  }
};

using Buffers = std::vector<std::vector<unsigned char>>;

// Reduces the ranks' inputs into inputs[order[0]] following `order` pairwise as a fold, or as a
// tree when tree == true.
std::vector<unsigned char> simulate(const CheckSpec& spec, size_t count, int order_kind) {
  const Model m{spec.type};
  const size_t elt = m.size();
  Buffers in(spec.nranks, std::vector<unsigned char>(count * elt));
  for (int r = 0; r < spec.nranks; ++r) fill_reduce_input(in[r].data(), count, spec, r);
  auto combine = [&](int dst, int src) {
    for (size_t i = 0; i < count; ++i) m.reduce(&in[dst][i * elt], &in[src][i * elt], spec.op);
  };
  int result = 0;
  if (order_kind == 0) {  // 0 <- 1 <- 2 ...
    for (int r = 1; r < spec.nranks; ++r) combine(0, r);
  } else if (order_kind == 1) {  // n-1 <- n-2 <- ... 0
    result = spec.nranks - 1;
    for (int r = spec.nranks - 2; r >= 0; --r) combine(result, r);
  } else {  // a binary tree (recursive doubling)
    for (int step = 1; step < spec.nranks; step *= 2) {
      for (int r = 0; r + step < spec.nranks; r += 2 * step) combine(r, r + step);
    }
  }
  if (spec.op == cclAvg) {
    for (size_t i = 0; i < count; ++i) m.divide(&in[result][i * elt], spec.nranks);
  }
  return in[result];
}

TEST(Pattern, ExpectedIsExactForEveryTypeOpRankCountAndOrder) {
  const size_t count = 300;
  for (cclDataType_t type : all_types()) {
    for (cclRedOp_t op : all_ops()) {
      for (int n : {1, 2, 3, 4, 5, 7, 8, 16, 33, 64}) {
        const CheckSpec spec{Collective::AllReduce, type, op, 0, n, 7};
        std::vector<unsigned char> expected(count * type_info(type).size);
        fill_reduce_expected(expected.data(), count, spec);
        for (int order = 0; order < 3; ++order) {
          const auto got = simulate(spec, count, order);
          ASSERT_EQ(count_wrong(got.data(), expected.data(), count, type), 0)
              << type_info(type).name << " " << op_name(op) << " nranks " << n << " order "
              << order;
        }
      }
    }
  }
}

TEST(Pattern, InputsDependOnRankSoMixUpsAreCaught) {
  for (cclDataType_t type : all_types()) {
    for (cclRedOp_t op : all_ops()) {
      const CheckSpec spec{Collective::AllReduce, type, op, 0, 2, 3};
      const size_t count = 1000;
      const size_t elt = type_info(type).size;
      std::vector<unsigned char> in0(count * elt), in1(count * elt), expected(count * elt);
      fill_reduce_input(in0.data(), count, spec, 0);
      fill_reduce_input(in1.data(), count, spec, 1);
      fill_reduce_expected(expected.data(), count, spec);
      // A rank that kept its own input, or took its peer's, fails on many elements.
      EXPECT_GT(count_wrong(in0.data(), expected.data(), count, type), 100)
          << type_info(type).name << " " << op_name(op);
      EXPECT_GT(count_wrong(in1.data(), expected.data(), count, type), 100)
          << type_info(type).name << " " << op_name(op);
      // Another seed gives other data: stale results from an earlier check fail.
      CheckSpec other = spec;
      other.seed = 4;
      std::vector<unsigned char> expected2(count * elt);
      fill_reduce_expected(expected2.data(), count, other);
      EXPECT_GT(count_wrong(expected2.data(), expected.data(), count, type), 100)
          << type_info(type).name << " " << op_name(op);
    }
  }
}

TEST(Pattern, ProductsAndSumsUseTheirRange) {
  // Signed products reach negative values and large powers of two; sums are not all zero.
  const CheckSpec prod{Collective::AllReduce, cclInt32, cclProd, 0, 8, 1};
  bool negative = false, big = false;
  for (size_t i = 0; i < 100; ++i) {
    int64_t p = 1;
    for (int r = 0; r < 8; ++r) p *= reduce_input(prod, r, i);
    negative |= p < 0;
    big |= std::llabs(p) >= 64;
  }
  EXPECT_TRUE(negative);
  EXPECT_TRUE(big);
  // fp8 e5m2 with 64 ranks: more ranks than exact integers, sums stay <= 8 and vary.
  const CheckSpec sum{Collective::AllReduce, cclFloat8e5m2, cclSum, 0, 64, 1};
  int64_t max_sum = 0;
  for (size_t i = 0; i < 100; ++i) {
    int64_t s = 0;
    for (int r = 0; r < 64; ++r) s += reduce_input(sum, r, i);
    EXPECT_LE(s, 8);
    max_sum = std::max(max_sum, s);
  }
  EXPECT_EQ(max_sum, 8);
}

TEST(Pattern, CountWrong) {
  std::vector<float> a = {1, 2, 3, NAN}, b = {1, 2, 4, NAN};
  EXPECT_EQ(count_wrong(a.data(), b.data(), 4, cclFloat32), 1);
  b[2] = 3;
  EXPECT_EQ(count_wrong(a.data(), b.data(), 4, cclFloat32), 0);  // NaN == NaN
  b[3] = 0;
  EXPECT_EQ(count_wrong(a.data(), b.data(), 4, cclFloat32), 1);
  std::vector<uint16_t> h = {0x7e00, 0x3c00}, g = {0x7c01, 0x3c00};  // two half NaNs
  EXPECT_EQ(count_wrong(h.data(), g.data(), 2, cclFloat16), 0);
  g[1] = 0xbc00;
  EXPECT_EQ(count_wrong(h.data(), g.data(), 2, cclFloat16), 1);
  std::vector<uint8_t> e = {0x7f, 0x38}, f = {0xff, 0x38};  // E4M3 NaNs
  EXPECT_EQ(count_wrong(e.data(), f.data(), 2, cclFloat8e4m3), 0);
  EXPECT_EQ(count_wrong(e.data(), f.data(), 2, cclUint8), 1);  // integers: bitwise
  std::vector<double> d = {0.0, NAN}, z = {-0.0, NAN};
  EXPECT_EQ(count_wrong(d.data(), z.data(), 2, cclFloat64), 1);  // bitwise: -0 != +0
}

TEST(Pattern, AvgRoundsTheExactQuotient) {
  std::vector<uint16_t> h(1);
  store_ratio(cclFloat16, h.data(), 0, 5, 3);  // 1.6666... -> 1707/1024 (0x3eab)
  EXPECT_EQ(h[0], 0x3eab);
  std::vector<uint8_t> e(1);
  store_ratio(cclFloat8e5m2, e.data(), 0, 5, 3);  // between 1.5 and 1.75: 1.75
  EXPECT_EQ(e[0], encode_float(1.75, kFp8E5M2));
  std::vector<int32_t> i(1);
  store_ratio(cclInt32, i.data(), 0, -7, 2);  // truncates toward zero
  EXPECT_EQ(i[0], -3);
}

}  // namespace
}  // namespace ccl::perf
