// One call of the C API as a value (docs/design-notes.md "A call, end to end"): what it is, its
// buffers, count, type, op and root, or a group's sends and receives, as the caller passed them.
//
// The entry point (core/api/) builds one per call once its arguments are checked, and from there
// it travels as data: into a group's part (api/group.h), a stream's queue or a non-blocking
// communicator's queue (stream/stream_work.h), to the communicator (Communicator::run), and on to
// its device path (device/device_plan.h) or its host path (planner, op runner, executor). Queues
// hold calls, not closures, so whatever looks at the queue (a debugger, the trace, the flight
// recorder) sees what is waiting. What is not known when the call is made is added where it is
// learned: its buffers' memory kinds when it runs (call_memory.h), its sequence number when the
// op runner starts it (flight recorder, trace), its communicator and stream by the queue item
// that holds it.
//
// A call owns its v-counts and its group's operation list (it may run after the C call
// returned); the buffers stay the caller's, alive until the operation completes (NCCL's rule).
// A call is moved, never copied.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "algorithms/point_to_point.h"
#include "ccl/ccl.h"
#include "core/diagnostics/op_check.h"

namespace ccl {

struct Call {
  OpKind kind = OpKind::Barrier;
  const char* function = "";  // the C entry point, for messages: "cclAllReduce"
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  size_t count = 0;  // elements, as the C call's count argument (0 for v-calls and send/recv)
  cclDataType_t type = cclUint8;
  cclRedOp_t op = cclSum;
  int root = -1;

  // What only some calls have, owned. Null for the other calls: making, queueing and running a
  // plain collective allocates nothing, and its Call is 64 bytes.
  struct Lists {
    // allgatherv: counts, displs; alltoallv: sendcounts, sdispls, recvcounts, rdispls; nranks
    // entries each, one array after the other.
    std::vector<size_t> extents;
    // A group's sends and receives (kind SendRecv): p2p[i] moves buffers[i].
    std::vector<algo::PointToPoint> p2p;
    std::vector<std::byte*> buffers;
  };
  std::unique_ptr<Lists> lists;

  // The lists, made on first use.
  Lists& own_lists() {
    if (!lists) lists = std::make_unique<Lists>();
    return *lists;
  }
  // The v-counts: allgatherv's counts and displs; alltoallv's sendcounts and sdispls, then
  // recvcounts and rdispls. Empty for the other calls.
  std::span<const size_t> counts() const { return extent(0); }
  std::span<const size_t> displs() const { return extent(1); }
  std::span<const size_t> recvcounts() const { return extent(2); }
  std::span<const size_t> rdispls() const { return extent(3); }
  // A group's sends and receives, and their buffers.
  std::span<const algo::PointToPoint> p2p() const {
    return lists ? std::span<const algo::PointToPoint>(lists->p2p)
                 : std::span<const algo::PointToPoint>();
  }
  std::span<std::byte* const> buffers() const {
    return lists ? std::span<std::byte* const>(lists->buffers) : std::span<std::byte* const>();
  }

 private:
  std::span<const size_t> extent(size_t index) const {
    if (!lists) return {};
    const size_t arrays = kind == OpKind::AlltoAllV ? 4 : 2;
    const size_t n = lists->extents.size() / arrays;
    if (index >= arrays || n == 0) return {};
    return {lists->extents.data() + index * n, n};
  }
};

// A call without v-counts or a group's operations.
inline Call make_call(OpKind kind, const char* function, const void* sendbuff, void* recvbuff,
                      size_t count, cclDataType_t type, cclRedOp_t op = cclSum, int root = -1) {
  Call c;
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
