// Datatypes and reduction ops as the perf binaries name them: nccl-tests' spellings ("float",
// "half", "f8e4m3", ...) plus the aliases users type, and what each type can hold exactly (the
// data checker builds its inputs from that).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "ccl/ccl.h"

namespace ccl::perf {

enum class TypeKind { Signed, Unsigned, Float };

struct TypeInfo {
  cclDataType_t type;
  const char* name;  // as nccl-tests prints it
  size_t size;       // bytes per element
  TypeKind kind;
  // Largest C such that every integer in [-C, C] (or [0, C] for unsigned types) is stored exactly
  // and C is below the type's maximum: the bound on any partial sum the checker produces.
  int64_t exact_int;
  // Largest k such that +-2^k is stored exactly (at most 62: the checker multiplies in int64):
  // the bound on any partial product.
  int max_pow2;
};

const TypeInfo& type_info(cclDataType_t type);
// Every datatype, in nccl-tests' order (what "-d all" runs).
const std::vector<cclDataType_t>& all_types();
// nccl-tests names and the usual aliases ("char", "int", "fp16", "bf16", "fp32", "e4m3", ...).
std::optional<cclDataType_t> parse_type(std::string_view name);

// The five base ops (what "-o all" runs) and their names.
const std::vector<cclRedOp_t>& all_ops();
const char* op_name(cclRedOp_t op);
std::optional<cclRedOp_t> parse_op(std::string_view name);

}  // namespace ccl::perf
