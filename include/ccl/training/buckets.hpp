/**
 * @file training/buckets.hpp
 * @brief Gradient bucket assignment, exactly as PyTorch's DDP assigns buckets.
 *
 * Part of the training layer (`#include <ccl/training.hpp>`, in libccl).
 */
#ifndef CCL_TRAINING_BUCKETS_HPP_
#define CCL_TRAINING_BUCKETS_HPP_

#include <cstddef>
#include <span>
#include <vector>

#include "../ccl.h"

namespace ccl::training {

/// One tensor of a model as the training layer sees it: how many elements, of which type.
struct TensorSpec {
  size_t count;
  cclDataType_t dtype;
};

/// Bytes of one element of `dtype`; throws std::invalid_argument for a value outside cclDataType_t.
size_t dtype_size(cclDataType_t dtype);

/**
 * The buckets torch.distributed._compute_bucket_assignment_by_size(tensors, limits) makes: the
 * tensors in index order, one open bucket per dtype; a bucket closes once its bytes reach its
 * limit (the first limit for the first bucket of each dtype, the next limit for the next one, the
 * last limit from then on); the buckets still open at the end close too; buckets are sorted by the
 * smallest index they hold. Each bucket lists tensor indices. `limits` are bytes, at least one;
 * throws std::invalid_argument when it is empty.
 */
std::vector<std::vector<size_t>> assign_buckets(std::span<const TensorSpec> tensors,
                                                std::span<const size_t> limits);

/**
 * The same with the tensors taken in `order` (a permutation of their indices, e.g. the order
 * their gradients became ready), as torch does when it rebuilds DDP's buckets: the buckets keep
 * the order in which they closed (first those that reached their limit, then the open ones by
 * dtype in order of first appearance) and are not sorted. Throws std::invalid_argument when
 * `order` is not a permutation of [0, tensors.size()).
 */
std::vector<std::vector<size_t>> assign_buckets(std::span<const TensorSpec> tensors,
                                                std::span<const size_t> limits,
                                                std::span<const size_t> order);

}  // namespace ccl::training

#endif  // CCL_TRAINING_BUCKETS_HPP_
