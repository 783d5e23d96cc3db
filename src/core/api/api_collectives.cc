// Collectives: arguments are checked here, synchronously (so errors come from the call that has
// them), then the operation runs now (NULL stream) or is queued on the stream.
#include <cstdint>
#include <memory>
#include <numeric>
#include <span>
#include <vector>

#include "algorithms/reduce/reduce.h"
#include "base/error.h"
#include "core/api/api_guard.h"
#include "core/api/group.h"
#include "core/call/call.h"
#include "core/stream/stream.h"

using namespace ccl;

namespace {

cclStream* checked_stream(cclStream* stream, const char* function) {
  if (stream != nullptr && stream->magic != cclStream::kMagic) {
    throw_error(cclInvalidArgument, "%s: stream is not a valid cclStream_t", function);
  }
  return stream;
}

// Checks the communicator, the stream and the call's own arguments (`validate`, which may fill
// in the call's v-counts) in one pass, then runs `call` now (NULL stream), queues it on `stream`
// with a reference to the communicator, or adds it to the open group. On a ccl stream made from a
// CUDA stream, a call the communicator runs on the device (device buffers on a host's device
// world) is queued on the CUDA stream at once instead (enqueue-only: no host work, no host wait).
template <class Validate>
cclResult_t submit(cclComm* handle, cclStream* stream, Validate validate, Call call) {
  const char* function = call.function;
  const bool in_group = group::active();
  cclResult_t checked = guarded(handle, function, [&] {
    validate(checked_comm(handle, function), call);
    checked_stream(stream, function);
    if (in_group) group::add_collective(handle->impl, stream, std::move(call));
  });
  if (checked != cclSuccess || in_group) return checked;
  if (stream != nullptr && stream->on_cuda()) {
    bool queued = false;
    const cclResult_t result = guarded(handle->impl.get(), function, [&] {
      queued = group::queue_device(stream, handle->impl, call);
    });
    if (result != cclSuccess || queued) return result;
  }
  // On the NULL stream the call holds a reference too: cclCommAbort from another thread releases
  // it with an error and must not free the communicator under it.
  if (stream == nullptr) {
    std::shared_ptr<Communicator> comm = handle->impl;
    if (!comm->blocking()) {
      // Non-blocking: queued in order on the communicator's own queue; the caller polls
      // cclCommGetAsyncError until it is no longer cclInProgress.
      const cclResult_t queued =
          guarded(comm.get(), function, [&] { comm->enqueue_background(std::move(call)); });
      return queued == cclSuccess ? cclInProgress : queued;
    }
    return comm->run_calls({&call, 1});
  }
  return guarded(handle->impl.get(), function,
                 [&] { group::queue_on_stream(stream, handle->impl, std::move(call)); });
}

// A send or receive: checked, then added to the open group, or run as a group of its own.
cclResult_t point_to_point(bool send, const void* buffer, size_t count, cclDataType_t datatype,
                           int peer, cclComm* handle, cclStream* stream, const char* function) {
  cclResult_t checked = guarded(handle, function, [&] {
    Communicator& c = checked_comm(handle, function);
    check_datatype(datatype, function);
    check_count(count, datatype, function);
    check_buffer(buffer, send ? "sendbuff" : "recvbuff", count, function);
    check_rank(peer, c.nranks(), "peer", function);
    checked_stream(stream, function);
  });
  if (checked != cclSuccess) return checked;
  const bool own_group = !group::active();
  if (own_group) group::start();
  algo::PointToPoint op{send, peer, count * reduce::datatype_size(datatype)};
  cclResult_t added = guarded(handle, function, [&] {
    group::add_point_to_point(handle->impl, stream, function, op,
                              static_cast<std::byte*>(const_cast<void*>(buffer)));
  });
  if (!own_group) return added;
  cclResult_t ended = group::end();
  return added != cclSuccess ? added : ended;
}

// Appends a copy of the caller's nranks entries of `values` to the call's v-counts
// (Call::extents, checked by check_extents): with a stream or in a group the operation runs after
// the call returns, and the caller's arrays need not outlive the call.
void append_counts(Call& call, const size_t* values, int nranks, const char* name,
                   const char* function) {
  if (values == nullptr) throw_error(cclInvalidArgument, "%s: %s is NULL", function, name);
  std::vector<size_t>& extents = call.own_lists().extents;
  extents.insert(extents.end(), values, values + nranks);
}

size_t total(std::span<const size_t> counts) {
  return std::accumulate(counts.begin(), counts.end(), size_t{0});
}

// Every (count, displacement) pair addresses memory without overflowing.
void check_extents(std::span<const size_t> counts, std::span<const size_t> displs,
                   cclDataType_t type, const char* counts_name, const char* displs_name,
                   const char* function) {
  const size_t limit = SIZE_MAX / reduce::datatype_size(type) / 2;
  for (size_t q = 0; q < counts.size(); ++q) {
    if (counts[q] > limit || displs[q] > limit - counts[q]) {
      throw_error(cclInvalidArgument, "%s: %s[%zu] = %zu with %s[%zu] = %zu is too large", function,
                  counts_name, q, counts[q], displs_name, q, displs[q]);
    }
  }
}

}  // namespace

extern "C" {

cclResult_t cclAllReduce(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t datatype,
                         cclRedOp_t op, cclComm_t comm, cclStream_t stream) {
  const char* fn = "cclAllReduce";
  return submit(
      comm, stream,
      [&](Communicator& c, Call&) {
        check_datatype(datatype, fn);
        check_op(c, op, datatype, fn);
        check_count(count, datatype, fn);
        check_buffer(sendbuff, "sendbuff", count, fn);
        check_buffer(recvbuff, "recvbuff", count, fn);
      },
      make_call(OpKind::AllReduce, fn, sendbuff, recvbuff, count, datatype, op));
}

cclResult_t cclBroadcast(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t datatype,
                         int root, cclComm_t comm, cclStream_t stream) {
  const char* fn = "cclBroadcast";
  return submit(
      comm, stream,
      [&](Communicator& c, Call&) {
        check_datatype(datatype, fn);
        check_count(count, datatype, fn);
        check_rank(root, c.nranks(), "root", fn);
        if (c.rank() == root) check_buffer(sendbuff, "sendbuff", count, fn);
        check_buffer(recvbuff, "recvbuff", count, fn);
      },
      make_call(OpKind::Broadcast, fn, sendbuff, recvbuff, count, datatype, cclSum, root));
}

cclResult_t cclBarrier(cclComm_t comm, cclStream_t stream) {
  return submit(
      comm, stream, [](Communicator&, Call&) {},
      make_call(OpKind::Barrier, "cclBarrier", nullptr, nullptr, 0, cclUint8));
}

cclResult_t cclReduce(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t datatype,
                      cclRedOp_t op, int root, cclComm_t comm, cclStream_t stream) {
  const char* fn = "cclReduce";
  return submit(
      comm, stream,
      [&](Communicator& c, Call&) {
        check_datatype(datatype, fn);
        check_op(c, op, datatype, fn);
        check_count(count, datatype, fn);
        check_rank(root, c.nranks(), "root", fn);
        check_buffer(sendbuff, "sendbuff", count, fn);
        if (c.rank() == root) check_buffer(recvbuff, "recvbuff", count, fn);
      },
      make_call(OpKind::Reduce, fn, sendbuff, recvbuff, count, datatype, op, root));
}

cclResult_t cclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                         cclDataType_t datatype, cclComm_t comm, cclStream_t stream) {
  const char* fn = "cclAllGather";
  return submit(
      comm, stream,
      [&](Communicator& c, Call&) {
        check_datatype(datatype, fn);
        check_count(sendcount * c.nranks(), datatype, fn);
        check_buffer(sendbuff, "sendbuff", sendcount, fn);
        check_buffer(recvbuff, "recvbuff", sendcount, fn);
      },
      make_call(OpKind::AllGather, fn, sendbuff, recvbuff, sendcount, datatype));
}

cclResult_t cclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                             cclDataType_t datatype, cclRedOp_t op, cclComm_t comm,
                             cclStream_t stream) {
  const char* fn = "cclReduceScatter";
  return submit(
      comm, stream,
      [&](Communicator& c, Call&) {
        check_datatype(datatype, fn);
        check_op(c, op, datatype, fn);
        check_count(recvcount * c.nranks(), datatype, fn);
        check_buffer(sendbuff, "sendbuff", recvcount, fn);
        check_buffer(recvbuff, "recvbuff", recvcount, fn);
      },
      make_call(OpKind::ReduceScatter, fn, sendbuff, recvbuff, recvcount, datatype, op));
}

cclResult_t cclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t datatype,
                        cclComm_t comm, cclStream_t stream) {
  const char* fn = "cclAlltoAll";
  return submit(
      comm, stream,
      [&](Communicator& c, Call&) {
        check_datatype(datatype, fn);
        check_count(count * c.nranks(), datatype, fn);
        check_buffer(sendbuff, "sendbuff", count, fn);
        check_buffer(recvbuff, "recvbuff", count, fn);
      },
      make_call(OpKind::AlltoAll, fn, sendbuff, recvbuff, count, datatype));
}

cclResult_t cclAllGatherV(const void* sendbuff, size_t sendcount, void* recvbuff,
                          const size_t* recvcounts, const size_t* displs, cclDataType_t datatype,
                          cclComm_t comm, cclStream_t stream) {
  const char* fn = "cclAllGatherV";
  return submit(
      comm, stream,
      [&](Communicator& c, Call& call) {
        check_datatype(datatype, fn);
        append_counts(call, recvcounts, c.nranks(), "recvcounts", fn);
        append_counts(call, displs, c.nranks(), "displs", fn);
        const std::span<const size_t> counts = call.counts();
        if (counts[c.rank()] != sendcount) {
          throw_error(cclInvalidArgument, "%s: recvcounts[%d] is %zu but sendcount is %zu", fn,
                      c.rank(), counts[c.rank()], sendcount);
        }
        check_extents(counts, call.displs(), datatype, "recvcounts", "displs", fn);
        check_buffer(sendbuff, "sendbuff", sendcount, fn);
        check_buffer(recvbuff, "recvbuff", total(counts), fn);
      },
      make_call(OpKind::AllGatherV, fn, sendbuff, recvbuff, 0, datatype));
}

cclResult_t cclAlltoAllV(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls,
                         void* recvbuff, const size_t* recvcounts, const size_t* rdispls,
                         cclDataType_t datatype, cclComm_t comm, cclStream_t stream) {
  const char* fn = "cclAlltoAllV";
  return submit(
      comm, stream,
      [&](Communicator& c, Call& call) {
        check_datatype(datatype, fn);
        append_counts(call, sendcounts, c.nranks(), "sendcounts", fn);
        append_counts(call, sdispls, c.nranks(), "sdispls", fn);
        append_counts(call, recvcounts, c.nranks(), "recvcounts", fn);
        append_counts(call, rdispls, c.nranks(), "rdispls", fn);
        check_extents(call.counts(), call.displs(), datatype, "sendcounts", "sdispls", fn);
        check_extents(call.recvcounts(), call.rdispls(), datatype, "recvcounts", "rdispls", fn);
        check_buffer(sendbuff, "sendbuff", total(call.counts()), fn);
        check_buffer(recvbuff, "recvbuff", total(call.recvcounts()), fn);
      },
      make_call(OpKind::AlltoAllV, fn, sendbuff, recvbuff, 0, datatype));
}

cclResult_t cclSend(const void* sendbuff, size_t count, cclDataType_t datatype, int peer,
                    cclComm_t comm, cclStream_t stream) {
  return point_to_point(true, sendbuff, count, datatype, peer, comm, stream, "cclSend");
}

cclResult_t cclRecv(void* recvbuff, size_t count, cclDataType_t datatype, int peer, cclComm_t comm,
                    cclStream_t stream) {
  return point_to_point(false, recvbuff, count, datatype, peer, comm, stream, "cclRecv");
}

cclResult_t cclRecvAnySource(void* recvbuff, size_t count, cclDataType_t datatype, int* peer,
                             cclComm_t comm, cclStream_t stream) {
  const char* fn = "cclRecvAnySource";
  return guarded(comm, fn, [&] {
    checked_comm(comm, fn);
    check_datatype(datatype, fn);
    check_count(count, datatype, fn);
    check_buffer(recvbuff, "recvbuff", count, fn);
    checked_stream(stream, fn);
    if (peer == nullptr) throw_error(cclInvalidArgument, "%s: peer is NULL", fn);
    if (count == 0) {
      throw_error(cclInvalidArgument,
                  "%s: count is 0; an empty send sends nothing, so there is no message to match",
                  fn);
    }
    if (group::active()) {
      throw_error(cclInvalidUsage,
                  "%s: inside a group; a receive from any source cannot be matched with the "
                  "group's other operations (call it outside cclGroupStart/cclGroupEnd)",
                  fn);
    }
    // A reference of its own: cclCommAbort from another thread may drop the handle's.
    const std::shared_ptr<Communicator> hold = comm->impl;
    *peer = hold->receive_from_any(static_cast<std::byte*>(recvbuff),
                                   count * reduce::datatype_size(datatype));
  });
}

cclResult_t cclGroupStart(void) {
  group::start();
  return cclSuccess;
}

cclResult_t cclGroupEnd(void) { return group::end(); }

}  // extern "C"
