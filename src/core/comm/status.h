// Whether a communicator can still be used, and if not, why: the abort flag that every wait of the
// communicator watches, the marks of destroy and finalize, the first error of an operation (the
// communicator is unusable after one) and cclGetLastError's text. Any thread reads it; it sits
// below the other parts, which all consult it, and needs none of them.
#pragma once

#include <atomic>
#include <mutex>
#include <string>

#include "base/deadline.h"
#include "ccl/ccl.h"

namespace ccl {

class CommStatus {
 public:
  // The flag every wait of the communicator watches (transports, executor, init's rendezvous).
  AbortFlag& abort_flag() { return abort_; }
  void abort() { abort_.store(true); }
  bool aborted() const { return abort_.load(); }
  // Operations fail fast once the communicator has failed or been destroyed.
  void mark_destroyed() { destroyed_.store(true); }
  bool destroyed() const { return destroyed_.load(); }
  // cclCommFinalize succeeded: only cclCommDestroy may follow.
  void mark_finalized() { finalized_.store(true); }

  // cclCommRevoke, here or by rank `by` (told through the recovery plane): the communicator has
  // failed with RemoteError; later operations say it was revoked. The first revoker is kept.
  // Returns whether this was the first revoke.
  bool revoke(int by);
  int revoked_by() const { return revoked_by_.load(); }  // -1: not revoked

  // First error of an operation (cclSuccess if none): the communicator is unusable after one.
  cclResult_t error() const { return async_error_.load(); }
  // Marks the communicator failed with `code` (the first failure wins).
  void mark_failed(cclResult_t code);
  // A non-blocking init's failure: its code is the error (nothing ran before it).
  void set_init_error(cclResult_t code) { async_error_.store(code); }
  // Throws for operation `what` if the communicator was destroyed, aborted or finalized
  // (InvalidUsage) or failed earlier (that failure's code).
  void throw_if_unusable(const char* what) const;

  // cclGetLastError's text. The pointer stays valid until the next failure.
  void set_last_error(const std::string& message);
  const char* last_error();

 private:
  AbortFlag abort_{false};
  std::atomic<bool> destroyed_{false};
  std::atomic<bool> finalized_{false};
  std::atomic<int> revoked_by_{-1};
  std::atomic<cclResult_t> async_error_{cclSuccess};
  std::mutex error_mutex_;
  std::string last_error_;
};

}  // namespace ccl
