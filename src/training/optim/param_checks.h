// The argument checks the optimizers share: options out of range, and the ParamRef list of a step
// (null pointers, changed counts). Each message starts with the optimizer's prefix
// ("ccl::training::Lamb: "). Internal to ccl_training.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>

#include "ccl/training/optim.hpp"

namespace ccl::training::optim_detail {

/// The shortest decimal that reads back as `value` ("0.1", not "0.100000"), for messages.
std::string shortest_number(double value);

/// Throws std::invalid_argument "<prefix><field> = <value> is out of range (<range>)" unless
/// `ok`. Write the comparison in `ok` so that NaN fails it.
void check_range(const char* prefix, bool ok, const char* field, double value, const char* range);

/// How many elements the optimizer's state already holds for a parameter pointer, or nullopt
/// for one it has not seen.
using KnownCount = std::function<std::optional<size_t>(const float*)>;

/// Checks a step's parameters before anything changes, so that a throw leaves the optimizer as
/// it was: std::invalid_argument for a null param or grad with count > 0, a known pointer whose
/// count is not `known_count`'s, or a new pointer passed twice with two counts.
void check_params(const char* prefix, std::span<const ParamRef> params,
                  const KnownCount& known_count);

/// check_params for an optimizer whose state is a map from parameter pointers, where
/// `size_of(state)` is the element count one entry holds.
template <class State, class SizeOf>
void check_params(const char* prefix, std::span<const ParamRef> params,
                  const std::unordered_map<const float*, State>& state, const SizeOf& size_of) {
  check_params(prefix, params, [&](const float* param) -> std::optional<size_t> {
    const auto known = state.find(param);
    if (known == state.end()) return std::nullopt;
    return size_of(known->second);
  });
}

}  // namespace ccl::training::optim_detail
