#include "transport/failure_notice.h"

#include <string>

#include "base/error.h"

namespace ccl::transport {

FailureNotice notice_for(const Error& error, int self) {
  FailureNotice n;
  n.code = error.code();
  n.origin = error.origin() >= 0 ? error.origin() : self;
  n.culprit = error.culprit();
  if (error.origin_aborted()) n.kind = FailureNotice::kAborted;
  return n;
}

FailureNotice abort_notice(int self) {
  FailureNotice n;
  n.code = cclRemoteError;
  n.kind = FailureNotice::kAborted;
  n.origin = self;
  return n;
}

void throw_notice(const FailureNotice& notice, int via) {
  cclResult_t code = static_cast<cclResult_t>(notice.code);
  // Only failures that describe peers travel; anything else (a corrupt line) is a remote error.
  if (code != cclTimeout) code = cclRemoteError;
  std::string message;
  const std::string origin = "rank " + std::to_string(notice.origin);
  if (notice.kind == FailureNotice::kAborted) {
    message = origin + " aborted its communicator";
  } else if (notice.culprit < 0) {
    message = origin + " failed (result " + std::to_string(notice.code) + ")";
  } else if (code == cclTimeout) {
    message = origin + " timed out waiting for rank " + std::to_string(notice.culprit);
  } else {
    message = origin + " lost rank " + std::to_string(notice.culprit);
  }
  if (via != notice.origin) message += " (told by rank " + std::to_string(via) + ")";
  throw Error(code, message, notice.culprit, notice.origin, notice.kind == FailureNotice::kAborted);
}

}  // namespace ccl::transport
