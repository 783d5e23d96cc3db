#include "ccl_error.h"

#include <c10/util/Exception.h>

namespace ccl_torch {

std::string ccl_error_text(const char* name, cclResult_t result, cclComm_t comm) {
  std::string text = std::string("ccl ") + name + ": ";
  if (result == cclTimeout) {
    text +=
        std::string("Timed out at the communicator's timeout (") + cclGetErrorString(result) + ")";
  } else {
    text += cclGetErrorString(result);
  }
  const char* detail = comm != nullptr ? cclGetLastError(comm) : nullptr;
  if (detail != nullptr && *detail != '\0') text += std::string(": ") + detail;
  return text;
}

void throw_failure(cclResult_t result, const std::string& text) {
  if (result == cclInvalidArgument || result == cclInvalidUsage) TORCH_CHECK_VALUE(false, text);
  TORCH_CHECK(false, text);
}

}  // namespace ccl_torch
