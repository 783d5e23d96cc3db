// The one place that knows how the torch versions ccl_torch builds against differ (2.9 and later;
// read from each release's c10d/Backend.hpp). Every difference is a compile-time switch here:
//   CCL_TORCH_HAS_SHRINK            Backend::supportsShrinking/shrink,
//   torch.distributed.shrink_group
//                                   (2.10)
//   OpType::REDUCE_SCATTER_TENSOR_COALESCED (2.12), ALLGATHER_INTO_TENSOR_COALESCED (2.14): the
//                                   work types of the tensor-coalesced collectives (before them,
//                                   COALESCED): kReduceScatterTensorCoalesced,
//                                   kAllgatherIntoTensorCoalesced below
//   CCL_TORCH_HAS_TORCHCOMMS_NAMES  all_gather_single, reduce_scatter_single, all_to_all_single and
//                                   their _coalesced forms as Backend methods, each forwarding to
//                                   the older name (_allgather_base, ...) by default (2.14; its
//                                   Backend.hpp defines C10D_BACKEND_FORWARDING_GUARD for them)
// A torch older than 2.9 is not refused here: what it lacks (a method this backend overrides)
// shows as a compile error naming it.
#pragma once

#include <torch/csrc/api/include/torch/version.h>

#include <torch/csrc/distributed/c10d/Backend.hpp>

#define CCL_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||      \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

#define CCL_TORCH_HAS_SHRINK CCL_TORCH_AT_LEAST(2, 10)

#ifdef C10D_BACKEND_FORWARDING_GUARD
#define CCL_TORCH_HAS_TORCHCOMMS_NAMES 1
#else
#define CCL_TORCH_HAS_TORCHCOMMS_NAMES 0
#endif

namespace ccl_torch {

#if CCL_TORCH_AT_LEAST(2, 12)
inline constexpr c10d::OpType kReduceScatterTensorCoalesced =
    c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED;
#else
inline constexpr c10d::OpType kReduceScatterTensorCoalesced = c10d::OpType::COALESCED;
#endif
#if CCL_TORCH_AT_LEAST(2, 14)
inline constexpr c10d::OpType kAllgatherIntoTensorCoalesced =
    c10d::OpType::ALLGATHER_INTO_TENSOR_COALESCED;
#else
inline constexpr c10d::OpType kAllgatherIntoTensorCoalesced = c10d::OpType::COALESCED;
#endif

}  // namespace ccl_torch
