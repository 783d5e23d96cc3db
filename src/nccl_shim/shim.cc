#include "nccl_shim/shim.h"

#include <strings.h>

#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ccl_nccl {

namespace {

// NCCL's config magic (NCCL_CONFIG_INITIALIZER writes it).
constexpr unsigned kConfigMagic = 0xcafebeef;

struct LastError {
  bool from_shim = false;
  std::string text;
};
thread_local LastError last;

// Whether to echo a refusal on stderr as NCCL does at NCCL_DEBUG=WARN (or ccl's CCL_DEBUG).
bool warn_on_stderr() {
  for (const char* name : {"NCCL_DEBUG", "CCL_DEBUG"}) {
    const char* level = std::getenv(name);
    if (level != nullptr && (strcasecmp(level, "WARN") == 0 || strcasecmp(level, "INFO") == 0 ||
                             strcasecmp(level, "TRACE") == 0)) {
      return true;
    }
  }
  return false;
}

// A field of `config` lies inside what the caller's struct has.
bool has_field(const ncclConfig_t* config, size_t offset, size_t size) {
  return config->size >= offset + size;
}

}  // namespace

ncclResult_t from_ccl(cclResult_t result) {
  // NCCL 2.30 has ncclTimeout, with ccl's value (8); an older header's caller gets ncclRemoteError.
  constexpr bool has_timeout = static_cast<int>(ncclNumResults) > static_cast<int>(cclTimeout);
  if (result == cclTimeout && !has_timeout) return ncclRemoteError;
  if (static_cast<int>(result) >= 0 && static_cast<int>(result) < ncclNumResults) {
    return static_cast<ncclResult_t>(result);
  }
  return ncclInternalError;
}

void begin_call() { last.from_shim = false; }

ncclResult_t fail(ncclResult_t code, const char* format, ...) {
  char text[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof(text), format, args);
  va_end(args);
  last.from_shim = true;
  last.text = text;
  if (warn_on_stderr()) std::fprintf(stderr, "ccl (libnccl.so.2 shim) WARN %s\n", text);
  return code;
}

const char* last_error(ncclComm_t comm) {
  if (last.from_shim) return last.text.c_str();
  return cclGetLastError(comm != nullptr ? comm->ccl : nullptr);
}

cclComm_t checked(ncclComm_t comm, const char* function) {
  if (comm == nullptr || comm->ccl == nullptr) {
    fail(ncclInvalidArgument, "%s: comm is NULL", function);
    return nullptr;
  }
  return comm->ccl;
}

cclComm_t checked_for_operation(ncclComm_t comm, const char* function, ncclResult_t* code) {
  cclComm_t c = checked(comm, function);
  *code = ncclInvalidArgument;
  if (c != nullptr && comm->suspended.load()) {
    *code = fail(ncclInvalidUsage,
                 "%s: the communicator is suspended (ncclCommSuspend); "
                 "ncclCommResume it first",
                 function);
    return nullptr;
  }
  return c;
}

bool to_ccl_config(const ncclConfig_t* config, cclConfig_t* out, const char* function) {
  *out = CCL_CONFIG_INITIALIZER;
  if (config == nullptr) return true;
  if (config->magic != kConfigMagic ||
      !has_field(config, offsetof(ncclConfig_t, blocking), sizeof(int))) {
    fail(ncclInvalidArgument,
         "%s: config (size %zu, magic 0x%x) was not set up with NCCL_CONFIG_INITIALIZER", function,
         config->size, config->magic);
    return false;
  }
  if (config->blocking != NCCL_CONFIG_UNDEF_INT) {
    if (config->blocking != 0 && config->blocking != 1) {
      fail(ncclInvalidArgument, "%s: config->blocking is %d, not 0 or 1", function,
           config->blocking);
      return false;
    }
    out->blocking = config->blocking;
  }
  if (has_field(config, offsetof(ncclConfig_t, commName), sizeof(const char*))) {
    out->commName = config->commName;
  }
  return true;
}

size_t datatype_size(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

ncclResult_t unsupported(const char* function, const char* instead) {
  return fail(ncclInvalidUsage, "%s is not supported by ccl%s%s", function,
              instead[0] != '\0' ? ": " : "", instead);
}

}  // namespace ccl_nccl
