#include "core/api/api_guard.h"

#include <new>

#include "algorithms/reduce/reduce.h"
#include "base/error.h"
#include "base/log.h"

namespace ccl {

namespace {
thread_local std::string t_last_error;
}

const char* thread_last_error() { return t_last_error.c_str(); }

cclResult_t handle_current_exception(Communicator* comm, const char* function) {
  cclResult_t code = cclInternalError;
  std::string message;
  try {
    throw;
  } catch (const Error& e) {
    code = e.code();
    message = e.what();
  } catch (const std::bad_alloc&) {
    code = cclSystemError;
    message = std::string(function) + ": out of memory";
  } catch (const std::exception& e) {
    message = std::string(function) + ": internal error: " + e.what();
  } catch (...) {
    message = std::string(function) + ": internal error: unknown exception";
  }
  // Messages from deep inside may not name the API call; make sure they do.
  if (message.rfind(function, 0) != 0) message = std::string(function) + ": " + message;
  t_last_error = message;
  if (comm != nullptr) comm->set_last_error(message);
  CCL_WARN(kAll, "%s (%s)", message.c_str(), cclGetErrorString(code));
  return code;
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
