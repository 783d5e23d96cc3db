// CCL_CHECK_MODE=1: before each collective the ranks exchange what they are about to call and
// compare, so that mismatched calls (another collective, count, datatype, op or root) fail every
// rank with InvalidUsage naming the ranks and the fields, instead of hanging or corrupting data.
// This file is the pure part: what an operation is, and the comparison.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace ccl {

enum class OpKind : uint32_t {
  AllReduce,
  Broadcast,
  Reduce,
  AllGather,
  AllGatherV,
  ReduceScatter,
  AlltoAll,
  AlltoAllV,
  Barrier,
  SendRecv,
};
const char* op_kind_name(OpKind kind);  // "allreduce", ... (static strings)

// What a rank calls: every field must agree across ranks (-1: the field does not apply).
struct OpInfo {
  OpKind kind = OpKind::Barrier;
  size_t count = 0;  // as the caller passed it (allgatherv: the total; alltoallv: not compared)
  int datatype = -1;
  int op = -1;
  int root = -1;
  int peer = -1;  // send/recv only; not compared (point-to-point is not collective)
};

// The fixed-size record the ranks exchange (an allgather of 32 bytes each).
struct OpDescriptor {
  uint64_t index;  // this communicator's collective number, from 1
  uint32_t kind;
  int32_t datatype;
  int32_t op;
  int32_t root;
  uint64_t count;
};
static_assert(sizeof(OpDescriptor) == 32);

OpDescriptor describe(const OpInfo& info, uint64_t index);

// Empty when all ranks' descriptors agree; else a message naming, for each group of ranks that
// agree among themselves, what they called, and how each group differs from rank 0's.
std::string mismatch_message(std::span<const OpDescriptor> all);

}  // namespace ccl
