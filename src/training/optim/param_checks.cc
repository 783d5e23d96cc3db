// The argument checks the optimizers share (param_checks.h).
#include "optim/param_checks.h"

#include <array>
#include <charconv>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>

namespace ccl::training::optim_detail {

std::string shortest_number(double value) {
  std::array<char, 32> buf{};
  const auto result = std::to_chars(buf.data(), buf.data() + buf.size(), value);
  return std::string(buf.data(), result.ptr);
}

namespace {

std::string describe(size_t index, const float* param) {
  std::ostringstream s;
  s << "parameter " << index << " (param " << static_cast<const void*>(param) << ")";
  return s.str();
}

}  // namespace

void check_range(const char* prefix, bool ok, const char* field, double value, const char* range) {
  if (!ok) {
    throw std::invalid_argument(std::string(prefix) + field + " = " + shortest_number(value) +
                                " is out of range (" + range + ")");
  }
}

void check_params(const char* prefix, std::span<const ParamRef> params,
                  const KnownCount& known_count) {
  // `pending`: parameters first seen in this call, so that one passed twice with two counts is
  // caught too (it stays empty, and allocates nothing, once every parameter is known).
  std::unordered_map<const float*, size_t> pending;
  for (size_t i = 0; i < params.size(); ++i) {
    const ParamRef& p = params[i];
    if (p.count > 0 && (p.param == nullptr || p.grad == nullptr)) {
      throw std::invalid_argument(prefix + describe(i, p.param) + ": null " +
                                  (p.param == nullptr ? "param" : "grad") + " with count " +
                                  std::to_string(p.count));
    }
    if (p.param == nullptr) continue;  // empty, and so holds no state
    const std::optional<size_t> known = known_count(p.param);
    const size_t before = known ? *known : pending.try_emplace(p.param, p.count).first->second;
    if (before != p.count) {
      throw std::invalid_argument(prefix + describe(i, p.param) + ": count " +
                                  std::to_string(p.count) + ", but it had " +
                                  std::to_string(before));
    }
  }
}

}  // namespace ccl::training::optim_detail
