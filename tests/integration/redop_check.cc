// PreMulSum operations (cclRedOpCreatePreMulSum with a host scalar, residence 0): allreduce,
// reduce and reduce-scatter give sum_r(scalar_r * x_r), each rank passing its own scalar; two ops
// live at once; a destroyed op is rejected; argument errors.
#include <string>
#include <vector>

#include "check_harness.h"

namespace ccl::set_check {
namespace {

// Rank r's scalar in op variant v: +-1..3, so products and sums stay small integers (exact in
// half). Ranks differ, so a library that used one rank's scalar for all would be caught.
double scalar_of(int r, int variant) {
  const int m = (r + variant) % 3 + 1;
  return r % 2 == 0 ? m : -m;
}
double premul_input(int r, size_t i) { return static_cast<double>((i + r) % 3); }
double premul_expected(int nranks, size_t i, int variant) {
  double sum = 0;
  for (int r = 0; r < nranks; ++r) sum += scalar_of(r, variant) * premul_input(r, i);
  return sum;
}

bool create_op(const Context& ctx, cclDataType_t type, int variant, cclRedOp_t* op) {
  uint8_t scalar[8];
  store_value(type, scalar, 0, scalar_of(g_rank, variant));
  *op = cclSum;
  if (!EXPECT_RESULT(cclRedOpCreatePreMulSum(op, scalar, type, 0, ctx.comm), cclSuccess)) {
    return false;
  }
  // Residence 0: the scalar was read by the call, so changing it now must not matter.
  store_value(type, scalar, 0, 50);
  return EXPECT_TRUE(static_cast<int>(*op) >= cclNumOps);
}

enum class Coll { AllReduce, Reduce, ReduceScatter };

// Runs `coll` with `op` (made from variant `variant`) over `count` result elements and checks.
void check_premul(const Context& ctx, Coll coll, cclDataType_t type, cclRedOp_t op, int variant,
                  size_t count, bool in_place, cclStream_t stream) {
  const int n = ctx.nranks;
  const size_t size = datatype_size(type);
  const size_t inputs = coll == Coll::ReduceScatter ? count * n : count;
  const size_t first = coll == Coll::ReduceScatter ? g_rank * count : 0;  // of this rank's result
  Buffer send(inputs * size, 1), recv(count * size, 3), want(count * size, 0);
  for (size_t j = 0; j < inputs; ++j) store_value(type, send.data, j, premul_input(g_rank, j));
  for (size_t i = 0; i < count; ++i) {
    store_value(type, want.data, i, premul_expected(n, first + i, variant));
  }
  uint8_t* out = in_place ? send.data + first * size : recv.data;
  cclResult_t result = cclSuccess;
  const char* name = "premulsum allreduce";
  const int root = n - 1;
  switch (coll) {
    case Coll::AllReduce:
      result = cclAllReduce(send.data, out, count, type, op, ctx.comm, stream);
      break;
    case Coll::Reduce:
      name = "premulsum reduce";
      result = cclReduce(send.data, out, count, type, op, root, ctx.comm, stream);
      break;
    case Coll::ReduceScatter:
      name = "premulsum reducescatter";
      result = cclReduceScatter(send.data, out, count, type, op, ctx.comm, stream);
      break;
  }
  if (!EXPECT_DONE(result, stream)) return;
  if (coll == Coll::Reduce && g_rank != root) return;
  std::string what = std::string(name) + " variant " + std::to_string(variant) +
                     (in_place ? " in-place" : "") + (stream != nullptr ? " stream" : "");
  compare(what.c_str(), type, out, want.data, count);
}

void check_type(const Context& ctx, cclDataType_t type) {
  cclRedOp_t a = cclSum, b = cclSum;
  if (!create_op(ctx, type, 0, &a)) return;
  if (!create_op(ctx, type, 1, &b)) {
    EXPECT_RESULT(cclRedOpDestroy(a, ctx.comm), cclSuccess);
    return;
  }
  EXPECT_TRUE(a != b);
  check_premul(ctx, Coll::AllReduce, type, a, 0, 1003, false, nullptr);
  check_premul(ctx, Coll::AllReduce, type, b, 1, 7, true, ctx.stream);
  check_premul(ctx, Coll::Reduce, type, a, 0, 7, false, nullptr);
  check_premul(ctx, Coll::Reduce, type, b, 1, 1003, true, ctx.stream);
  check_premul(ctx, Coll::ReduceScatter, type, b, 1, 5, false, nullptr);
  check_premul(ctx, Coll::ReduceScatter, type, a, 0, 1003, true, ctx.stream);

  // A destroyed op is refused before anything is sent; the other one still works.
  double x[8] = {};  // room for a reduce-scatter of 1 element per rank, were it accepted
  EXPECT_RESULT(cclRedOpDestroy(a, ctx.comm), cclSuccess);
  EXPECT_RESULT(cclAllReduce(x, x, 4, type, a, ctx.comm, nullptr), cclInvalidArgument);
  EXPECT_RESULT(cclReduce(x, x, 4, type, a, 0, ctx.comm, nullptr), cclInvalidArgument);
  EXPECT_RESULT(cclReduceScatter(x, x, 1, type, a, ctx.comm, nullptr), cclInvalidArgument);
  EXPECT_RESULT(cclRedOpDestroy(a, ctx.comm), cclInvalidArgument);
  check_premul(ctx, Coll::AllReduce, type, b, 1, 7, false, nullptr);
  EXPECT_RESULT(cclRedOpDestroy(b, ctx.comm), cclSuccess);
  EXPECT_RESULT(cclAllReduce(x, x, 4, type, b, ctx.comm, nullptr), cclInvalidArgument);
}

void check_errors(const Context& ctx) {
  float scalar = 2;
  cclRedOp_t op = cclSum;
  const cclResult_t kBad = cclInvalidArgument;
  EXPECT_RESULT(cclRedOpCreatePreMulSum(nullptr, &scalar, cclFloat32, 0, ctx.comm), kBad);
  EXPECT_RESULT(cclRedOpCreatePreMulSum(&op, &scalar, static_cast<cclDataType_t>(99), 0, ctx.comm),
                kBad);
  EXPECT_RESULT(cclRedOpCreatePreMulSum(&op, &scalar, static_cast<cclDataType_t>(-1), 0, ctx.comm),
                kBad);
  EXPECT_RESULT(cclRedOpCreatePreMulSum(&op, nullptr, cclFloat32, 0, ctx.comm), kBad);
  EXPECT_RESULT(cclRedOpCreatePreMulSum(&op, &scalar, cclFloat32, 0, nullptr), kBad);
  EXPECT_RESULT(cclRedOpDestroy(cclSum, ctx.comm), kBad);  // a built-in op
  EXPECT_RESULT(cclRedOpDestroy(cclAvg, ctx.comm), kBad);
  EXPECT_RESULT(cclRedOpDestroy(static_cast<cclRedOp_t>(1000), ctx.comm), kBad);
  if (EXPECT_RESULT(cclRedOpCreatePreMulSum(&op, &scalar, cclFloat32, 0, ctx.comm), cclSuccess)) {
    EXPECT_RESULT(cclRedOpDestroy(op, nullptr), kBad);
    EXPECT_RESULT(cclRedOpDestroy(op, ctx.comm), cclSuccess);
  }
}

}  // namespace

void run_premulsum(const Context& ctx) {
  check_errors(ctx);
  for (cclDataType_t type : {cclFloat32, cclFloat64, cclFloat16, cclInt32}) check_type(ctx, type);
}

}  // namespace ccl::set_check
