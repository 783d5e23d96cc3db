#include "store_rendezvous.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <string>
#include <vector>

namespace ccl_torch {

cclComm_t make_comm(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                    std::chrono::milliseconds timeout) {
  TORCH_CHECK(store, "ccl: init needs a store");
  TORCH_CHECK(size >= 1 && rank >= 0 && rank < size, "ccl: rank ", rank, " of ", size,
              " is not a rank of the group");
  // Which group of this store this is: every rank adds 1, so the first `size` calls are
  // generation 0, the next `size` generation 1, and so on.
  const int64_t ticket = store->add("ccl_init_count", 1);
  const std::string key = "ccl_unique_id/" + std::to_string((ticket - 1) / size);
  cclUniqueId id;
  if (rank == 0) {
    const cclResult_t r = cclGetUniqueId(&id);
    TORCH_CHECK(r == cclSuccess, "ccl: cclGetUniqueId: ", cclGetErrorString(r));
    store->set(key, std::vector<uint8_t>(id.internal, id.internal + sizeof(id.internal)));
  } else {
    // Bounded by the store's timeout (init_process_group's).
    const std::vector<uint8_t> bytes = store->get(key);
    TORCH_CHECK(bytes.size() == sizeof(id.internal), "ccl: the store's ", key, " holds ",
                bytes.size(), " bytes, not a ccl unique id (", sizeof(id.internal), ")");
    std::memcpy(id.internal, bytes.data(), bytes.size());
  }
  cclConfig_t config = CCL_CONFIG_INITIALIZER;
  config.timeoutMs = static_cast<int>(std::clamp<int64_t>(timeout.count(), 1, INT_MAX));
  config.commName = "torch.distributed";
  cclComm_t comm = nullptr;
  const cclResult_t r = cclCommInitRankConfig(&comm, size, id, rank, &config);
  if (r != cclSuccess) {
    const char* last = cclGetLastError(comm);  // the thread's last error when comm is NULL
    std::string detail = last != nullptr ? last : "";
    if (comm != nullptr) cclCommAbort(comm);
    TORCH_CHECK(false, "ccl: cclCommInitRankConfig (rank ", rank, " of ", size,
                "): ", cclGetErrorString(r), detail.empty() ? "" : ": ", detail);
  }
  return comm;
}

}  // namespace ccl_torch
