/**
 * @file training.hpp
 * @brief ccl's training layer: DDP bucketing with overlap, pipeline schedules, gradient
 * compression with error feedback, LAMB and LARS, a tp × pp × dp device mesh. Part of libccl
 * (link ccl, or ccl::ccl_training).
 *
 * It stands on the public C++ API (ccl.hpp) only, so any C++ trainer can use it, and ccl_torch
 * reaches it from PyTorch (ccl_torch.hooks, ccl_torch.optim).
 */
#ifndef CCL_TRAINING_HPP_
#define CCL_TRAINING_HPP_

#include "training/buckets.hpp"
#include "training/compression.hpp"
#include "training/mesh.hpp"
#include "training/optim.hpp"
#include "training/pipeline.hpp"
#include "training/reducer.hpp"
#include "training/tensor_parallel.hpp"
#include "training/zero.hpp"

#endif  // CCL_TRAINING_HPP_
