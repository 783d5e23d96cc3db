// Collectives: arguments are checked here, synchronously (so errors come from the call that has
// them), then the operation runs now (NULL stream) or is queued on the stream.
#include "algorithms/reduce/reduce.h"
#include "core/api_guard.h"
#include "core/error.h"
#include "core/stream.h"

using namespace ccl;

namespace {

cclStream* checked_stream(cclStream* stream, const char* function) {
  if (stream != nullptr && stream->magic != cclStream::kMagic) {
    throw_error(cclInvalidArgument, "%s: stream is not a valid cclStream_t", function);
  }
  return stream;
}

// Checks the communicator, the stream and the call's own arguments (`validate`) in one pass, then
// runs `op(communicator)` now, or queues it on `stream` holding a reference to the communicator.
template <class Validate, class Op>
cclResult_t submit(cclComm* handle, cclStream* stream, const char* function, Validate validate,
                   Op op) {
  cclResult_t checked = guarded(handle, function, [&] {
    validate(checked_comm(handle, function));
    checked_stream(stream, function);
  });
  if (checked != cclSuccess) return checked;
  // On the NULL stream the caller's handle keeps the communicator alive for the call (destroying
  // it meanwhile is the caller's error): no reference to take, which costs two atomic operations.
  if (stream == nullptr) return guarded(handle->impl.get(), function, [&] { op(*handle->impl); });
  std::shared_ptr<Communicator> comm = handle->impl;
  stream->enqueue(
      [comm, function, op]() { return guarded(comm.get(), function, [&] { op(*comm); }); });
  return cclSuccess;
}

cclResult_t not_implemented(const char* function) {
  return guarded(kNoComm, function,
                 [&] { throw_error(cclInvalidUsage, "%s is not implemented yet", function); });
}

}  // namespace

extern "C" {

cclResult_t cclAllReduce(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t datatype,
                         cclRedOp_t op, cclComm_t comm, cclStream_t stream) {
  const char* fn = "cclAllReduce";
  return submit(
      comm, stream, fn,
      [&](Communicator&) {
        check_datatype(datatype, fn);
        check_op(op, fn);
        check_count(count, datatype, fn);
        check_buffer(sendbuff, "sendbuff", count, fn);
        check_buffer(recvbuff, "recvbuff", count, fn);
      },
      [=](Communicator& c) { c.all_reduce(sendbuff, recvbuff, count, datatype, op); });
}

cclResult_t cclBroadcast(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t datatype,
                         int root, cclComm_t comm, cclStream_t stream) {
  const char* fn = "cclBroadcast";
  return submit(
      comm, stream, fn,
      [&](Communicator& c) {
        check_datatype(datatype, fn);
        check_count(count, datatype, fn);
        check_rank(root, c.nranks(), "root", fn);
        if (c.rank() == root) check_buffer(sendbuff, "sendbuff", count, fn);
        check_buffer(recvbuff, "recvbuff", count, fn);
      },
      [=](Communicator& c) { c.broadcast(sendbuff, recvbuff, count, datatype, root); });
}

cclResult_t cclBarrier(cclComm_t comm, cclStream_t stream) {
  return submit(
      comm, stream, "cclBarrier", [](Communicator&) {}, [](Communicator& c) { c.barrier(); });
}

// Implemented by the collective-set issue; until then they say so.
cclResult_t cclReduce(const void*, void*, size_t, cclDataType_t, cclRedOp_t, int, cclComm_t,
                      cclStream_t) {
  return not_implemented("cclReduce");
}
cclResult_t cclAllGather(const void*, void*, size_t, cclDataType_t, cclComm_t, cclStream_t) {
  return not_implemented("cclAllGather");
}
cclResult_t cclReduceScatter(const void*, void*, size_t, cclDataType_t, cclRedOp_t, cclComm_t,
                             cclStream_t) {
  return not_implemented("cclReduceScatter");
}
cclResult_t cclAlltoAll(const void*, void*, size_t, cclDataType_t, cclComm_t, cclStream_t) {
  return not_implemented("cclAlltoAll");
}
cclResult_t cclSend(const void*, size_t, cclDataType_t, int, cclComm_t, cclStream_t) {
  return not_implemented("cclSend");
}
cclResult_t cclRecv(void*, size_t, cclDataType_t, int, cclComm_t, cclStream_t) {
  return not_implemented("cclRecv");
}
cclResult_t cclGroupStart(void) { return not_implemented("cclGroupStart"); }
cclResult_t cclGroupEnd(void) { return not_implemented("cclGroupEnd"); }
cclResult_t cclCommSplit(cclComm_t, int, int, cclComm_t*, cclConfig_t*) {
  return not_implemented("cclCommSplit");
}
cclResult_t cclCommFinalize(cclComm_t) { return not_implemented("cclCommFinalize"); }
cclResult_t cclRedOpCreatePreMulSum(cclRedOp_t*, void*, cclDataType_t, int, cclComm_t) {
  return not_implemented("cclRedOpCreatePreMulSum");
}
cclResult_t cclRedOpDestroy(cclRedOp_t, cclComm_t) { return not_implemented("cclRedOpDestroy"); }

}  // extern "C"
