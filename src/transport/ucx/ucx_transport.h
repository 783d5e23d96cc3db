// The UCX transport: UCP tagged messages, and RMA puts into registered receive buffers, between
// the ranks of a communicator, over what UCX finds (InfiniBand/RoCE rc, ud, dc; tcp). One UCP
// context and one worker per communicator, one endpoint per peer.
//
// Endpoints handle peer failure (UCP_ERR_HANDLING_MODE_PEER), which UCX 1.13 cannot do over its
// shared-memory transports (posix, sysv: "no peer failure handler"): ranks on one host talk over
// tcp (or an RDMA device) under ucx, and UCX_TLS=posix,sysv,cma leaves it unavailable.
//
// Setup through the store (ucx_setup.h), messages and the RMA handshake (ucx_connection.h),
// sleeping on the worker's event fd (ucx_transport.cc), registration (ucx_memory.h), options
// (ucx_options.h). UCX's own settings apply (UCX_TLS, UCX_NET_DEVICES, ...);
// UCX_KEEPALIVE_INTERVAL defaults to 250 ms here (ucx_worker.h).
#pragma once

#include <memory>

#include "transport/net_availability.h"
#include "transport/transport.h"

namespace ccl::transport {

// The transport of one communicator; name() "ucx". ctx supplies the rank, nranks and abort flag;
// connect() must be given the same comm_tag and store. Throws SystemError when UCX cannot
// initialize (see ucx_availability()).
std::unique_ptr<Transport> make_ucx_transport(const SetupContext& ctx);

// Whether a UCP context initializes here and makes error-handling endpoints; detail: UCX's
// version and the transports it found ("UCX 1.13.1: tcp (eth0, lo), sysv, posix, cma"), or why
// not. by_default only where UCX has an RDMA transport (rc, ud, dc): on plain TCP ccl's own tcp
// is taken by default. Asked once per process, then cached (the UCX_TLS of the first call counts).
NetAvailability ucx_availability();

}  // namespace ccl::transport
