// One error style for all of ccl: internal code throws ccl::Error; the C boundary
// (api_guard.h) catches it, records it as the last error and returns its cclResult_t.
// Which code to use:
//   InvalidArgument / InvalidUsage : the caller's arguments or call order are wrong
//   RemoteError / Timeout / SystemError : a peer, the network or the OS failed
//   InternalError : a bug in ccl
#pragma once

#include <stdexcept>
#include <string>

#include "ccl/ccl.h"

namespace ccl {

class Error : public std::runtime_error {
 public:
  Error(cclResult_t code, const std::string& message) : std::runtime_error(message), code_(code) {}
  // A failure that points at another rank: `culprit` is the rank found dead or awaited in vain,
  // `origin` the rank that found it (-1: this one). The communicator tells every peer (so that
  // all ranks fail fast, naming the same culprit); see transport.h FailureNotice.
  // `origin_aborted`: the origin aborted its communicator (cclCommAbort) rather than failed; a
  // relayed notice keeps saying so (failure_notice.h: an abort ends only the waits that need it).
  Error(cclResult_t code, const std::string& message, int culprit, int origin = -1,
        bool origin_aborted = false)
      : std::runtime_error(message),
        code_(code),
        culprit_(culprit),
        origin_(origin),
        origin_aborted_(origin_aborted) {}
  cclResult_t code() const { return code_; }
  int culprit() const { return culprit_; }
  int origin() const { return origin_; }
  bool origin_aborted() const { return origin_aborted_; }
  // The same error with another message (an operation naming itself): every field travels.
  Error with_message(const std::string& message) const {
    return Error(code_, message, culprit_, origin_, origin_aborted_);
  }

 private:
  cclResult_t code_;
  int culprit_ = -1;
  int origin_ = -1;
  bool origin_aborted_ = false;
};

// printf-style helpers that build the message and throw.
[[noreturn]] void throw_error(cclResult_t code, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
// The same, naming the rank the failure points at (see Error::culprit).
[[noreturn]] void throw_peer_error(cclResult_t code, int culprit, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
// Throws SystemError with strerror(errno) appended: "what: strerror".
[[noreturn]] void throw_system_error(int err, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));

// The one place a thrown exception becomes a result, for the C boundary (core/api/api_guard.h)
// and for queued work, which the C boundary handed over (core/call/call_target.h): the code of
// the exception being handled (an Error's; cclSystemError for bad_alloc; cclInternalError for
// anything else), its message named after `function` (prefixed unless it starts with it), kept
// as the calling thread's last error (thread_last_error) and in `*message` if given, and logged.
cclResult_t current_exception_result(const char* function, std::string* message = nullptr);
// The message of the calling thread's last failure (for cclGetLastError(NULL)).
const char* thread_last_error();

// The enum's own name of a cclResult_t ("cclSuccess", "cclTimeout", ...; "unknown" for other
// values): what a user greps for, shorter than cclGetErrorString's sentences.
const char* result_name(int code);

}  // namespace ccl
