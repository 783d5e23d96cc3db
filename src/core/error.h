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
  cclResult_t code() const { return code_; }

 private:
  cclResult_t code_;
};

// printf-style helpers that build the message and throw.
[[noreturn]] void throw_error(cclResult_t code, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
// Throws SystemError with strerror(errno) appended: "what: strerror".
[[noreturn]] void throw_system_error(int err, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));

}  // namespace ccl
