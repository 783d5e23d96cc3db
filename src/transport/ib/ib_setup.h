// Connection setup of the ib transport through the store: each end of a pair creates its QPs,
// publishes "<comm_tag>/ib/<rank>/<peer>" (its QP numbers, first PSNs, LID or GID, MTU and the
// address and rkey of its control block, ib_wire.h), reads the peer's record, takes its QPs to
// RTS, posts its receives and publishes ".../ready"; connect() returns once the peer is ready
// too, so neither end writes to a QP that cannot receive yet.
#pragma once

#include <map>
#include <memory>
#include <span>

#include "transport/ib/ib_connection.h"
#include "transport/ib/ib_qp.h"
#include "transport/transport.h"

namespace ccl::transport::ib {

struct IbSetupOptions {
  int qps = 1;  // CCL_IB_QPS_PER_CONNECTION: both ends must agree
  QpTimeouts timeouts;
  IbConnectionOptions connection;
};

// One connected IbConnection per rank of `peers`. Blocks until each peer has published, until
// ctx.deadline (Timeout naming the peer) or *ctx.abort (RemoteError).
std::map<int, std::unique_ptr<IbConnection>> establish(const SetupContext& ctx, IbDevice& device,
                                                       IbRegCache& cache,
                                                       std::span<const int> peers,
                                                       const IbSetupOptions& options);

}  // namespace ccl::transport::ib
