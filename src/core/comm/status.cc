#include "core/comm/status.h"

#include <string>

#include "base/error.h"

namespace ccl {

void CommStatus::mark_failed(cclResult_t code) {
  cclResult_t expected = cclSuccess;
  async_error_.compare_exchange_strong(expected, code);
}

bool CommStatus::revoke(int by) {
  int none = -1;
  const bool first = revoked_by_.compare_exchange_strong(none, by);
  if (first) set_last_error("the communicator was revoked by rank " + std::to_string(by));
  mark_failed(cclRemoteError);
  return first;
}

void CommStatus::throw_if_unusable(const char* what) const {
  if (destroyed_.load()) throw_error(cclInvalidUsage, "%s: the communicator was destroyed", what);
  if (abort_.load()) {
    // A revoke aborts too (Communicator::revoke): only an aborted communicator asks, so a
    // healthy one's operations pay nothing for it.
    if (const int by = revoked_by_.load(); by >= 0) {
      throw_error(cclRemoteError, "%s: the communicator was revoked by rank %d", what, by);
    }
    throw_error(cclInvalidUsage, "%s: the communicator was aborted", what);
  }
  if (finalized_.load()) {
    throw_error(cclInvalidUsage,
                "%s: the communicator was finalized; only cclCommDestroy may follow", what);
  }
  cclResult_t failed = async_error_.load();
  if (failed != cclSuccess) {
    throw_error(failed, "%s: the communicator failed earlier (%s); destroy or abort it", what,
                cclGetErrorString(failed));
  }
}

void CommStatus::set_last_error(const std::string& message) {
  std::lock_guard<std::mutex> lock(error_mutex_);
  last_error_ = message;
}

const char* CommStatus::last_error() {
  std::lock_guard<std::mutex> lock(error_mutex_);
  return last_error_.c_str();
}

}  // namespace ccl
