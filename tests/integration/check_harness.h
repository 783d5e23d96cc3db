// What the integration check programs share (collectives_check, and the files of
// collective_set_check): joining the communicator, failure accounting (every check counts, every
// failure prints the rank and what differed), misaligned buffers, byte comparisons and the data
// patterns of the data-movement collectives.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "algorithms/reduce/reduce.h"
#include "ccl/ccl.h"
#include "expected_values.h"

namespace ccl::set_check {

using reduce::datatype_name;
using reduce::datatype_size;
using reduce::op_name;
using testing::expected_value;
using testing::input_value;
using testing::store_expected;
using testing::store_value;

inline int g_rank = 0;
inline int g_failures = 0;
inline int g_checks = 0;

inline void fail(const char* what) {
  fprintf(stderr, "rank %d: FAIL %s\n", g_rank, what);
  ++g_failures;
}

inline bool expect_result(cclResult_t got, cclResult_t want, const char* call, const char* file,
                          int line) {
  ++g_checks;
  if (got == want) return true;
  // The thread's last error names the failing function and why.
  fprintf(stderr, "rank %d: FAIL %s returned %s, expected %s at %s:%d [%s]\n", g_rank, call,
          cclGetErrorString(got), cclGetErrorString(want), file, line,
          got == cclSuccess ? "" : cclGetLastError(nullptr));
  ++g_failures;
  return false;
}

// Joins the communicator the launcher started and sets g_rank; nullptr (after printing why) if
// that failed.
inline cclComm_t init_from_env(int* nranks) {
  cclComm_t comm = nullptr;
  const cclResult_t init = cclCommInitFromEnv(&comm);
  if (init != cclSuccess) {
    fprintf(stderr, "init failed: %s: %s\n", cclGetErrorString(init), cclGetLastError(nullptr));
    return nullptr;
  }
  cclCommCount(comm, nranks);
  cclCommUserRank(comm, &g_rank);
  return comm;
}

// Evaluates `call` once; true when it returned `expected`.
#define EXPECT_RESULT(call, expected) \
  ::ccl::set_check::expect_result((call), (expected), #call, __FILE__, __LINE__)

inline bool expect_true(bool condition, const char* what, const char* file, int line) {
  ++g_checks;
  if (condition) return true;
  fprintf(stderr, "rank %d: FAIL %s at %s:%d\n", g_rank, what, file, line);
  ++g_failures;
  return false;
}
#define EXPECT_TRUE(condition) \
  ::ccl::set_check::expect_true((condition), #condition, __FILE__, __LINE__)

// A buffer whose data starts `misalign` bytes past a 64-byte boundary; every byte starts as
// `fill`, so bytes a collective must not touch can be checked.
struct Buffer {
  std::vector<uint8_t> storage;
  uint8_t* data;
  Buffer(size_t bytes, size_t misalign, uint8_t fill = 0xA5)
      : storage(bytes + 64 + misalign, fill) {
    data = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64 + misalign;
  }
};

// The element at index i as a double, for failure messages.
inline double load_value(cclDataType_t type, const uint8_t* p, size_t i) {
  auto get = [&](auto v) {
    memcpy(&v, p + i * sizeof(v), sizeof(v));
    return v;
  };
  switch (type) {
    case cclInt8:
      return get(int8_t{});
    case cclUint8:
      return get(uint8_t{});
    case cclInt32:
      return get(int32_t{});
    case cclUint32:
      return get(uint32_t{});
    case cclInt64:
      return static_cast<double>(get(int64_t{}));
    case cclUint64:
      return static_cast<double>(get(uint64_t{}));
    case cclFloat16:
      return reduce::half_to_float(get(uint16_t{}));
    case cclFloat32:
      return get(float{});
    case cclFloat64:
      return get(double{});
    case cclBfloat16:
      return reduce::bf16_to_float(get(uint16_t{}));
    case cclFloat8e4m3:
      return reduce::fp8e4m3_to_float(get(uint8_t{}));
    case cclFloat8e5m2:
      return reduce::fp8e5m2_to_float(get(uint8_t{}));
    default:
      return 0;
  }
}

// Byte comparison of `count` elements; on a difference prints the first differing element.
inline bool compare(const char* what, cclDataType_t type, const uint8_t* got, const uint8_t* want,
                    size_t count) {
  const size_t size = datatype_size(type);
  ++g_checks;
  for (size_t i = 0; i < count; ++i) {
    if (memcmp(got + i * size, want + i * size, size) != 0) {
      fprintf(stderr, "rank %d: FAIL %s %s count %zu: element %zu is %g, expected %g\n", g_rank,
              what, datatype_name(type), count, i, load_value(type, got, i),
              load_value(type, want, i));
      ++g_failures;
      return false;
    }
  }
  return true;
}

// Data of the movement collectives: element i of stream `source` (a rank, or a (sender,
// receiver) pair). Small integers, distinct for neighbouring sources and indices, stored as each
// type stores them (fp8 keeps to 0..15, where consecutive sources still differ).
inline double movement_value(cclDataType_t type, int source, size_t i) {
  size_t range = 1u << 20;
  if (type == cclFloat8e4m3 || type == cclFloat8e5m2) {
    range = 16;
  } else if (type == cclInt8 || type == cclUint8) {
    range = 100;
  } else if (type == cclFloat16 || type == cclBfloat16) {
    range = 256;
  }
  return static_cast<double>((static_cast<size_t>(source) * 7919 + i * 31 + 1) % range);
}

inline void fill_movement(cclDataType_t type, uint8_t* buffer, int source, size_t first,
                          size_t count) {
  for (size_t i = 0; i < count; ++i)
    store_value(type, buffer, i, movement_value(type, source, first + i));
}

// The odd byte offsets the checks rotate through (0: aligned).
inline size_t misalign_for(int k) {
  static const size_t offsets[] = {1, 0, 3, 5};
  return offsets[static_cast<unsigned>(k) % 4];
}

// The parts of the check (one per file), each run by every rank in the same order.
struct Context {
  cclComm_t comm;
  int nranks;
  bool quick;
  cclStream_t stream;  // a cclStream_t the parts queue some operations on
};

void run_argument_errors(const Context& ctx);
void run_collectives(const Context& ctx);
void run_vector_collectives(const Context& ctx);
void run_premulsum(const Context& ctx);
void run_point_to_point(const Context& ctx);
void run_split(const Context& ctx);
void run_finalize(const Context& ctx);

// Synchronizes `stream` (when not NULL) after a queued call that returned cclSuccess.
inline bool finish(cclResult_t queued, cclStream_t stream, const char* call, const char* file,
                   int line) {
  if (!expect_result(queued, cclSuccess, call, file, line)) return false;
  if (stream == nullptr) return true;
  return expect_result(cclStreamSynchronize(stream), cclSuccess, call, file, line);
}
#define EXPECT_DONE(call, stream) \
  ::ccl::set_check::finish((call), (stream), #call, __FILE__, __LINE__)

}  // namespace ccl::set_check
