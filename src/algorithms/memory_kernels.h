// Memory kinds and the one table of data kernels per kind (docs/design-notes.md, "Memory kinds
// and registration").
//
// Every buffer of a call has a kind (base/memory_kind.h), resolved once per call by the
// communicator (core/call/call_memory.h): plain host memory, or host memory from cclMemAlloc (the
// other ranks of the host can map it). Later, CUDA device memory gets its own row, with
// device copies and reduction kernels. Everything the executor and the direct collectives copy,
// move, reduce, divide or scale goes through the row of the call's kind: neither calls memcpy or
// memmove of its own (tests/layering/check_kernels.py checks), so a new kind is one new row.
// The host rows share the per-ISA reduction tables of algorithms/reduce/ (the seam for them).
#pragma once

#include <cstddef>
#include <cstdint>

#include "algorithms/reduce/reduce.h"
#include "base/memory_kind.h"
#include "ccl/ccl.h"

namespace ccl::algo {

using ccl::kNumMemoryKinds;
using ccl::memory_kind_name;
using ccl::MemoryKind;

struct MemoryKernels {
  MemoryKind kind;
  void (*copy)(void* dst, const void* src, size_t bytes);  // no overlap
  void (*move)(void* dst, const void* src, size_t bytes);  // may overlap
  reduce::ReduceFn (*reduce)(cclDataType_t type, cclRedOp_t op);
  reduce::DivideFn (*divide)(cclDataType_t type);
  reduce::ScaleFn (*scale)(cclDataType_t type);
};

// The row of `kind`, or nullptr where this build has none (CudaDevice).
const MemoryKernels* kernels_for(MemoryKind kind);
// The row of a call whose buffers have kinds `a` and `b` (the one that can reach both), or
// nullptr if none can. Two host kinds: the host row.
const MemoryKernels* kernels_for(MemoryKind a, MemoryKind b);

}  // namespace ccl::algo
