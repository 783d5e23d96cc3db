// One collective call as the device path sees it (DESIGN.md "an operation is a value"): what it
// is, its buffers and counts as the caller passed them. The C layer builds one per call, so that
// a call on a CUDA stream is queued on that stream at once (device_world.h), and so do the
// communicator's collectives for the calls that run on the host's side (the NULL stream, a ccl
// stream of host work). The spans point into the caller's storage, alive for the call.
#pragma once

#include <cstddef>
#include <span>

#include "algorithms/point_to_point.h"
#include "ccl/ccl.h"
#include "core/diagnostics/op_check.h"

namespace ccl {

struct DeviceCall {
  OpKind kind = OpKind::Barrier;
  const char* function = "";
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  size_t count = 0;  // elements: as the C call's count argument
  cclDataType_t type = cclUint8;
  cclRedOp_t op = cclSum;
  int root = -1;
  // allgatherv: counts, displs; alltoallv: sendcounts, sdispls, recvcounts, rdispls.
  std::span<const size_t> counts, displs, recvcounts, rdispls;
  // A group's sends and receives and their buffers.
  std::span<const algo::PointToPoint> p2p;
  std::span<std::byte* const> buffers;
};

// A call without v-counts or a group's operations.
inline DeviceCall device_call(OpKind kind, const char* function, const void* sendbuff,
                              void* recvbuff, size_t count, cclDataType_t type,
                              cclRedOp_t op = cclSum, int root = -1) {
  DeviceCall c;
  c.kind = kind;
  c.function = function;
  c.sendbuff = sendbuff;
  c.recvbuff = recvbuff;
  c.count = count;
  c.type = type;
  c.op = op;
  c.root = root;
  return c;
}

}  // namespace ccl
