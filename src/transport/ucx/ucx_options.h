// What a ucx transport can be told beyond the SetupContext: for tests, and for a caller that
// knows better than the default. make_ucx_transport(ctx) uses the defaults.
#pragma once

#include <memory>

#include "transport/transport.h"

namespace ccl::transport::ucx {

struct UcxOptions {
  // The RMA handshake (ucx_connection.h) for registered buffers. kAuto: on an endpoint whose
  // UCX lanes do RMA in hardware (an "rma_bw" lane: rc, dc, ...), not where UCX would emulate
  // the put with active messages. Measured here (UCX 1.13.1, tcp over lo, the only lane UCX
  // takes for error-handling endpoints on this host): 1 MiB in 1027 us by emulated put against
  // 444 us by tagged chunks, 64 KiB in 90 us against 33 us.
  enum class Rma { kAuto, kAlways, kNever };
  Rma rma = Rma::kAuto;
};

std::unique_ptr<Transport> make_ucx_transport(const SetupContext& ctx, const UcxOptions& options);

}  // namespace ccl::transport::ucx
