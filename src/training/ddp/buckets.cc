// DDP's bucket assignment, rule for rule as torch's compute_bucket_assignment_by_size (reducer.cpp,
// torch 1.13): buckets per dtype, closed when their bytes reach the current limit.
#include "ccl/training/buckets.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace ccl::training {

size_t dtype_size(cclDataType_t dtype) {
  switch (dtype) {
    case cclInt8:
    case cclUint8:
    case cclFloat8e4m3:
    case cclFloat8e5m2:
      return 1;
    case cclFloat16:
    case cclBfloat16:
      return 2;
    case cclInt32:
    case cclUint32:
    case cclFloat32:
      return 4;
    case cclInt64:
    case cclUint64:
    case cclFloat64:
      return 8;
    default:
      throw std::invalid_argument("ccl::training: dtype " +
                                  std::to_string(static_cast<int>(dtype)) +
                                  " is not a cclDataType_t");
  }
}

namespace {

struct OpenBucket {
  cclDataType_t dtype;
  std::vector<size_t> indices;
  size_t bytes = 0;
  size_t limit_index = 0;  // which of the limits applies to this dtype's current bucket
};

std::vector<std::vector<size_t>> assign_in_order(std::span<const TensorSpec> tensors,
                                                 std::span<const size_t> limits,
                                                 std::span<const size_t> order) {
  if (limits.empty()) throw std::invalid_argument("ccl::training::assign_buckets: no limits");
  std::vector<std::vector<size_t>> closed;
  std::vector<OpenBucket> open;  // one per dtype, in order of first appearance
  for (const size_t index : order) {
    const TensorSpec& t = tensors[index];
    auto it = std::find_if(open.begin(), open.end(),
                           [&](const OpenBucket& b) { return b.dtype == t.dtype; });
    if (it == open.end()) it = open.insert(open.end(), OpenBucket{.dtype = t.dtype, .indices = {}});
    it->indices.push_back(index);
    it->bytes += t.count * dtype_size(t.dtype);
    if (it->bytes >= limits[it->limit_index]) {
      closed.push_back(std::move(it->indices));
      it->indices.clear();
      it->bytes = 0;
      if (it->limit_index + 1 < limits.size()) ++it->limit_index;
    }
  }
  for (auto& b : open) {
    if (!b.indices.empty()) closed.push_back(std::move(b.indices));
  }
  return closed;
}

}  // namespace

std::vector<std::vector<size_t>> assign_buckets(std::span<const TensorSpec> tensors,
                                                std::span<const size_t> limits) {
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto buckets = assign_in_order(tensors, limits, order);
  // Every bucket is non-empty and its indices ascend, so front() is its smallest.
  std::sort(buckets.begin(), buckets.end(),
            [](const auto& a, const auto& b) { return a.front() < b.front(); });
  return buckets;
}

std::vector<std::vector<size_t>> assign_buckets(std::span<const TensorSpec> tensors,
                                                std::span<const size_t> limits,
                                                std::span<const size_t> order) {
  std::vector<bool> seen(tensors.size(), false);
  bool permutation = order.size() == tensors.size();
  for (size_t i = 0; permutation && i < order.size(); ++i) {
    permutation = order[i] < tensors.size() && !seen[order[i]];
    if (permutation) seen[order[i]] = true;
  }
  if (!permutation) {
    throw std::invalid_argument(
        "ccl::training::assign_buckets: order is not a permutation of the " +
        std::to_string(tensors.size()) + " tensor indices");
  }
  return assign_in_order(tensors, limits, order);
}

}  // namespace ccl::training
