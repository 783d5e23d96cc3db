#include "base/error.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <iterator>

namespace ccl {

namespace {
std::string vformat(const char* fmt, va_list ap) {
  char buf[1024];
  vsnprintf(buf, sizeof(buf), fmt, ap);
  return buf;
}
}  // namespace

void throw_error(cclResult_t code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string msg = vformat(fmt, ap);
  va_end(ap);
  throw Error(code, msg);
}

void throw_peer_error(cclResult_t code, int culprit, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string msg = vformat(fmt, ap);
  va_end(ap);
  throw Error(code, msg, culprit);
}

void throw_system_error(int err, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string msg = vformat(fmt, ap);
  va_end(ap);
  msg += ": ";
  msg += strerror(err);
  throw Error(cclSystemError, msg);
}

const char* result_name(int code) {
  static constexpr const char* kNames[] = {
      "cclSuccess",       "cclUnhandledCudaError", "cclSystemError",
      "cclInternalError", "cclInvalidArgument",    "cclInvalidUsage",
      "cclRemoteError",   "cclInProgress",         "cclTimeout"};
  return code >= 0 && code < static_cast<int>(std::size(kNames)) ? kNames[code] : "unknown";
}

}  // namespace ccl
