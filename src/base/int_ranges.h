// Ascending integers written as ranges, "0-3,5,7-8": cclrun's CPU lists and the communicator's log
// lines that say which peers use which transport. Header-only, so that cclrun (which links no
// part of libccl) shares it.
#pragma once

#include <span>
#include <string>

namespace ccl {

inline std::string format_int_ranges(std::span<const int> values) {
  std::string out;
  for (size_t i = 0; i < values.size();) {
    size_t j = i;
    while (j + 1 < values.size() && values[j + 1] == values[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(values[i]);
    if (j > i) out += '-' + std::to_string(values[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace ccl
