// The TCP transport: non-blocking, TCP_NODELAY sockets per connected peer pair (one by default).
//
// Setup: each rank listens on choose_interface()'s address (CCL_SOCKET_IFNAME picks the
// interface) and publishes "<comm_tag>/tcp/<rank>" = "host:port" in the store. For each pair the
// higher rank connects to the lower and sends a hello; the lower validates it and answers with an
// ack (tcp_handshake.h). Data: each message is a 16-byte frame header then its payload
// (tcp_wire.h, tcp_connection.h).
//
// Several sockets per peer (CCL_SOCKET_NTHREADS x CCL_NSOCKS_PERTHREAD, default 1 x 1, at most
// 64): the handshake opens that many per pair, each hello tagged with its index; socket 0 carries
// the headers and small messages, messages of 2 x 64 KiB and more are spread over all of them in
// chunks (tcp_chunks.h, tcp_multi_connection.h). With NTHREADS > 1, helper threads per peer move
// the chunks of sockets 1..N-1. One socket (the default) keeps TcpConnection exactly as before.
//
// What paid, measured on loopback (tcp_perf_test, ranks as threads of one process, 64 MiB one
// way, best of 4, Release, 2 cores shared with other builds, three runs each; GB/s direct / copy):
//   1x1: 1.4-3.1 / 1.4-3.7   1x4: 1.7-3.4 / 1.8-3.6   2x2: 2.2-3.3 / 1.7-2.3   4x1: 1.9-3.5
//   / 1.8-2.9
// and the 8-byte round trip stays 10-16 us in quiet runs in every mode (small messages use
// socket 0 alone, which the caller drives even with helper threads).
// The spread between runs is as wide as between modes: with two cores there is no spare core for
// a helper thread's copies, so neither more sockets nor threads paid here; they are for hosts
// with cores to spare and links where one TCP stream cannot fill the pipe (window, per-flow
// limits). End to end (2 processes, all_reduce_perf): tcp_multi_connection.h.
#pragma once

#include <memory>

#include "transport/transport.h"

namespace ccl::transport {

// The transport of one communicator. ctx supplies the rank, nranks and abort flag; connect()
// must be given the same comm_tag and store.
std::unique_ptr<Transport> make_tcp_transport(const SetupContext& ctx);

}  // namespace ccl::transport
