// The indices a misuse error names ("parameters not marked ready: 0, 1, 2"), the first 16 and
// how many in all: the reducer's and ZeRO's messages.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ccl::training {

inline std::string index_list(const std::vector<size_t>& indices) {
  std::string s;
  for (size_t i = 0; i < indices.size() && i < 16; ++i)
    s += (i ? ", " : "") + std::to_string(indices[i]);
  if (indices.size() > 16) s += ", ... (" + std::to_string(indices.size()) + " in all)";
  return s;
}

}  // namespace ccl::training
