#include "base/error.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <new>

#include "base/log.h"

namespace ccl {

namespace {
thread_local std::string t_last_error;

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

const char* thread_last_error() { return t_last_error.c_str(); }

cclResult_t current_exception_result(const char* function, std::string* message) {
  cclResult_t code = cclInternalError;
  std::string text;
  try {
    throw;
  } catch (const Error& e) {
    code = e.code();
    text = e.what();
  } catch (const std::bad_alloc&) {
    code = cclSystemError;
    text = std::string(function) + ": out of memory";
  } catch (const std::exception& e) {
    text = std::string(function) + ": internal error: " + e.what();
  } catch (...) {
    text = std::string(function) + ": internal error: unknown exception";
  }
  // Messages from deep inside may not name the API call; make sure they do.
  if (text.rfind(function, 0) != 0) text = std::string(function) + ": " + text;
  CCL_WARN(kAll, "%s (%s)", text.c_str(), result_name(code));
  t_last_error = text;
  if (message != nullptr) *message = std::move(text);
  return code;
}

}  // namespace ccl
