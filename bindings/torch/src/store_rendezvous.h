// A ccl communicator made through the c10d::Store that torch.distributed hands a backend: rank 0
// makes the unique id (cclGetUniqueId) and publishes it, the others read it; init_process_group's
// timeout becomes the communicator's timeout (every ccl wait is bounded by it).
#pragma once

#include <chrono>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "ccl/ccl.h"

namespace ccl_torch {

// Every rank of the group calls it once per process group it makes. The store may have served
// earlier groups under the same prefix (a test that initializes twice): each call takes a fresh
// key, numbered by an atomic counter every rank increments.
cclComm_t make_comm(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                    std::chrono::milliseconds timeout);

}  // namespace ccl_torch
