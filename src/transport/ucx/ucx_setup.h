// Setup of a ucx transport's endpoints: each rank publishes its worker address in the store under
// "<comm_tag>/ucx/<rank>" (once), reads each new peer's, creates one endpoint per peer with
// UCP_ERR_HANDLING_MODE_PEER, and then every pair exchanges a HelloWire (ucx_wire.h) over it.
//
// The hello is what makes connect() mean connected: UCX creates endpoints lazily, so without it
// an unreachable peer or a worker of another communicator would show only at the first message.
// It also completes UCX's wire-up while connect() may still block (bounded by ctx.deadline and the
// abort flag). So connect() returns once every listed peer has called connect() listing this rank
// too: a peer whose call comes later waits for it. The communicator connects each transport once,
// in one order on every rank (core/comm/peers.cc), so these waits cannot form a cycle.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "transport/transport.h"
#include "transport/ucx/ucx_connection.h"
#include "transport/ucx/ucx_options.h"
#include "transport/ucx/ucx_worker.h"

namespace ccl::transport::ucx {

std::string address_key(const std::string& comm_tag, int rank);

// Publishes this rank's address unless `*published` (then sets it).
void publish_address(const SetupContext& ctx, const UcxWorker& worker, bool* published);

// One connected UcxConnection per rank of `peers` (none connected before), after the hello
// exchange. Throws Timeout at ctx.deadline, RemoteError on abort or for a peer that fails the
// hello (naming it), SystemError when UCX cannot make an endpoint; the connections made so far
// are then torn down and moved to `retired`, which must outlive the worker (its error handlers
// and requests may still refer to them).
std::vector<std::unique_ptr<UcxConnection>> connect_peers(
    const SetupContext& ctx, UcxWorker& worker, std::span<const int> peers,
    const UcxOptions& options, std::vector<std::unique_ptr<UcxConnection>>& retired);

}  // namespace ccl::transport::ucx
