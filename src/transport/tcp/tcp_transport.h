// The TCP transport: one non-blocking, TCP_NODELAY socket per connected peer pair.
//
// Setup: each rank listens on choose_interface()'s address (CCL_SOCKET_IFNAME picks the
// interface) and publishes "<comm_tag>/tcp/<rank>" = "host:port" in the store. For each pair the
// higher rank connects to the lower and sends a hello; the lower validates it and answers with an
// ack (tcp_handshake.h). Data: each message is a 16-byte frame header then its payload
// (tcp_wire.h, tcp_connection.h).
#pragma once

#include <memory>

#include "transport/transport.h"

namespace ccl::transport {

// The transport of one communicator. ctx supplies the rank, nranks and abort flag; connect()
// must be given the same comm_tag and store.
std::unique_ptr<Transport> make_tcp_transport(const SetupContext& ctx);

}  // namespace ccl::transport
