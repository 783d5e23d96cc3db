// NCCL's communicator calls on ccl's: init (rank, config, all, scalable), split, shrink, revoke,
// grow, finalize, destroy, abort, the queries, registration, and NCCL 2.30's suspend, resume and
// memory statistics (nccl_refused_api.cc has what ccl does not have).
#include <nccl.h>

#include <cstring>
#include <new>
#include <thread>
#include <vector>

#include "nccl_shim/cuda_probe.h"
#include "nccl_shim/shim.h"

using namespace ccl_nccl;

static_assert(sizeof(ncclUniqueId) == sizeof(cclUniqueId), "ids are passed through unchanged");
static_assert(NCCL_SPLIT_NOCOLOR == CCL_SPLIT_NOCOLOR);
static_assert(NCCL_SHRINK_DEFAULT == CCL_SHRINK_DEFAULT && NCCL_SHRINK_ABORT == CCL_SHRINK_ABORT);

namespace {

cclUniqueId to_ccl_id(const ncclUniqueId& id) {
  cclUniqueId out;
  std::memcpy(&out, &id, sizeof(out));
  return out;
}

// A new NCCL handle for a ccl communicator; the device is the calling thread's, or `device`.
ncclComm_t wrap(cclComm_t comm, int device = -1) {
  auto* handle = new (std::nothrow) ncclComm;
  if (handle == nullptr) return nullptr;
  handle->ccl = comm;
  if (device >= 0) {
    handle->cuda_device = device;
  } else if (!cuda_probe::current_device(&handle->cuda_device)) {
    handle->cuda_device = 0;
  }
  return handle;
}

// A new communicator that ccl made (`result`) for `parent`'s device, or the error.
ncclResult_t wrap_made(cclResult_t result, cclComm_t made, int device, ncclComm_t* newcomm,
                       const char* function) {
  if ((result != cclSuccess && result != cclInProgress) || made == nullptr) {
    return from_ccl(result);
  }
  *newcomm = wrap(made, device);
  if (*newcomm == nullptr) {
    cclCommDestroy(made);
    return fail(ncclSystemError, "%s: out of memory", function);
  }
  return from_ccl(result);
}

ncclResult_t init_rank(const char* function, ncclComm_t* comm, int nranks, const ncclUniqueId& id,
                       int rank, ncclConfig_t* config) {
  begin_call();
  if (comm == nullptr) return fail(ncclInvalidArgument, "%s: comm is NULL", function);
  *comm = nullptr;
  cclConfig_t ccl_config;
  if (!to_ccl_config(config, &ccl_config, function)) return ncclInvalidArgument;
  cclComm_t made = nullptr;
  const cclResult_t result =
      cclCommInitRankConfig(&made, nranks, to_ccl_id(id), rank, config ? &ccl_config : nullptr);
  if (result != cclSuccess && result != cclInProgress) return from_ccl(result);
  *comm = wrap(made);
  if (*comm == nullptr) {
    cclCommDestroy(made);
    return fail(ncclSystemError, "%s: out of memory", function);
  }
  return from_ccl(result);
}

}  // namespace

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  return init_rank("ncclCommInitRankConfig", comm, nranks, commId, rank, config);
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return init_rank("ncclCommInitRank", comm, nranks, commId, rank, nullptr);
}

// Several ids spread NCCL's bootstrap over several roots; ccl's rendezvous has one, the first id
// (every rank passes the same array).
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId* commIds, ncclConfig_t* config) {
  const char* function = "ncclCommInitRankScalable";
  begin_call();
  if (nId < 1 || commIds == nullptr) {
    return fail(ncclInvalidArgument, "%s: nId is %d and commIds %p: at least one id is needed",
                function, nId, static_cast<void*>(commIds));
  }
  return init_rank(function, newcomm, nranks, commIds[0], myrank, config);
}

// One process, one communicator per device of devlist (0..ndev-1 if NULL): one rendezvous, each
// rank joined from a thread of its own (a join blocks until every rank has joined).
ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  const char* function = "ncclCommInitAll";
  begin_call();
  if (comms == nullptr) return fail(ncclInvalidArgument, "%s: comms is NULL", function);
  if (ndev < 1) return fail(ncclInvalidArgument, "%s: ndev is %d, not >= 1", function, ndev);
  cclUniqueId id;
  if (const cclResult_t r = cclGetUniqueId(&id); r != cclSuccess) {
    return fail(from_ccl(r), "%s: %s", function, cclGetLastError(nullptr));
  }
  std::vector<cclComm_t> made(static_cast<size_t>(ndev), nullptr);
  std::vector<cclResult_t> results(static_cast<size_t>(ndev), cclSuccess);
  std::vector<std::string> errors(static_cast<size_t>(ndev));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(ndev));
  for (int r = 0; r < ndev; ++r) {
    threads.emplace_back([&, r] {
      const auto i = static_cast<size_t>(r);
      results[i] = cclCommInitRank(&made[i], ndev, id, r);
      if (results[i] != cclSuccess) errors[i] = cclGetLastError(nullptr);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < ndev; ++r) {
    const auto i = static_cast<size_t>(r);
    if (results[i] != cclSuccess) {
      for (cclComm_t c : made) {
        if (c != nullptr) cclCommDestroy(c);
      }
      return fail(from_ccl(results[i]), "%s: rank %d: %s", function, r, errors[i].c_str());
    }
  }
  for (int r = 0; r < ndev; ++r) {
    comms[r] = wrap(made[static_cast<size_t>(r)], devlist != nullptr ? devlist[r] : r);
  }
  return ncclSuccess;
}

// A call that makes a child of `comm` (split, shrink): checks the handles and the config, then
// runs make(parent, config or NULL, &child) and wraps what it made on `comm`'s device.
template <class Make>
ncclResult_t make_child(const char* function, ncclComm_t comm, ncclComm_t* newcomm,
                        ncclConfig_t* config, Make&& make) {
  begin_call();
  cclComm_t parent = checked(comm, function);
  if (parent == nullptr) return ncclInvalidArgument;
  if (newcomm == nullptr) return fail(ncclInvalidArgument, "%s: newcomm is NULL", function);
  *newcomm = nullptr;
  cclConfig_t ccl_config;
  if (!to_ccl_config(config, &ccl_config, function)) return ncclInvalidArgument;
  cclComm_t child = nullptr;
  const cclResult_t result = make(parent, config ? &ccl_config : nullptr, &child);
  return wrap_made(result, child, comm->cuda_device, newcomm, function);
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config) {
  // NCCL_SPLIT_NOCOLOR: success and no communicator.
  return make_child("ncclCommSplit", comm, newcomm, config,
                    [&](cclComm_t parent, cclConfig_t* c, cclComm_t* child) {
                      return cclCommSplit(parent, color, key, child, c);
                    });
}

// The flags have the same values (checked above); ccl checks the list, the flags and the config.
ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                            ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  return make_child("ncclCommShrink", comm, newcomm, config,
                    [&](cclComm_t parent, cclConfig_t* c, cclComm_t* child) {
                      return cclCommShrink(parent, excludeRanksList, excludeRanksCount, child, c,
                                           shrinkFlags);
                    });
}

ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  begin_call();
  cclComm_t c = checked(comm, "ncclCommRevoke");
  return c != nullptr ? from_ccl(cclCommRevoke(c, revokeFlags)) : ncclInvalidArgument;
}

// NCCL 2.29's grow: the id comes from any member, the members pass rank -1, each newcomer comm
// NULL and its rank. Built against an older nccl.h, which does not declare them, they are exported
// ahead of it.
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 29, 0)
extern "C" {
ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);
ncclResult_t pncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                          ncclComm_t* newcomm, ncclConfig_t* config);
ncclResult_t pncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                           ncclComm_t* newcomm, ncclConfig_t* config);
}
#endif

ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId) {
  begin_call();
  if (checked(comm, "ncclCommGetUniqueId") == nullptr) return ncclInvalidArgument;
  if (uniqueId == nullptr)
    return fail(ncclInvalidArgument, "ncclCommGetUniqueId: uniqueId is NULL");
  cclUniqueId id;
  const cclResult_t result = cclGetUniqueId(&id);
  if (result == cclSuccess) std::memcpy(uniqueId, &id, sizeof(id));
  return from_ccl(result);
}

ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                          ncclComm_t* newcomm, ncclConfig_t* config) {
  const char* function = "ncclCommGrow";
  begin_call();
  cclComm_t parent = nullptr;
  if (comm != nullptr && (parent = checked(comm, function)) == nullptr) return ncclInvalidArgument;
  if (newcomm == nullptr) return fail(ncclInvalidArgument, "%s: newcomm is NULL", function);
  *newcomm = nullptr;
  if (uniqueId == nullptr) return fail(ncclInvalidArgument, "%s: uniqueId is NULL", function);
  cclConfig_t ccl_config;
  if (!to_ccl_config(config, &ccl_config, function)) return ncclInvalidArgument;
  const cclUniqueId id = to_ccl_id(*uniqueId);
  cclComm_t grown = nullptr;
  const cclResult_t result =
      cclCommGrow(parent, nRanks, &id, rank, &grown, config ? &ccl_config : nullptr);
  return wrap_made(result, grown, comm != nullptr ? comm->cuda_device : -1, newcomm, function);
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  begin_call();
  cclComm_t c = checked(comm, "ncclCommFinalize");
  return c != nullptr ? from_ccl(cclCommFinalize(c)) : ncclInvalidArgument;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  begin_call();
  if (comm == nullptr) return ncclSuccess;  // as NCCL: destroying NULL is a no-op
  const cclResult_t result = cclCommDestroy(comm->ccl);
  delete comm;
  return from_ccl(result);
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  begin_call();
  if (comm == nullptr) return ncclSuccess;
  const cclResult_t result = cclCommAbort(comm->ccl);
  delete comm;
  return from_ccl(result);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  begin_call();
  cclComm_t c = checked(comm, "ncclCommGetAsyncError");
  if (c == nullptr) return ncclInvalidArgument;
  if (asyncError == nullptr) {
    return fail(ncclInvalidArgument, "ncclCommGetAsyncError: asyncError is NULL");
  }
  cclResult_t error = cclSuccess;
  const cclResult_t result = cclCommGetAsyncError(c, &error);
  if (result != cclSuccess) return from_ccl(result);
  *asyncError = from_ccl(error);
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  begin_call();
  cclComm_t c = checked(comm, "ncclCommCount");
  return c != nullptr ? from_ccl(cclCommCount(c, count)) : ncclInvalidArgument;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  begin_call();
  cclComm_t c = checked(comm, "ncclCommUserRank");
  return c != nullptr ? from_ccl(cclCommUserRank(c, rank)) : ncclInvalidArgument;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  begin_call();
  if (checked(comm, "ncclCommCuDevice") == nullptr) return ncclInvalidArgument;
  if (device == nullptr) return fail(ncclInvalidArgument, "ncclCommCuDevice: device is NULL");
  *device = comm->cuda_device;
  return ncclSuccess;
}

ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  begin_call();
  ncclResult_t refused = ncclSuccess;
  cclComm_t c = checked_for_operation(comm, "ncclCommRegister", &refused);
  return c != nullptr ? from_ccl(cclCommRegister(c, buff, size, handle)) : refused;
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  begin_call();
  cclComm_t c = checked(comm, "ncclCommDeregister");
  return c != nullptr ? from_ccl(cclCommDeregister(c, handle)) : ncclInvalidArgument;
}

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 30, 0)
// NCCL 2.30 suspends a communicator to release its dynamic GPU memory while it is not needed.
// ccl allocates a communicator's memory at init and keeps it: suspending releases nothing
// (ncclStatGpuMemSuspend is 0), and refuses every operation on the communicator until it is
// resumed, as NCCL does. NCCL_SUSPEND_MEM is the only flag.
ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags) {
  begin_call();
  if (checked(comm, "ncclCommSuspend") == nullptr) return ncclInvalidArgument;
  if ((flags & ~NCCL_SUSPEND_MEM) != 0) {
    return fail(ncclInvalidArgument,
                "ncclCommSuspend: flags 0x%x: only NCCL_SUSPEND_MEM (0x%x) is one",
                static_cast<unsigned>(flags), static_cast<unsigned>(NCCL_SUSPEND_MEM));
  }
  if (comm->suspended.exchange(true)) {
    return fail(ncclInvalidUsage, "ncclCommSuspend: the communicator is suspended already");
  }
  return ncclSuccess;
}

ncclResult_t ncclCommResume(ncclComm_t comm) {
  begin_call();
  if (checked(comm, "ncclCommResume") == nullptr) return ncclInvalidArgument;
  if (!comm->suspended.exchange(false)) {
    return fail(ncclInvalidUsage, "ncclCommResume: the communicator is not suspended");
  }
  return ncclSuccess;
}

ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value) {
  const char* function = "ncclCommMemStats";
  begin_call();
  if (checked(comm, function) == nullptr) return ncclInvalidArgument;
  if (value == nullptr) return fail(ncclInvalidArgument, "%s: value is NULL", function);
  switch (stat) {
    case ncclStatGpuMemSuspend:
      *value = 0;  // ccl's suspend releases nothing
      return ncclSuccess;
    case ncclStatGpuMemSuspended:
      *value = comm->suspended.load() ? 1 : 0;
      return ncclSuccess;
    case ncclStatGpuMemPersist:
    case ncclStatGpuMemTotal:
      return unsupported("ncclCommMemStats of ncclStatGpuMemPersist or ncclStatGpuMemTotal",
                         "ccl does not count a communicator's device memory");
  }
  return fail(ncclInvalidArgument, "%s: stat %d is not an ncclCommMemStat_t", function,
              static_cast<int>(stat));
}

CCL_NCCL_PROFILING_ALIAS(ncclCommSuspend)
CCL_NCCL_PROFILING_ALIAS(ncclCommResume)
CCL_NCCL_PROFILING_ALIAS(ncclCommMemStats)
#endif

CCL_NCCL_PROFILING_ALIAS(ncclCommInitRankConfig)
CCL_NCCL_PROFILING_ALIAS(ncclCommInitRank)
CCL_NCCL_PROFILING_ALIAS(ncclCommInitRankScalable)
CCL_NCCL_PROFILING_ALIAS(ncclCommInitAll)
CCL_NCCL_PROFILING_ALIAS(ncclCommSplit)
CCL_NCCL_PROFILING_ALIAS(ncclCommShrink)
CCL_NCCL_PROFILING_ALIAS(ncclCommRevoke)
CCL_NCCL_PROFILING_ALIAS(ncclCommGetUniqueId)
CCL_NCCL_PROFILING_ALIAS(ncclCommGrow)
CCL_NCCL_PROFILING_ALIAS(ncclCommFinalize)
CCL_NCCL_PROFILING_ALIAS(ncclCommDestroy)
CCL_NCCL_PROFILING_ALIAS(ncclCommAbort)
CCL_NCCL_PROFILING_ALIAS(ncclCommGetAsyncError)
CCL_NCCL_PROFILING_ALIAS(ncclCommCount)
CCL_NCCL_PROFILING_ALIAS(ncclCommUserRank)
CCL_NCCL_PROFILING_ALIAS(ncclCommCuDevice)
CCL_NCCL_PROFILING_ALIAS(ncclCommRegister)
CCL_NCCL_PROFILING_ALIAS(ncclCommDeregister)
