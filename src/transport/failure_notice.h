// What a rank tells its peers when its communicator fails (transport.h, failure propagation).
// Small and fixed-size: it travels in a shm segment's failure line and in one tcp frame.
#pragma once

#include <cstdint>

#include "ccl/ccl.h"

namespace ccl {
class Error;
}

namespace ccl::transport {

struct FailureNotice {
  // kFailed ends every wait of a peer (its operation cannot complete without this rank, directly
  // or through others). kAborted (cclCommAbort) ends only a wait that needs this rank, and an
  // idle peer's check_health: the aborting rank may have finished its part of the operation its
  // peers are still completing among themselves.
  enum Kind : int32_t { kFailed = 0, kAborted = 1 };
  int32_t code = 0;  // the cclResult_t the origin failed with
  int32_t kind = kFailed;
  int32_t origin = -1;   // the rank that first saw the failure
  int32_t culprit = -1;  // the rank it blamed (dead, disconnected or awaited in vain); -1: none
};
static_assert(sizeof(FailureNotice) == 16);

// The notice this rank sends for `error` (thrown by one of its operations): the error's own
// notice when it came from a peer, so every rank names the first origin and culprit.
FailureNotice notice_for(const Error& error, int self);
FailureNotice abort_notice(int self);

// Throws the error a rank reports when `notice` reaches it from `via` (the peer that sent it):
// the notice's code (Timeout stays Timeout), a message naming origin and culprit, and the blame.
[[noreturn]] void throw_notice(const FailureNotice& notice, int via);

}  // namespace ccl::transport
