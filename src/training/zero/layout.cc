// ZeRO's layout, pure: parameters grouped in units, each unit a flat buffer padded to a multiple
// of the group size and cut in equal slices, and the pieces of parameters inside a rank's slice
// (the ParamRefs its optimizer steps on). Every rank computes the same layout from the same list.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "ccl/training/zero.hpp"

namespace ccl::training {

std::vector<size_t> assign_zero_units(std::span<const size_t> counts, size_t unit_bytes) {
  std::vector<size_t> units;
  units.reserve(counts.size());
  size_t unit = 0;
  size_t bytes = 0;
  for (size_t count : counts) {
    const size_t b = count * sizeof(float);
    if (bytes > 0 && bytes + b > unit_bytes) {
      ++unit;
      bytes = 0;
    }
    units.push_back(unit);
    bytes += b;
  }
  return units;
}

std::vector<ZeroUnitLayout> zero_layout(std::span<const ZeroParam> params, int nranks) {
  if (nranks < 1) {
    throw std::invalid_argument("ccl::training::zero_layout: nranks " + std::to_string(nranks) +
                                " must be at least 1");
  }
  std::vector<ZeroUnitLayout> units;
  for (size_t i = 0; i < params.size(); ++i) {
    const ZeroParam& p = params[i];
    if (p.count == 0) {
      throw std::invalid_argument("ccl::training::Zero: parameter " + std::to_string(i) +
                                  " has count 0");
    }
    // Units are numbered densely in list order: parameter i opens unit `units.size()` or stays
    // in the last one.
    if (p.unit == units.size()) {
      units.push_back({.first_param = i, .params = 0, .count = 0, .shard = 0, .offsets = {}});
    } else if (units.empty() || p.unit != units.size() - 1) {
      throw std::invalid_argument(
          "ccl::training::Zero: parameter " + std::to_string(i) + " is in unit " +
          std::to_string(p.unit) + " but units must be numbered 0, 1, ... along the parameter " +
          "list (expected " +
          (units.empty()
               ? std::string("0")
               : std::to_string(units.size() - 1) + " or " + std::to_string(units.size())) +
          ")");
    }
    ZeroUnitLayout& u = units.back();
    u.offsets.push_back(u.count);
    u.count += p.count;
    ++u.params;
  }
  const auto n = static_cast<size_t>(nranks);
  for (ZeroUnitLayout& u : units) u.shard = (u.count + n - 1) / n;
  return units;
}

std::vector<ZeroPiece> zero_pieces(const ZeroUnitLayout& unit, int rank) {
  std::vector<ZeroPiece> pieces;
  const size_t begin = static_cast<size_t>(rank) * unit.shard;
  const size_t end = begin + unit.shard;
  for (size_t k = 0; k < unit.params; ++k) {
    const size_t p_begin = unit.offsets[k];
    const size_t p_end = k + 1 < unit.params ? unit.offsets[k + 1] : unit.count;
    const size_t lo = std::max(begin, p_begin);
    const size_t hi = std::min(end, p_end);
    if (lo >= hi) continue;
    pieces.push_back({.param = unit.first_param + k,
                      .param_offset = lo - p_begin,
                      .shard_offset = lo - begin,
                      .count = hi - lo});
  }
  return pieces;
}

}  // namespace ccl::training
