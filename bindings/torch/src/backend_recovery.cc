// BackendCcl's calls that make a new communicator from this one (split, shrink, grow) and the
// recovery calls (revoke, agree, failed ranks): each is one ccl call through the lane, so the
// communicator's handle stays valid while it runs; a new communicator goes to a new backend.
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>

#include "backend_ccl.h"

namespace ccl_torch {
namespace {

cclUniqueId unique_id_of(const char* op, const std::string& bytes) {
  TORCH_CHECK_VALUE(bytes.size() == sizeof(cclUniqueId::internal), "ccl ", op,
                    ": the unique id has ", bytes.size(), " bytes, not ",
                    sizeof(cclUniqueId::internal), " (use get_unique_id's)");
  cclUniqueId id;
  std::memcpy(id.internal, bytes.data(), bytes.size());
  return id;
}

}  // namespace

c10::intrusive_ptr<BackendCcl> BackendCcl::adopt(cclComm_t comm,
                                                 std::chrono::milliseconds timeout) {
  int rank = -1, size = 0;
  const cclResult_t r1 = cclCommUserRank(comm, &rank);
  const cclResult_t r2 = cclCommCount(comm, &size);
  if (r1 != cclSuccess || r2 != cclSuccess) {
    cclCommAbort(comm);
    TORCH_CHECK(false, "ccl: the new communicator does not say its rank and size: ",
                cclGetErrorString(r1 != cclSuccess ? r1 : r2));
  }
  return c10::make_intrusive<BackendCcl>(comm, rank, size, timeout);
}

BackendCcl::BackendCcl(cclComm_t comm, int rank, int size, std::chrono::milliseconds timeout)
    : c10d::Backend(rank, size),
      lane_(std::make_shared<OpLane>(comm, rank, size)),
      timeout_(timeout),
      options_(c10::make_intrusive<c10d::Backend::Options>(kBackendName, timeout)) {}

// torch calls split on every rank of this group, each with the members of the new group it
// belongs to (a rank in none passes another group's list): the groups do not overlap, so the
// smallest member names a group (its color), and a member's place in the list is its new rank
// (the key). The store torch passes is not needed: cclCommSplit meets over this communicator.
c10::intrusive_ptr<c10d::Backend> BackendCcl::split(
    const c10::intrusive_ptr<c10d::Store>& /*store*/, const std::vector<int>& ranks,
    const c10::intrusive_ptr<c10d::Backend::Options>& opts) {
  const char* name = "split";
  TORCH_CHECK_VALUE(!ranks.empty(), "ccl ", name, ": the new group has no ranks");
  for (int r : ranks) check_rank(name, "member", r);
  const auto me = std::find(ranks.begin(), ranks.end(), rank_);
  const int color =
      me == ranks.end() ? CCL_SPLIT_NOCOLOR : *std::min_element(ranks.begin(), ranks.end());
  const int key = static_cast<int>(me - ranks.begin());
  const std::chrono::milliseconds timeout =
      opts && opts->timeout.count() > 0 ? opts->timeout : timeout_.load();
  cclConfig_t config = CCL_CONFIG_INITIALIZER;
  config.timeoutMs = static_cast<int>(std::clamp<int64_t>(timeout.count(), 1, INT32_MAX));
  config.commName = "torch.distributed";
  cclComm_t child = nullptr;
  // After the queued operations, which every rank ordered before the split.
  lane_->run_exclusive(
      [&](cclComm_t comm) {
        const cclResult_t r = cclCommSplit(comm, color, key, &child, &config);
        if (r != cclSuccess) lane_->raise(name, r);
      },
      name);
  if (child == nullptr) return nullptr;
  auto backend = adopt(child, timeout);
  TORCH_CHECK(backend->getSize() == static_cast<int>(ranks.size()), "ccl ", name,
              ": the new communicator has ", backend->getSize(), " ranks, the group ", ranks.size(),
              " (the ranks passed to split differ between ranks)");
  if (opts) {
    backend->options_->group_name = opts->group_name;
    backend->options_->global_ranks_in_group = opts->global_ranks_in_group;
  }
  return backend;
}

#if CCL_TORCH_HAS_SHRINK
c10::intrusive_ptr<c10d::Backend> BackendCcl::shrink(
    const std::vector<int64_t>& ranks_to_exclude, int shrink_flags,
    const c10::intrusive_ptr<c10d::Backend::Options>& /*opts_override*/) {
  TORCH_CHECK_VALUE(shrink_flags == CCL_SHRINK_DEFAULT || shrink_flags == CCL_SHRINK_ABORT,
                    "ccl shrink: shrink_flags ", shrink_flags, " is neither 0 (default) nor 1 ",
                    "(abort)");
  std::vector<int> exclude;
  for (int64_t r : ranks_to_exclude) {
    check_rank("shrink", "excluded rank", r);
    exclude.push_back(static_cast<int>(r));
  }
  return shrink_to(exclude, shrink_flags == CCL_SHRINK_ABORT);
}
#endif

void BackendCcl::revoke() {
  lane_->call("revoke", [](cclComm_t comm) { return cclCommRevoke(comm, 0); });
}

int BackendCcl::agree(int flag) {
  lane_->call("agree", [&flag](cclComm_t comm) { return cclCommAgree(comm, &flag); });
  return flag;
}

std::vector<int> BackendCcl::failed_ranks() {
  std::vector<int> ranks;
  lane_->call("failed_ranks", [&ranks](cclComm_t comm) {
    // A rank may be found dead between the two calls: ask until the list fits.
    for (;;) {
      int count = 0;
      const int capacity = static_cast<int>(ranks.size());
      const cclResult_t r = cclCommGetFailedRanks(comm, ranks.data(), capacity, &count);
      if (r != cclSuccess) return r;
      ranks.resize(static_cast<size_t>(count));
      if (count <= capacity) return cclSuccess;
    }
  });
  return ranks;
}

c10::intrusive_ptr<BackendCcl> BackendCcl::shrink_to(const std::vector<int>& exclude, bool abort) {
  std::vector<int> list(exclude);
  cclComm_t child = nullptr;
  const auto run = [&](cclComm_t comm) {
    return cclCommShrink(comm, list.empty() ? nullptr : list.data(), static_cast<int>(list.size()),
                         &child, nullptr, abort ? CCL_SHRINK_ABORT : CCL_SHRINK_DEFAULT);
  };
  if (abort) {
    // Not behind the queued operations: the shrink aborts them (they may wait for a dead rank).
    lane_->call("shrink", run);
    lane_->mark_shrunk();
  } else {
    lane_->run_exclusive(
        [&](cclComm_t comm) {
          const cclResult_t r = run(comm);
          if (r != cclSuccess) lane_->raise("shrink", r);
        },
        "shrink");
  }
  return adopt(child, timeout_.load());
}

c10::intrusive_ptr<BackendCcl> BackendCcl::grow(int nranks, const std::string& unique_id) {
  const cclUniqueId id = unique_id_of("grow", unique_id);
  cclComm_t child = nullptr;
  // After the queued operations, which the members ordered before the grow.
  lane_->run_exclusive(
      [&](cclComm_t comm) {
        const cclResult_t r = cclCommGrow(comm, nranks, &id, -1, &child, nullptr);
        if (r != cclSuccess) lane_->raise("grow", r);
      },
      "grow");
  return adopt(child, timeout_.load());
}

c10::intrusive_ptr<BackendCcl> BackendCcl::grow_as_newcomer(
    int nranks, int rank, const std::string& unique_id,
    std::optional<std::chrono::milliseconds> timeout) {
  const cclUniqueId id = unique_id_of("grow", unique_id);
  cclConfig_t config = CCL_CONFIG_INITIALIZER;
  if (timeout) {
    TORCH_CHECK_VALUE(timeout->count() > 0 && timeout->count() <= INT32_MAX,
                      "ccl grow: the timeout (", timeout->count(),
                      " ms) must be positive and "
                      "under 2^31 ms");
    config.timeoutMs = static_cast<int>(timeout->count());
  }
  config.commName = "torch.distributed";
  cclComm_t comm = nullptr;
  const cclResult_t r = cclCommGrow(nullptr, nranks, &id, rank, &comm, &config);
  if (r != cclSuccess) {
    const char* last = cclGetLastError(nullptr);  // the thread's last error
    const std::string text = std::string("ccl grow (newcomer rank ") + std::to_string(rank) +
                             " of " + std::to_string(nranks) + "): " + cclGetErrorString(r) +
                             (last != nullptr && *last != '\0' ? std::string(": ") + last : "");
    if (r == cclInvalidArgument || r == cclInvalidUsage) TORCH_CHECK_VALUE(false, text);
    TORCH_CHECK(false, text);
  }
  // torch's default, as init_process_group's, where the caller named none.
  return adopt(comm, timeout.value_or(std::chrono::minutes(30)));
}

std::string BackendCcl::unique_id() {
  cclUniqueId id;
  const cclResult_t r = cclGetUniqueId(&id);
  TORCH_CHECK(r == cclSuccess, "ccl get_unique_id: ", cclGetErrorString(r), ": ",
              cclGetLastError(nullptr));
  return std::string(id.internal, sizeof(id.internal));
}

}  // namespace ccl_torch
