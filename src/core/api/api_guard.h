// The C boundary: every API function runs its body through guarded(), which turns a thrown
// ccl::Error into its cclResult_t, remembers the message for cclGetLastError, and logs it.
#pragma once

#include <string>
#include <utility>

#include "ccl/ccl.h"
#include "core/comm/comm.h"

namespace ccl {

// Converts the exception being handled into a result (current_exception_result, base/error.h);
// records it as the communicator's last error too when there is one.
cclResult_t handle_current_exception(Communicator* comm, const char* function);

// For API calls that have no communicator.
inline constexpr Communicator* kNoComm = nullptr;

// The communicator behind a handle, or nullptr if the handle is not a live one.
inline Communicator* impl_of(cclComm* comm) {
  return comm != nullptr && comm->magic == cclComm::kMagic ? comm->impl.get() : nullptr;
}

template <class Body>
cclResult_t guarded(Communicator* comm, const char* function, Body&& body) noexcept {
  try {
    body();
    return cclSuccess;
  } catch (...) {
    return handle_current_exception(comm, function);
  }
}

template <class Body>
cclResult_t guarded(cclComm* comm, const char* function, Body&& body) noexcept {
  return guarded(impl_of(comm), function, std::forward<Body>(body));
}

// Argument checks shared by the API functions; each throws InvalidArgument naming the argument.
Communicator& checked_comm(cclComm* comm, const char* function);
void check_datatype(cclDataType_t type, const char* function);
// A built-in op, or a PreMulSum op of `comm` made for `type` (check the datatype first).
void check_op(Communicator& comm, cclRedOp_t op, cclDataType_t type, const char* function);
void check_buffer(const void* buffer, const char* name, size_t count, const char* function);
void check_count(size_t count, cclDataType_t type, const char* function);
void check_rank(int rank, int nranks, const char* name, const char* function);

}  // namespace ccl
