// What the C functions that make communicators share (api_comm.cc, api_recovery.cc): the default
// timeout, a config over options, a handle, a join through a rendezvous, and the result of a call
// that made a communicator.
#pragma once

#include <chrono>
#include <memory>

#include "ccl/ccl.h"
#include "core/bootstrap/socket.h"
#include "core/bootstrap/unique_id.h"
#include "core/comm/comm.h"

namespace ccl::api {

std::chrono::milliseconds default_timeout();  // CCL_TIMEOUT
// The config's settings over `options` (the library defaults, or a parent's settings).
void apply_config(CommOptions& options, const cclConfig_t* config, const char* function);
// Checked rank and size, the defaults, then the config.
CommOptions make_options(int nranks, int rank, const cclConfig_t* config, const char* function);
cclComm* make_handle(std::shared_ptr<Communicator> impl);
// Joins the communicator whose rendezvous is at `root`: now, or in the background when the
// options say non-blocking.
cclComm* join(const CommOptions& options, const SocketAddress& root, const Secret& secret);
// The result of a call that made `comm`: cclInProgress when it joins in the background.
cclResult_t made(cclResult_t result, const cclComm* comm);

}  // namespace ccl::api
