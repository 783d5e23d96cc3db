// NCCL's collectives, point-to-point calls and groups on ccl's. Datatypes and built-in ops have
// the same values in both (ccl.h copies NCCL's); an op from ncclRedOpCreatePreMulSum is ccl's own
// op value. ncclGather and ncclScatter, which ccl's API does not have, are groups of sends and
// receives, as NCCL documents them.
#include <nccl.h>

#include <cstddef>

#include "nccl_shim/shim.h"
#include "nccl_shim/stream_map.h"

using namespace ccl_nccl;

namespace {

cclDataType_t to_ccl(ncclDataType_t type) { return static_cast<cclDataType_t>(type); }
cclRedOp_t to_ccl(ncclRedOp_t op) { return static_cast<cclRedOp_t>(op); }

// Runs `call(comm, stream)` on the ccl communicator and stream of an NCCL call, or returns why
// they cannot be had.
template <class Call>
ncclResult_t with_ccl(ncclComm_t comm, cudaStream_t stream, const char* function, Call call) {
  begin_call();
  ncclResult_t refused = ncclSuccess;
  cclComm_t c = checked_for_operation(comm, function, &refused);
  if (c == nullptr) return refused;
  cclStream_t s = nullptr;
  if (const ncclResult_t r = ccl_stream_for(stream, &s); r != ncclSuccess) return r;
  return from_ccl(call(c, s));
}

// The first failure of a group of calls, which still ends the group it began.
class GroupOfCalls {
 public:
  GroupOfCalls() : result_(cclGroupStart()) {}
  void add(cclResult_t result) {
    if (result_ == cclSuccess) result_ = result;
  }
  cclResult_t end() {
    const cclResult_t ended = cclGroupEnd();
    return result_ != cclSuccess ? result_ : ended;
  }

 private:
  cclResult_t result_;
};

// Gather's and scatter's shared checks: the element size, and a root of the communicator.
bool rooted_arguments(cclComm_t comm, ncclDataType_t type, int root, const char* function,
                      size_t* elem, int* rank, int* nranks) {
  *elem = datatype_size(type);
  if (*elem == 0) {
    fail(ncclInvalidArgument, "%s: datatype %d is not an ncclDataType_t", function,
         static_cast<int>(type));
    return false;
  }
  if (cclCommUserRank(comm, rank) != cclSuccess || cclCommCount(comm, nranks) != cclSuccess) {
    fail(ncclInvalidUsage, "%s: %s", function, cclGetLastError(comm));
    return false;
  }
  if (root < 0 || root >= *nranks) {
    fail(ncclInvalidArgument, "%s: root %d is not a rank of 0..%d", function, root, *nranks - 1);
    return false;
  }
  return true;
}

}  // namespace

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  return with_ccl(comm, stream, "ncclAllReduce", [&](cclComm_t c, cclStream_t s) {
    return cclAllReduce(sendbuff, recvbuff, count, to_ccl(datatype), to_ccl(op), c, s);
  });
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  return with_ccl(comm, stream, "ncclBroadcast", [&](cclComm_t c, cclStream_t s) {
    return cclBroadcast(sendbuff, recvbuff, count, to_ccl(datatype), root, c, s);
  });
}

// The in-place broadcast of NCCL's first API.
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  return with_ccl(comm, stream, "ncclBcast", [&](cclComm_t c, cclStream_t s) {
    return cclBroadcast(buff, buff, count, to_ccl(datatype), root, c, s);
  });
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return with_ccl(comm, stream, "ncclReduce", [&](cclComm_t c, cclStream_t s) {
    return cclReduce(sendbuff, recvbuff, count, to_ccl(datatype), to_ccl(op), root, c, s);
  });
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return with_ccl(comm, stream, "ncclAllGather", [&](cclComm_t c, cclStream_t s) {
    return cclAllGather(sendbuff, recvbuff, sendcount, to_ccl(datatype), c, s);
  });
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  return with_ccl(comm, stream, "ncclReduceScatter", [&](cclComm_t c, cclStream_t s) {
    return cclReduceScatter(sendbuff, recvbuff, recvcount, to_ccl(datatype), to_ccl(op), c, s);
  });
}

ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return with_ccl(comm, stream, "ncclAlltoAll", [&](cclComm_t c, cclStream_t s) {
    return cclAlltoAll(sendbuff, recvbuff, count, to_ccl(datatype), c, s);
  });
}

// Every rank sends `count` elements to the root, which receives rank q's at recvbuff + q * count.
// In place (the root's sendbuff is its own block of recvbuff), the root's block stays where it is.
ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  const char* function = "ncclGather";
  return with_ccl(comm, stream, function, [&](cclComm_t c, cclStream_t s) {
    size_t elem = 0;
    int rank = 0, nranks = 0;
    if (!rooted_arguments(c, datatype, root, function, &elem, &rank, &nranks)) {
      return cclInvalidArgument;
    }
    if (count == 0) return cclSuccess;
    auto* out = static_cast<std::byte*>(recvbuff);
    const size_t block = count * elem;
    const bool in_place = rank == root && sendbuff == out + static_cast<size_t>(root) * block;
    GroupOfCalls group;
    if (!in_place) group.add(cclSend(sendbuff, count, to_ccl(datatype), root, c, s));
    if (rank == root) {
      for (int q = 0; q < nranks; ++q) {
        if (q == root && in_place) continue;
        group.add(cclRecv(out + static_cast<size_t>(q) * block, count, to_ccl(datatype), q, c, s));
      }
    }
    return group.end();
  });
}

// The root sends block q of sendbuff (count elements at sendbuff + q * count) to rank q, which
// receives it into recvbuff. In place (the root's recvbuff is its own block), nothing moves there.
ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  const char* function = "ncclScatter";
  return with_ccl(comm, stream, function, [&](cclComm_t c, cclStream_t s) {
    size_t elem = 0;
    int rank = 0, nranks = 0;
    if (!rooted_arguments(c, datatype, root, function, &elem, &rank, &nranks)) {
      return cclInvalidArgument;
    }
    if (count == 0) return cclSuccess;
    const auto* in = static_cast<const std::byte*>(sendbuff);
    const size_t block = count * elem;
    const bool in_place = rank == root && recvbuff == in + static_cast<size_t>(root) * block;
    GroupOfCalls group;
    if (rank == root) {
      for (int q = 0; q < nranks; ++q) {
        if (q == root && in_place) continue;
        group.add(cclSend(in + static_cast<size_t>(q) * block, count, to_ccl(datatype), q, c, s));
      }
    }
    if (!in_place) group.add(cclRecv(recvbuff, count, to_ccl(datatype), root, c, s));
    return group.end();
  });
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return with_ccl(comm, stream, "ncclSend", [&](cclComm_t c, cclStream_t s) {
    return cclSend(sendbuff, count, to_ccl(datatype), peer, c, s);
  });
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return with_ccl(comm, stream, "ncclRecv", [&](cclComm_t c, cclStream_t s) {
    return cclRecv(recvbuff, count, to_ccl(datatype), peer, c, s);
  });
}

ncclResult_t ncclGroupStart() {
  begin_call();
  return from_ccl(cclGroupStart());
}

ncclResult_t ncclGroupEnd() {
  begin_call();
  return from_ccl(cclGroupEnd());
}

ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t*) {
  begin_call();
  return unsupported("ncclGroupSimulateEnd", "ncclGroupEnd runs the group");
}

CCL_NCCL_PROFILING_ALIAS(ncclAllReduce)
CCL_NCCL_PROFILING_ALIAS(ncclBroadcast)
CCL_NCCL_PROFILING_ALIAS(ncclBcast)
CCL_NCCL_PROFILING_ALIAS(ncclReduce)
CCL_NCCL_PROFILING_ALIAS(ncclAllGather)
CCL_NCCL_PROFILING_ALIAS(ncclReduceScatter)
CCL_NCCL_PROFILING_ALIAS(ncclAlltoAll)
CCL_NCCL_PROFILING_ALIAS(ncclGather)
CCL_NCCL_PROFILING_ALIAS(ncclScatter)
CCL_NCCL_PROFILING_ALIAS(ncclSend)
CCL_NCCL_PROFILING_ALIAS(ncclRecv)
CCL_NCCL_PROFILING_ALIAS(ncclGroupStart)
CCL_NCCL_PROFILING_ALIAS(ncclGroupEnd)
CCL_NCCL_PROFILING_ALIAS(ncclGroupSimulateEnd)
