// Names and sizes of datatypes and ops, and run-time choice of the kernel table for this CPU.
#include <cpuid.h>

#include "algorithms/reduce/kernel_table.h"
#include "base/error.h"

namespace ccl::reduce {
namespace {

// CPUID leaf 1, ECX bit 29, asked directly: clang before 16 knows no "f16c" for
// __builtin_cpu_supports (a compile error).
bool has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}

bool valid_type(cclDataType_t type) { return type >= 0 && type < cclNumTypes; }

// Checked once: CPUID and the OS's saved vector state (libgcc's test covers XCR0).
Isa detect_isa() {
  __builtin_cpu_init();
  // The AVX-512 kernels are also compiled with the AVX2 flags; a level implies the one below.
  const bool avx2 = __builtin_cpu_supports("avx2") && has_f16c() && __builtin_cpu_supports("fma");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512dq");
  return avx512 ? Isa::Avx512 : avx2 ? Isa::Avx2 : Isa::Scalar;
}

const KernelTable* table_for(Isa isa) {
  if (static_cast<int>(isa) > static_cast<int>(best_isa())) return nullptr;
  switch (isa) {
    case Isa::Scalar:
      return &kScalarKernels;
    case Isa::Avx2:
      return &kAvx2Kernels;
    case Isa::Avx512:
      return &kAvx512Kernels;
  }
  return nullptr;
}

// Sum, prod, max and min index the tables directly; avg reduces as sum.
int base_op(cclRedOp_t op) {
  if (op == cclAvg) return cclSum;
  if (op < 0 || op >= cclAvg) throw_error(cclInvalidArgument, "invalid reduction op %d", int(op));
  return op;
}

void check_type(cclDataType_t type) {
  if (!valid_type(type)) throw_error(cclInvalidArgument, "invalid datatype %d", int(type));
}

}  // namespace

void throw_zero_divisor() { throw_error(cclInvalidArgument, "division by a zero divisor"); }

size_t datatype_size(cclDataType_t type) {
  static constexpr size_t kSizes[cclNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return valid_type(type) ? kSizes[type] : 0;
}

const char* datatype_name(cclDataType_t type) {
  static constexpr const char* kNames[cclNumTypes] = {"int8",   "uint8",    "int32",  "uint32",
                                                      "int64",  "uint64",   "half",   "float",
                                                      "double", "bfloat16", "f8e4m3", "f8e5m2"};
  return valid_type(type) ? kNames[type] : "unknown";
}

const char* op_name(cclRedOp_t op) {
  static constexpr const char* kNames[cclNumOps] = {"sum", "prod", "max", "min", "avg"};
  return op >= 0 && op < cclNumOps ? kNames[op] : "unknown";
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar:
      return "scalar";
    case Isa::Avx2:
      return "avx2";
    case Isa::Avx512:
      return "avx512";
  }
  return "unknown";
}

Isa best_isa() {
  static const Isa isa = detect_isa();
  return isa;
}

ReduceFn reduce_kernel_for(Isa isa, cclDataType_t type, cclRedOp_t op) {
  check_type(type);
  const int base = base_op(op);
  const KernelTable* t = table_for(isa);
  return t ? t->reduce[type][base] : nullptr;
}

ReduceFn reduce_kernel(cclDataType_t type, cclRedOp_t op) {
  return reduce_kernel_for(best_isa(), type, op);
}

DivideFn divide_kernel(cclDataType_t type) {
  check_type(type);
  const DivideFn fn = table_for(best_isa())->divide[type];
  return fn ? fn : kScalarKernels.divide[type];
}

}  // namespace ccl::reduce
