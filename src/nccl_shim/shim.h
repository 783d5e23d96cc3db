// The pieces every entry point of the NCCL ABI library (libccl_nccl.so, soname libnccl.so.2)
// shares: the communicator handle NCCL's callers hold, NCCL's result codes from ccl's, the
// calling thread's last error, and NCCL's config read into ccl's. The library is built on ccl's
// public C API alone (include/ccl/ccl.h): what a program built against NCCL's nccl.h asks for is
// translated here, never reimplemented. docs/nccl-shim.md says what it maps and
// what it refuses.
#pragma once

#include <nccl.h>

#include <atomic>
#include <string>

#include "ccl/ccl.h"

// NCCL's opaque communicator, as the shim defines it: the ccl communicator and the CUDA device
// the program created it for (ncclCommCuDevice; 0 where there is no CUDA).
struct ncclComm {
  cclComm_t ccl = nullptr;
  int cuda_device = 0;
  // Between ncclCommSuspend and ncclCommResume: every operation on it is refused.
  std::atomic<bool> suspended{false};
};

namespace ccl_nccl {

// NCCL's code for a ccl result. The codes agree (ccl.h copies NCCL's, ncclTimeout included since
// NCCL 2.30); built against an older nccl.h, which has no ncclTimeout, ccl's cclTimeout becomes
// ncclRemoteError: a peer that did not answer in time (the last error says so).
ncclResult_t from_ccl(cclResult_t result);

// The calling thread's last error: the shim's own message when the shim refused a call itself,
// else ccl's for `comm` (ncclGetLastError). Every entry point begins with begin_call().
void begin_call();
ncclResult_t fail(ncclResult_t code, const char* format, ...) __attribute__((format(printf, 2, 3)));
const char* last_error(ncclComm_t comm);

// ccl's communicator of `comm`, or nullptr after fail(ncclInvalidArgument) naming `function`.
cclComm_t checked(ncclComm_t comm, const char* function);
// The same for an operation (a collective, a send or receive, a registration): nullptr also
// after fail(ncclInvalidUsage) while `comm` is suspended; *code is the failure's code.
cclComm_t checked_for_operation(ncclComm_t comm, const char* function, ncclResult_t* code);

// `config` (NULL: none) into ccl's; false after fail(ncclInvalidArgument) when it was not made
// by NCCL_CONFIG_INITIALIZER. Reads only the fields inside config->size (older callers' structs
// are shorter); the performance hints ccl has no use for (CTAs, NVLS, CGA, collnet, traffic
// class) are accepted and ignored, netName too (ccl picks its transport per pair: CCL_NET).
bool to_ccl_config(const ncclConfig_t* config, cclConfig_t* out, const char* function);

// The size of one element of an NCCL datatype, 0 for a value that is none.
size_t datatype_size(ncclDataType_t type);

// ncclInvalidUsage naming `function` as what ccl does not have, with a hint at what to use.
ncclResult_t unsupported(const char* function, const char* instead);

}  // namespace ccl_nccl

// NCCL's profiling names: every ncclX is also exported as pncclX (nccl.h declares both), the same
// function. Defined next to the functions, since an alias names a symbol of its own file.
#define CCL_NCCL_PROFILING_ALIAS(name) \
  extern "C" __typeof__(name) p##name __attribute__((alias(#name)));
