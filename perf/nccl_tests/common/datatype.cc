#include "datatype.h"

#include <array>
#include <cstdlib>
#include <string>

namespace ccl::perf {
namespace {

constexpr int64_t kBigInt = int64_t{1} << 24;  // plenty for any sum the checker builds

// Indexed by cclDataType_t.
const std::array<TypeInfo, cclNumTypes> kTypes = {{
    {cclInt8, "int8", 1, TypeKind::Signed, 127, 6},
    {cclUint8, "uint8", 1, TypeKind::Unsigned, 255, 7},
    {cclInt32, "int32", 4, TypeKind::Signed, kBigInt, 30},
    {cclUint32, "uint32", 4, TypeKind::Unsigned, kBigInt, 31},
    {cclInt64, "int64", 8, TypeKind::Signed, kBigInt, 62},
    {cclUint64, "uint64", 8, TypeKind::Unsigned, kBigInt, 62},
    // 11 significant bits; largest finite 65504.
    {cclFloat16, "half", 2, TypeKind::Float, 2048, 15},
    {cclFloat32, "float", 4, TypeKind::Float, kBigInt, 60},
    {cclFloat64, "double", 8, TypeKind::Float, kBigInt, 60},
    // 8 significant bits; float's exponent range.
    {cclBfloat16, "bfloat16", 2, TypeKind::Float, 256, 60},
    // 4 significant bits, largest finite 448; 3 significant bits, largest finite 57344.
    {cclFloat8e4m3, "f8e4m3", 1, TypeKind::Float, 16, 8},
    {cclFloat8e5m2, "f8e5m2", 1, TypeKind::Float, 8, 15},
}};

struct Alias {
  std::string_view name;
  cclDataType_t type;
};
const Alias kAliases[] = {
    {"char", cclInt8},
    {"int", cclInt32},
    {"float16", cclFloat16},
    {"fp16", cclFloat16},
    {"float32", cclFloat32},
    {"fp32", cclFloat32},
    {"float64", cclFloat64},
    {"fp64", cclFloat64},
    {"bf16", cclBfloat16},
    {"e4m3", cclFloat8e4m3},
    {"fp8e4m3", cclFloat8e4m3},
    {"fp8_e4m3", cclFloat8e4m3},
    {"float8e4m3", cclFloat8e4m3},
    {"e5m2", cclFloat8e5m2},
    {"fp8e5m2", cclFloat8e5m2},
    {"fp8_e5m2", cclFloat8e5m2},
    {"float8e5m2", cclFloat8e5m2},
};

const char* const kOpNames[cclNumOps] = {"sum", "prod", "max", "min", "avg"};

}  // namespace

const TypeInfo& type_info(cclDataType_t type) {
  const auto index = static_cast<size_t>(type);
  if (index >= kTypes.size()) std::abort();  // callers only pass parsed types
  return kTypes[index];
}

const std::vector<cclDataType_t>& all_types() {
  static const std::vector<cclDataType_t> types = [] {
    std::vector<cclDataType_t> v;
    for (const auto& t : kTypes) v.push_back(t.type);
    return v;
  }();
  return types;
}

std::optional<cclDataType_t> parse_type(std::string_view name) {
  for (const auto& t : kTypes) {
    if (name == t.name) return t.type;
  }
  for (const auto& a : kAliases) {
    if (name == a.name) return a.type;
  }
  return std::nullopt;
}

const std::vector<cclRedOp_t>& all_ops() {
  static const std::vector<cclRedOp_t> ops = {cclSum, cclProd, cclMax, cclMin, cclAvg};
  return ops;
}

const char* op_name(cclRedOp_t op) {
  const auto index = static_cast<size_t>(op);
  return index < cclNumOps ? kOpNames[index] : "?";
}

std::optional<cclRedOp_t> parse_op(std::string_view name) {
  for (int i = 0; i < cclNumOps; ++i) {
    if (name == kOpNames[i]) return static_cast<cclRedOp_t>(i);
  }
  return std::nullopt;
}

}  // namespace ccl::perf
