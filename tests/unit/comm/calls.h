// The communicator's collectives as the tests call them: each builds the Call (call/call.h) the C
// layer would build and runs it on the communicator now, as a NULL-stream call does.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "core/call/call.h"
#include "core/comm/comm.h"

namespace ccl::test {

inline void all_reduce(Communicator& c, const void* in, void* out, size_t count, cclDataType_t type,
                       cclRedOp_t op) {
  c.run(make_call(OpKind::AllReduce, "cclAllReduce", in, out, count, type, op));
}
inline void broadcast(Communicator& c, const void* in, void* out, size_t count, cclDataType_t type,
                      int root) {
  c.run(make_call(OpKind::Broadcast, "cclBroadcast", in, out, count, type, cclSum, root));
}
inline void reduce(Communicator& c, const void* in, void* out, size_t count, cclDataType_t type,
                   cclRedOp_t op, int root) {
  c.run(make_call(OpKind::Reduce, "cclReduce", in, out, count, type, op, root));
}
inline void all_gather(Communicator& c, const void* in, void* out, size_t count,
                       cclDataType_t type) {
  c.run(make_call(OpKind::AllGather, "cclAllGather", in, out, count, type));
}
inline void reduce_scatter(Communicator& c, const void* in, void* out, size_t count,
                           cclDataType_t type, cclRedOp_t op) {
  c.run(make_call(OpKind::ReduceScatter, "cclReduceScatter", in, out, count, type, op));
}
inline void all_to_all(Communicator& c, const void* in, void* out, size_t count,
                       cclDataType_t type) {
  c.run(make_call(OpKind::AlltoAll, "cclAlltoAll", in, out, count, type));
}
inline void all_gather_v(Communicator& c, const void* in, void* out, std::span<const size_t> counts,
                         std::span<const size_t> displs, cclDataType_t type) {
  Call call = make_call(OpKind::AllGatherV, "cclAllGatherV", in, out, 0, type);
  std::vector<size_t>& extents = call.own_lists().extents;
  extents.assign(counts.begin(), counts.end());
  extents.insert(extents.end(), displs.begin(), displs.end());
  c.run(call);
}
inline void all_to_all_v(Communicator& c, const void* in, std::span<const size_t> sendcounts,
                         std::span<const size_t> sdispls, void* out,
                         std::span<const size_t> recvcounts, std::span<const size_t> rdispls,
                         cclDataType_t type) {
  Call call = make_call(OpKind::AlltoAllV, "cclAlltoAllV", in, out, 0, type);
  for (std::span<const size_t> a : {sendcounts, sdispls, recvcounts, rdispls}) {
    call.own_lists().extents.insert(call.own_lists().extents.end(), a.begin(), a.end());
  }
  c.run(call);
}
inline void barrier(Communicator& c) {
  c.run(make_call(OpKind::Barrier, "cclBarrier", nullptr, nullptr, 0, cclUint8));
}
inline void point_to_point(Communicator& c, std::span<const algo::PointToPoint> operations,
                           std::span<std::byte* const> buffers) {
  Call call = make_call(OpKind::SendRecv, "cclSend/cclRecv", nullptr, nullptr, 0, cclUint8);
  call.own_lists().p2p.assign(operations.begin(), operations.end());
  call.own_lists().buffers.assign(buffers.begin(), buffers.end());
  c.run(call);
}

}  // namespace ccl::test
