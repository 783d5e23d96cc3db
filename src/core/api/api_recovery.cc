// The C API of recovery (ccl.h, docs/reliability.md "Recovering from a failed rank"): argument
// checks, then the communicator's revoke, agree, failed ranks and shrink (comm_recovery.cc); grow
// is a join of the members and the newcomers through one rendezvous.
#include <set>
#include <vector>

#include "base/error.h"
#include "core/api/api_comm_support.h"
#include "core/api/api_guard.h"
#include "core/comm/comm.h"

using namespace ccl;
using namespace ccl::api;

cclResult_t cclCommRevoke(cclComm_t comm, int revokeFlags) {
  const char* fn = "cclCommRevoke";
  return guarded(comm, fn, [&] {
    Communicator& c = checked_comm(comm, fn);
    if (revokeFlags != 0) {
      throw_error(cclInvalidArgument, "%s: revokeFlags %d must be 0", fn, revokeFlags);
    }
    c.revoke();
  });
}

cclResult_t cclCommAgree(cclComm_t comm, int* flag) {
  const char* fn = "cclCommAgree";
  return guarded(comm, fn, [&] {
    Communicator& c = checked_comm(comm, fn);
    if (flag == nullptr) throw_error(cclInvalidArgument, "%s: flag is NULL", fn);
    *flag = c.agree(*flag);
  });
}

cclResult_t cclCommGetFailedRanks(cclComm_t comm, int* ranks, int capacity, int* count) {
  const char* fn = "cclCommGetFailedRanks";
  return guarded(comm, fn, [&] {
    Communicator& c = checked_comm(comm, fn);
    if (count == nullptr) throw_error(cclInvalidArgument, "%s: count is NULL", fn);
    if (capacity < 0) throw_error(cclInvalidArgument, "%s: capacity %d is negative", fn, capacity);
    if (capacity > 0 && ranks == nullptr) {
      throw_error(cclInvalidArgument, "%s: ranks is NULL with capacity %d", fn, capacity);
    }
    const std::vector<int> failed = c.failed_ranks();
    for (size_t i = 0; i < failed.size() && i < static_cast<size_t>(capacity); ++i) {
      ranks[i] = failed[i];
    }
    *count = static_cast<int>(failed.size());
  });
}

cclResult_t cclCommShrink(cclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                          cclComm_t* newcomm, cclConfig_t* config, int shrinkFlags) {
  const char* fn = "cclCommShrink";
  const cclResult_t result = guarded(comm, fn, [&] {
    Communicator& parent = checked_comm(comm, fn);
    if (newcomm == nullptr) throw_error(cclInvalidArgument, "%s: newcomm is NULL", fn);
    *newcomm = nullptr;
    if (shrinkFlags != CCL_SHRINK_DEFAULT && shrinkFlags != CCL_SHRINK_ABORT) {
      throw_error(cclInvalidArgument,
                  "%s: shrinkFlags %d must be CCL_SHRINK_DEFAULT (0) or CCL_SHRINK_ABORT (1)", fn,
                  shrinkFlags);
    }
    if (excludeRanksCount < 0) {
      throw_error(cclInvalidArgument, "%s: excludeRanksCount %d is negative", fn,
                  excludeRanksCount);
    }
    if (excludeRanksCount > 0 && excludeRanksList == nullptr) {
      throw_error(cclInvalidArgument, "%s: excludeRanksList is NULL with excludeRanksCount %d", fn,
                  excludeRanksCount);
    }
    std::set<int> seen;
    for (int i = 0; i < excludeRanksCount; ++i) {
      const int r = excludeRanksList[i];
      check_rank(r, parent.nranks(), "excludeRanksList", fn);
      if (!seen.insert(r).second) {
        throw_error(cclInvalidArgument, "%s: excludeRanksList names rank %d twice", fn, r);
      }
      if (r == parent.rank()) {
        throw_error(cclInvalidArgument,
                    "%s: excludeRanksList names this rank (%d): excluded ranks do not call it", fn,
                    r);
      }
    }
    CommOptions options = parent.options();  // the parent's settings unless the config says
    options.figures = nullptr;
    apply_config(options, config, fn);
    std::vector<int> exclude(seen.begin(), seen.end());
    *newcomm = make_handle(parent.shrink(exclude, shrinkFlags == CCL_SHRINK_ABORT, options));
  });
  return made(result, newcomm != nullptr ? *newcomm : nullptr);
}

cclResult_t cclCommGrow(cclComm_t comm, int nranks, const cclUniqueId* uniqueId, int rank,
                        cclComm_t* newcomm, cclConfig_t* config) {
  const char* fn = "cclCommGrow";
  const cclResult_t result = guarded(comm, fn, [&] {
    if (newcomm == nullptr) throw_error(cclInvalidArgument, "%s: newcomm is NULL", fn);
    *newcomm = nullptr;
    if (uniqueId == nullptr) throw_error(cclInvalidArgument, "%s: uniqueId is NULL", fn);
    CommOptions options;
    if (comm != nullptr) {
      Communicator& parent = checked_comm(comm, fn);
      if (rank != -1) {
        throw_error(cclInvalidArgument,
                    "%s: rank %d: a member of comm keeps its rank and passes -1 (newcomers pass "
                    "comm NULL and their rank)",
                    fn, rank);
      }
      if (nranks < parent.nranks()) {
        throw_error(cclInvalidArgument, "%s: nranks %d is smaller than comm's %d ranks", fn, nranks,
                    parent.nranks());
      }
      parent.drain_background();  // its queued work comes first, as the caller ordered it
      options = parent.options();
      options.figures = nullptr;  // the newcomers cannot have them: the figures are recalled
      options.rank = parent.rank();
      options.nranks = nranks;
      apply_config(options, config, fn);
    } else {
      if (rank == -1) {
        throw_error(cclInvalidArgument,
                    "%s: rank -1 with comm NULL: -1 is what a member of comm passes; a newcomer "
                    "passes its rank in the grown communicator",
                    fn);
      }
      options = make_options(nranks, rank, config, fn);
    }
    const UniqueIdContents id = decode_unique_id(*uniqueId);
    *newcomm = join(options, id.root, id.secret);
  });
  return made(result, newcomm != nullptr ? *newcomm : nullptr);
}
