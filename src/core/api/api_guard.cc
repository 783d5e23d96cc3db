#include "core/api/api_guard.h"

#include "algorithms/reduce/reduce.h"
#include "base/error.h"

namespace ccl {

cclResult_t handle_current_exception(Communicator* comm, const char* function) {
  return comm != nullptr ? comm->record_exception(function) : current_exception_result(function);
}

Communicator& checked_comm(cclComm* comm, const char* function) {
  if (comm == nullptr) throw_error(cclInvalidArgument, "%s: comm is NULL", function);
  if (comm->magic != cclComm::kMagic || !comm->impl) {
    throw_error(cclInvalidArgument, "%s: comm is not a valid communicator (destroyed?)", function);
  }
  return *comm->impl;
}

void check_datatype(cclDataType_t type, const char* function) {
  if (static_cast<int>(type) < 0 || static_cast<int>(type) >= cclNumTypes) {
    throw_error(cclInvalidArgument, "%s: datatype %d is not a valid cclDataType_t", function,
                static_cast<int>(type));
  }
}

void check_op(Communicator& comm, cclRedOp_t op, cclDataType_t type, const char* function) {
  comm.reduction_ops().check(op, type, function);
}

void check_buffer(const void* buffer, const char* name, size_t count, const char* function) {
  if (count > 0 && buffer == nullptr) {
    throw_error(cclInvalidArgument, "%s: %s is NULL with count %zu", function, name, count);
  }
}

void check_count(size_t count, cclDataType_t type, const char* function) {
  size_t size = reduce::datatype_size(type);
  if (size != 0 && count > SIZE_MAX / size / 2) {
    throw_error(cclInvalidArgument, "%s: count %zu is too large", function, count);
  }
}

void check_rank(int rank, int nranks, const char* name, const char* function) {
  if (rank < 0 || rank >= nranks) {
    throw_error(cclInvalidArgument, "%s: %s %d is out of range [0, %d)", function, name, rank,
                nranks);
  }
}

}  // namespace ccl
