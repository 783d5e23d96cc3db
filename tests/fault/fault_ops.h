// The mixed loop of the fault tests: one pass runs allreduces of four sizes (8 B to about 1 MiB),
// a broadcast, an allgather, a reducescatter, an alltoall, a barrier and a grouped send/recv
// ring, each with inputs that depend on the rank and the pass, and each result checked exactly
// (int32 sums), so that a rank that resumes after SIGSTOP or keeps running after a peer's death
// cannot pass off stale or half-written data as a success.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ccl/ccl.h"

namespace ccl::fault {

class Op {
 public:
  virtual ~Op() = default;
  virtual const char* name() const = 0;
  // Fills the inputs for pass `iter` and poisons every output element.
  virtual void prepare(uint64_t iter) = 0;
  // Issues the operation on `stream` (nullptr: returns when complete).
  virtual cclResult_t issue(cclComm_t comm, cclStream_t stream) = 0;
  // "" when every output element is as expected, else the first difference and how many.
  virtual std::string verify() const = 0;
};

// One pass of the loop, in the order every rank issues it.
std::vector<std::unique_ptr<Op>> make_mixed_ops(int rank, int nranks);

}  // namespace ccl::fault
