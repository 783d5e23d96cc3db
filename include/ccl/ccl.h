/*
 * ccl: a collective communication library for host memory and GPUs.
 *
 * This is the C ABI. It mirrors NCCL's (same argument order, same enum values, `ccl` where NCCL
 * says `nccl`), so porting a program is a rename. Every function returns a cclResult_t unless
 * noted; after a failure cclGetLastError(comm) says why, and CCL_DEBUG=WARN logs it.
 *
 * Minimal example (two processes started by `cclrun -np 2 ./a.out`):
 *
 *   cclComm_t comm;
 *   cclCommInitFromEnv(&comm);
 *   float x[4] = {1, 2, 3, 4};
 *   cclAllReduce(x, x, 4, cclFloat32, cclSum, comm, NULL);   // x = {2, 4, 6, 8} on both ranks
 *   cclCommDestroy(comm);
 */
#ifndef CCL_CCL_H_
#define CCL_CCL_H_

#include <limits.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CCL_API __attribute__((visibility("default")))
#else
#define CCL_API
#endif

#define CCL_MAJOR 0
#define CCL_MINOR 1
#define CCL_PATCH 0
/** major*10000 + minor*100 + patch, the value cclGetVersion returns. */
#define CCL_VERSION_CODE (CCL_MAJOR * 10000 + CCL_MINOR * 100 + CCL_PATCH)

#define CCL_UNIQUE_ID_BYTES 128
/** Rendezvous token made by cclGetUniqueId on one rank and handed to all the others. */
typedef struct {
  char internal[CCL_UNIQUE_ID_BYTES];
} cclUniqueId;

typedef struct cclComm* cclComm_t;
/** An in-order queue of host work; NULL means "return when the operation is complete". */
typedef struct cclStream* cclStream_t;

typedef enum {
  cclSuccess = 0,
  cclUnhandledCudaError = 1,
  cclSystemError = 2,
  cclInternalError = 3,
  cclInvalidArgument = 4,
  cclInvalidUsage = 5,
  cclRemoteError = 6,
  cclInProgress = 7,
  cclTimeout = 8,
  cclNumResults = 9
} cclResult_t;

typedef enum {
  cclInt8 = 0,
  cclChar = 0,
  cclUint8 = 1,
  cclInt32 = 2,
  cclInt = 2,
  cclUint32 = 3,
  cclInt64 = 4,
  cclUint64 = 5,
  cclFloat16 = 6,
  cclHalf = 6,
  cclFloat32 = 7,
  cclFloat = 7,
  cclFloat64 = 8,
  cclDouble = 8,
  cclBfloat16 = 9,
  cclFloat8e4m3 = 10,
  cclFloat8e5m2 = 11,
  cclNumTypes = 12
} cclDataType_t;

/** Values >= cclNumOps are operations made by cclRedOpCreatePreMulSum. */
typedef enum {
  cclSum = 0,
  cclProd = 1,
  cclMax = 2,
  cclMin = 3,
  cclAvg = 4,
  cclNumOps = 5,
  cclMaxRedOp = 0x7fffffff
} cclRedOp_t;

/** Color for cclCommSplit that gives the caller no new communicator. */
#define CCL_SPLIT_NOCOLOR -1

#define CCL_CONFIG_UNDEF_INT INT_MIN
#define CCL_CONFIG_UNDEF_PTR NULL
#define CCL_CONFIG_MAGIC 0xcafebeefu

/** Per-communicator settings. Always start from CCL_CONFIG_INITIALIZER. */
typedef struct cclConfig {
  size_t size;      /* set by the initializer: sizeof(cclConfig_t) */
  unsigned magic;   /* set by the initializer: CCL_CONFIG_MAGIC */
  unsigned version; /* set by the initializer: CCL_VERSION_CODE */
  int blocking;     /* 1 (default): calls return when done */
  int timeoutMs;    /* bound on every wait; default CCL_TIMEOUT */
  const char* commName;
} cclConfig_t;

/** Fills size/magic/version and marks every other field unset (library default). */
#define CCL_CONFIG_INITIALIZER                                                     \
  {                                                                                \
    sizeof(cclConfig_t), CCL_CONFIG_MAGIC, CCL_VERSION_CODE, CCL_CONFIG_UNDEF_INT, \
        CCL_CONFIG_UNDEF_INT, CCL_CONFIG_UNDEF_PTR                                 \
  }

/** Writes major*10000 + minor*100 + patch to *version. */
CCL_API cclResult_t cclGetVersion(int* version);
/** A static string naming the result code (never NULL). */
CCL_API const char* cclGetErrorString(cclResult_t result);
/** Human-readable detail of the last failure on comm (or of the calling thread when comm is NULL).
 */
CCL_API const char* cclGetLastError(cclComm_t comm);

/** Makes a rendezvous id; the calling process serves the rendezvous until every rank has joined. */
CCL_API cclResult_t cclGetUniqueId(cclUniqueId* uniqueId);
/** Joins communicator `commId` as `rank` of `nranks`; blocks until every rank has joined. */
CCL_API cclResult_t cclCommInitRank(cclComm_t* comm, int nranks, cclUniqueId commId, int rank);
CCL_API cclResult_t cclCommInitRankConfig(cclComm_t* comm, int nranks, cclUniqueId commId, int rank,
                                          cclConfig_t* config);
/** Rank, size and rendezvous from cclrun, mpirun, Hydra, srun or torchrun variables. */
CCL_API cclResult_t cclCommInitFromEnv(cclComm_t* comm);
CCL_API cclResult_t cclCommSplit(cclComm_t comm, int color, int key, cclComm_t* newcomm,
                                 cclConfig_t* config);

/* Recovering from a failed rank (NCCL 2.27-2.29's names, ULFM's guarantees). These talk over a
 * recovery plane of their own (a listener per process), never over the communicator's transports,
 * so they work on a communicator that lost a rank or was revoked. Each is bounded by the
 * communicator's timeout. */
#define CCL_SHRINK_DEFAULT 0x00 /* every member of the new communicator calls shrink */
#define CCL_SHRINK_ABORT 0x01   /* first abort what is in flight on the parent, then shrink */
/** Every pending and later operation of comm, on every live rank, returns cclRemoteError
 *  promptly (the ranks are told at once, none waits for its timeout); comm can still agree,
 *  shrink, report its failed ranks, and be destroyed. revokeFlags must be 0. */
CCL_API cclResult_t cclCommRevoke(cclComm_t comm, int revokeFlags);
/** Called by every rank of comm not in excludeRanksList (those may be dead). The survivors keep
 *  their order: new rank = old rank minus the excluded ranks below it. With excludeRanksCount 0
 *  and CCL_SHRINK_ABORT the excluded ranks are those the survivors agree have failed. If a rank
 *  that should take part dies during the shrink, every survivor gets cclRemoteError and may call
 *  it again (cclCommGetFailedRanks then names the dead). config NULL: the parent's settings. */
CCL_API cclResult_t cclCommShrink(cclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                                  cclComm_t* newcomm, cclConfig_t* config, int shrinkFlags);
/** A fault-tolerant agreement (as MPIX_Comm_agree): every live rank gets in *flag the bitwise AND
 *  of the flags of the live ranks, and learns the same set of failed ranks, even if ranks die
 *  during the call. */
CCL_API cclResult_t cclCommAgree(cclComm_t comm, int* flag);
/** Writes the ranks comm knows have failed, in increasing order, to ranks[0..capacity) and their
 *  number to *count (which may exceed capacity; ranks may be NULL when capacity is 0). */
CCL_API cclResult_t cclCommGetFailedRanks(cclComm_t comm, int* ranks, int capacity, int* count);
/** Grows a communicator back (as ncclCommGrow): the members of comm call it with rank -1 and keep
 *  their ranks; each newcomer calls it with comm NULL and its rank in [size of comm, nranks). All
 *  meet at uniqueId (from cclGetUniqueId, usually on rank 0 of comm, handed to the newcomers by
 *  the launcher or a store). config NULL: comm's settings (newcomers: the defaults). */
CCL_API cclResult_t cclCommGrow(cclComm_t comm, int nranks, const cclUniqueId* uniqueId, int rank,
                                cclComm_t* newcomm, cclConfig_t* config);

CCL_API cclResult_t cclCommFinalize(cclComm_t comm);
CCL_API cclResult_t cclCommDestroy(cclComm_t comm);
CCL_API cclResult_t cclCommAbort(cclComm_t comm);
CCL_API cclResult_t cclCommGetAsyncError(cclComm_t comm, cclResult_t* asyncError);
CCL_API cclResult_t cclCommCount(const cclComm_t comm, int* count);
CCL_API cclResult_t cclCommUserRank(const cclComm_t comm, int* rank);
/** The transport that carries this rank's messages to `peer`, as a static string ("shm", "tcp",
 *  "ucx", "ib", "loopback"; "self" for the calling rank): what a tool such as ccl-check reports
 *  per pair (the choice is README's "Transports"). */
CCL_API cclResult_t cclCommPeerTransport(const cclComm_t comm, int peer, const char** name);
/** This host's topology as ccl sees it, the text ccl-topo prints (the tree, the links, the path
 *  classes, the ring and tree orders), written NUL-terminated into buf and cut short at size
 *  bytes; *length (if not NULL) gets the whole text's length without the NUL. buf may be NULL
 *  when size is 0, to ask for the length. */
CCL_API cclResult_t cclGetTopologyText(char* buf, size_t size, size_t* length);

/** Host memory that the other ranks of this host can map (as NCCL's ncclMemAlloc): a broadcast
 *  whose buffers lie in it moves each byte once, the copies split over the ranks. Any size > 0;
 *  page aligned. A ccl addition to the core API (docs/api-status.md). */
CCL_API cclResult_t cclMemAlloc(void** ptr, size_t size);
/** Frees memory from cclMemAlloc; cclInvalidArgument for any other pointer. */
CCL_API cclResult_t cclMemFree(void* ptr);

/** Registers [buff, buff + size) with the communicator, as NCCL's ncclCommRegister: the
 *  transports that need registered memory (RDMA) register the enclosing pages once, and every
 *  later call whose buffers lie inside reuses that registration. Registering a range inside one
 *  registered earlier shares it (a reference count). `*handle` goes to cclCommDeregister, which
 *  must come before the memory is freed and while no call uses it. cclInvalidArgument for a NULL
 *  buff or handle, or size 0. A ccl addition to the core API (docs/api-status.md). */
CCL_API cclResult_t cclCommRegister(const cclComm_t comm, void* buff, size_t size, void** handle);
/** Drops the reference `handle` holds; cclInvalidArgument for a handle this communicator did
 *  not give out, or one deregistered already. A ccl addition (docs/api-status.md). */
CCL_API cclResult_t cclCommDeregister(const cclComm_t comm, void* handle);

CCL_API cclResult_t cclRedOpCreatePreMulSum(cclRedOp_t* op, void* scalar, cclDataType_t datatype,
                                            int residence, cclComm_t comm);
CCL_API cclResult_t cclRedOpDestroy(cclRedOp_t op, cclComm_t comm);

CCL_API cclResult_t cclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                 cclDataType_t datatype, cclRedOp_t op, cclComm_t comm,
                                 cclStream_t stream);
CCL_API cclResult_t cclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                 cclDataType_t datatype, int root, cclComm_t comm,
                                 cclStream_t stream);
CCL_API cclResult_t cclReduce(const void* sendbuff, void* recvbuff, size_t count,
                              cclDataType_t datatype, cclRedOp_t op, int root, cclComm_t comm,
                              cclStream_t stream);
CCL_API cclResult_t cclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                 cclDataType_t datatype, cclComm_t comm, cclStream_t stream);
CCL_API cclResult_t cclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                     cclDataType_t datatype, cclRedOp_t op, cclComm_t comm,
                                     cclStream_t stream);
/** Sends `count` elements to each peer. */
CCL_API cclResult_t cclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                cclDataType_t datatype, cclComm_t comm, cclStream_t stream);
/** Uneven allgather (beyond NCCL, for PyTorch's all_gather with unequal sizes): rank q's
 *  `sendcount` elements land at recvbuff + displs[q] elements; recvcounts[q] is what rank q sends
 *  (recvcounts[rank] must equal sendcount). recvcounts and displs have nranks entries, in elements.
 *  In place: sendbuff == recvbuff + displs[rank] * size. */
CCL_API cclResult_t cclAllGatherV(const void* sendbuff, size_t sendcount, void* recvbuff,
                                  const size_t* recvcounts, const size_t* displs,
                                  cclDataType_t datatype, cclComm_t comm, cclStream_t stream);
/** Uneven all-to-all (beyond NCCL, for PyTorch's all_to_all_single with splits): sendcounts[p]
 *  elements from sendbuff + sdispls[p] go to rank p, which receives them at recvbuff + rdispls[q]
 *  (q the sender) and must have recvcounts[q] equal to them. All arrays have nranks entries, in
 *  elements. sendbuff == recvbuff is allowed (the send data is copied first).
 *  Both V calls read their count and displacement arrays during the call (also inside a group or
 *  with a stream): only the data buffers must stay valid until the operation completes. */
CCL_API cclResult_t cclAlltoAllV(const void* sendbuff, const size_t* sendcounts,
                                 const size_t* sdispls, void* recvbuff, const size_t* recvcounts,
                                 const size_t* rdispls, cclDataType_t datatype, cclComm_t comm,
                                 cclStream_t stream);
CCL_API cclResult_t cclSend(const void* sendbuff, size_t count, cclDataType_t datatype, int peer,
                            cclComm_t comm, cclStream_t stream);
CCL_API cclResult_t cclRecv(void* recvbuff, size_t count, cclDataType_t datatype, int peer,
                            cclComm_t comm, cclStream_t stream);
/** A receive from whichever peer's message arrives first (beyond NCCL, for PyTorch's
 *  recvAnysource, as MPI_ANY_SOURCE): the sender calls plain cclSend. The call first waits for
 *  everything queued on the communicator (any stream) to finish, then for a peer's message of
 *  `count` elements to begin arriving, receives it into host memory `recvbuff` and sets *peer to
 *  its sender; it returns when the message is in, so work queued on `stream` afterwards comes
 *  after it. Every wait is bounded by the communicator's timeout (cclTimeout). A peer's messages
 *  still match in order: the message taken is a peer's next one, and only if that is a
 *  point-to-point message (cclSend); a peer whose next message belongs to a collective this rank
 *  has yet to run is passed over. Not inside a group
 *  (cclInvalidUsage), not with count 0 (an empty send sends nothing to match: cclInvalidArgument),
 *  not over a transport whose sender waits for the receiver (ib: cclInvalidUsage naming it). */
CCL_API cclResult_t cclRecvAnySource(void* recvbuff, size_t count, cclDataType_t datatype,
                                     int* peer, cclComm_t comm, cclStream_t stream);
CCL_API cclResult_t cclBarrier(cclComm_t comm, cclStream_t stream);
CCL_API cclResult_t cclGroupStart(void);
CCL_API cclResult_t cclGroupEnd(void);

/** An in-order queue of host work, run by a thread of its own (and by the threads that wait for
 *  it: cclStreamSynchronize and cclEventSynchronize run the queued work themselves when the
 *  worker is not in the middle of it). */
CCL_API cclResult_t cclStreamCreate(cclStream_t* stream);
/** Waits for all queued work; returns the first error of the queued work since the previous
 *  cclStreamSynchronize, if any (and clears it). */
CCL_API cclResult_t cclStreamSynchronize(cclStream_t stream);
/** cclSuccess when all queued work is done, cclInProgress if not (or the first error). */
CCL_API cclResult_t cclStreamQuery(cclStream_t stream);
/** Waits for the queued work, then frees the stream. Events recorded on it stay usable. */
CCL_API cclResult_t cclStreamDestroy(cclStream_t stream);

/** Events, as CUDA's: a point in a stream's work that any thread may record, query, synchronize
 *  or wait on. An event that was never recorded counts as complete; recording again moves it to
 *  the newer point of its stream. An event recorded after a failed or timed-out operation of its
 *  stream reports that operation's error (the first failure of the stream, as CUDA's sticky
 *  errors; cclStreamSynchronize clearing its own error does not clear it). */
typedef struct cclEvent* cclEvent_t;
CCL_API cclResult_t cclEventCreate(cclEvent_t* event);
/** Frees the event; pending work is not cancelled. */
CCL_API cclResult_t cclEventDestroy(cclEvent_t event);
/** Marks the work queued on `stream` so far (NULL stream: nothing, the event is complete). */
CCL_API cclResult_t cclEventRecord(cclEvent_t event, cclStream_t stream);
/** cclSuccess when the marked work is done, cclInProgress if not yet, or the error of the work it
 *  marks. Never runs or waits for anything. */
CCL_API cclResult_t cclEventQuery(cclEvent_t event);
/** Waits until the marked work is done (running it on this thread when the stream's worker is
 *  not), then returns as cclEventQuery. Bounded: cclTimeout if the stream completes nothing for
 *  the longest timeout of its communicators (CCL_TIMEOUT at least) plus a second. */
CCL_API cclResult_t cclEventSynchronize(cclEvent_t event);
/** Work queued on `stream` after this call waits until the event's work is done (a wait of the
 *  event's state now: recording the event again later changes nothing). If that work failed, the
 *  wait reports its error in `stream`'s cclStreamSynchronize, and the later work still runs.
 *  NULL stream: the calling thread waits now, as cclEventSynchronize. */
CCL_API cclResult_t cclStreamWaitEvent(cclStream_t stream, cclEvent_t event);

/** CUDA streams (a ccl addition). `struct CUstream_st*` is cudaStream_t and CUstream, so a CUDA
 *  program passes its stream without a cast; NULL is CUDA's legacy default stream. */
struct CUstream_st;
/** A ccl stream whose operations are ordered on CUDA stream `cudaStream`: each operation queued
 *  on it starts once the CUDA work queued on `cudaStream` before it is done, and CUDA work queued
 *  on `cudaStream` after the operation's call waits until the operation is done. Buffers may be
 *  device memory (or host memory). The ccl stream is also an ordinary one (cclStreamSynchronize,
 *  events); cclStreamDestroy frees it, not the CUDA stream. cclInvalidUsage where this process
 *  has no CUDA driver, or the CUDA stream belongs to no usable context. */
CCL_API cclResult_t cclStreamFromCuda(struct CUstream_st* cudaStream, cclStream_t* stream);

#ifdef __cplusplus
}
#endif

#endif /* CCL_CCL_H_ */
