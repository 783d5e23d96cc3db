// Inputs whose reductions are exact in every datatype (fp8 included) for up to 8 ranks, and the
// expected results, shared by the integration programs.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "algorithms/reduce/reduce.h"
#include "ccl/ccl.h"

namespace ccl::testing {

// Small integer input of `rank` at element i for `op`: sums stay <= 8 (exact even in fp8 e5m2),
// products are powers of two <= 2^8.
inline int input_value(cclRedOp_t op, int rank, size_t i) {
  switch (op) {
    case cclProd:
      return ((i + rank) % 5 == 0) ? 2 : 1;
    case cclMax:
    case cclMin:
      return static_cast<int>((i * 7 + rank * 3) % 11);
    default:
      return static_cast<int>((i + rank) % 3 == 0 ? 1 : 0);
  }
}

inline double reduce_values(cclRedOp_t op, int nranks, size_t i) {
  double acc = input_value(op, 0, i);
  for (int r = 1; r < nranks; ++r) {
    double v = input_value(op, r, i);
    switch (op) {
      case cclProd:
        acc *= v;
        break;
      case cclMax:
        acc = acc > v ? acc : v;
        break;
      case cclMin:
        acc = acc < v ? acc : v;
        break;
      default:
        acc += v;
        break;
    }
  }
  return acc;
}

// Stores `value` (exactly representable or rounded as the library rounds) at element i. The
// buffer may be misaligned, so every store goes through memcpy.
inline void store_value(cclDataType_t type, void* buffer, size_t i, double value) {
  auto put = [&](auto v) { memcpy(static_cast<uint8_t*>(buffer) + i * sizeof(v), &v, sizeof(v)); };
  const float f = static_cast<float>(value);
  switch (type) {
    case cclInt8:
      put(static_cast<int8_t>(value));
      break;
    case cclUint8:
      put(static_cast<uint8_t>(value));
      break;
    case cclInt32:
      put(static_cast<int32_t>(value));
      break;
    case cclUint32:
      put(static_cast<uint32_t>(value));
      break;
    case cclInt64:
      put(static_cast<int64_t>(value));
      break;
    case cclUint64:
      put(static_cast<uint64_t>(value));
      break;
    case cclFloat16:
      put(reduce::float_to_half(f));
      break;
    case cclFloat32:
      put(f);
      break;
    case cclFloat64:
      put(value);
      break;
    case cclBfloat16:
      put(reduce::float_to_bf16(f));
      break;
    case cclFloat8e4m3:
      put(reduce::float_to_fp8e4m3(f));
      break;
    case cclFloat8e5m2:
      put(reduce::float_to_fp8e5m2(f));
      break;
    default:
      break;
  }
}

// The expected result of pattern element i: avg is the sum divided as the library divides
// (truncating for integers, in float for the narrow float types, in the type itself otherwise).
inline double expected_value(cclDataType_t type, cclRedOp_t op, int nranks, size_t i) {
  double value = reduce_values(op, nranks, i);
  if (op == cclAvg) {
    switch (type) {
      case cclFloat64:
        value = value / nranks;
        break;
      case cclFloat16:
      case cclFloat32:
      case cclBfloat16:
      case cclFloat8e4m3:
      case cclFloat8e5m2:
        value = static_cast<float>(value) / static_cast<float>(nranks);
        break;
      default:
        value = static_cast<double>(static_cast<int64_t>(value) / nranks);
        break;
    }
  }
  return value;
}

// Stores the expected result of pattern element i at element i of `buffer`.
inline void store_expected(cclDataType_t type, cclRedOp_t op, int nranks, void* buffer, size_t i) {
  store_value(type, buffer, i, expected_value(type, op, nranks, i));
}

}  // namespace ccl::testing
