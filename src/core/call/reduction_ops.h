// A communicator's reduction operations: the 5 built-in ones, and the PreMulSum operations made
// by cclRedOpCreatePreMulSum (NCCL's scheme: each rank multiplies its own input by its own scalar,
// then the results are summed). Created ops get handles cclNumOps, cclNumOps+1, ...; a destroyed
// handle is reused by a later create, as NCCL does.
#pragma once

#include <array>
#include <cstddef>
#include <mutex>
#include <vector>

#include "algorithms/executor.h"
#include "algorithms/reduce/reduce.h"
#include "ccl/ccl.h"

namespace ccl {

// How one operation reduces: the executor's op, and for PreMulSum the scaling of the own input
// that comes first.
struct Reduction {
  algo::ExecOp exec;
  reduce::ScaleFn scale = nullptr;  // nullptr: no pre-multiplication
  std::array<std::byte, 8> scalar{};
};

class ReductionOps {
 public:
  // residence 0: the scalar is read now; 1: `scalar` is a pointer read at every operation (host
  // memory here; NCCL's device-resident scalar).
  cclRedOp_t create_premul_sum(const void* scalar, cclDataType_t type, int residence);
  void destroy(cclRedOp_t op);  // InvalidArgument for a built-in or unknown op
  // Throws InvalidArgument naming `function` if `op` cannot reduce `type` on this communicator.
  void check(cclRedOp_t op, cclDataType_t type, const char* function) const;
  Reduction resolve(cclRedOp_t op, cclDataType_t type, int nranks) const;

 private:
  struct PreMulSum {
    bool live = false;
    cclDataType_t type = cclFloat32;
    const void* pointer = nullptr;  // residence 1
    std::array<std::byte, 8> value{};
  };
  const PreMulSum* find(cclRedOp_t op) const;  // nullptr if not a live PreMulSum op

  mutable std::mutex mutex_;
  std::vector<PreMulSum> ops_;  // index op - cclNumOps
};

}  // namespace ccl
