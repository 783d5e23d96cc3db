// The InfiniBand/RoCE verbs transport: RC queue pairs between each pair of ranks, data moved by
// receiver-driven RDMA writes (ib_connection.h), set up through the store (ib_setup.h).
// libibverbs is loaded at run time (verbs_api.h): where it or a device is missing, the transport
// is unavailable and ib_availability() says why.
//
// Settings, read when a transport is made: CCL_IB_HCA (which device and port; the first usable
// one, or the local rank's among several), CCL_IB_GID_INDEX and CCL_IB_ADDR_FAMILY (RoCE GID),
// CCL_IB_QPS_PER_CONNECTION, CCL_IB_TIMEOUT, CCL_IB_RETRY_CNT, CCL_BUFFSIZE (a quarter of it is
// the largest single write and a bounce slot; four slots per connection).
#pragma once

#include <memory>

#include "transport/net_availability.h"
#include "transport/transport.h"

namespace ccl::transport {

// Without connecting anything: whether the verbs library loads and a device has an active port
// that CCL_IB_HCA accepts (and, on RoCE, a GID to use). detail names the port and its address
// ("mlx5_0:1 RoCE v2 GID 3 ::ffff:10.0.0.1") or the reason (dlerror's text, the ports skipped).
NetAvailability ib_availability();

// The transport of one communicator. Throws SystemError (why) where ib_availability() would say
// unavailable, InvalidUsage for malformed settings.
std::unique_ptr<Transport> make_ib_transport(const SetupContext& ctx);

}  // namespace ccl::transport
