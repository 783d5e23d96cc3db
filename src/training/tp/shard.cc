// Cutting a full tensor into one rank's shard (rows or columns), for initialization and tests.
#include "ccl/training/tensor_parallel.hpp"
#include "tp/tp_checks.h"

namespace ccl::training {

using tp_detail::check_divides;
using tp_detail::check_matrix;
using tp_detail::invalid;

namespace {

void check_index(const char* where, int parts, int index) {
  if (index < 0 || index >= parts) {
    invalid(where, "index " + std::to_string(index) + " is outside [0, parts " +
                       std::to_string(parts) + ")");
  }
}

}  // namespace

std::vector<float> shard_rows(ConstMatrix full, int parts, int index) {
  check_matrix("shard_rows", "full", full);
  check_divides("shard_rows", "full.rows", full.rows, parts);
  check_index("shard_rows", parts, index);
  const std::size_t block = full.rows / static_cast<std::size_t>(parts) * full.cols;
  auto first =
      full.data.begin() + static_cast<std::ptrdiff_t>(block * static_cast<std::size_t>(index));
  return std::vector<float>(first, first + static_cast<std::ptrdiff_t>(block));
}

std::vector<float> shard_rows(std::span<const float> full, int parts, int index) {
  return shard_rows(ConstMatrix{full, full.size(), 1}, parts, index);
}

std::vector<float> shard_cols(ConstMatrix full, int parts, int index) {
  check_matrix("shard_cols", "full", full);
  check_divides("shard_cols", "full.cols", full.cols, parts);
  check_index("shard_cols", parts, index);
  const std::size_t width = full.cols / static_cast<std::size_t>(parts);
  const std::size_t first = width * static_cast<std::size_t>(index);
  std::vector<float> out;
  out.reserve(full.rows * width);
  for (std::size_t r = 0; r < full.rows; ++r) {
    for (std::size_t c = 0; c < width; ++c) out.push_back(full.data[r * full.cols + first + c]);
  }
  return out;
}

}  // namespace ccl::training
