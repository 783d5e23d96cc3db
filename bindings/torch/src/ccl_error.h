// How a failed ccl call becomes a Python exception: the text names the operation, ccl's error and
// the communicator's last error; a refused argument is the caller's mistake (ValueError),
// anything else a failure of the communicator or a peer (RuntimeError).
#pragma once

#include <string>

#include "ccl/ccl.h"

namespace ccl_torch {

// "ccl <name>: <ccl's error string>: <cclGetLastError(comm)>" (comm may be null). A timeout
// says " Timed out ", as Gloo's do: torch's suite and users' scripts look for it.
std::string ccl_error_text(const char* name, cclResult_t result, cclComm_t comm);

[[noreturn]] void throw_failure(cclResult_t result, const std::string& text);

}  // namespace ccl_torch
