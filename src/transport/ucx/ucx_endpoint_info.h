// What UCX chose for an endpoint, read from ucp_ep_print_info (UCX 1.13 has no query for an
// endpoint's lanes): the lines "lane[N]: ... -> ... am am_bw#0 rma_bw#0 keepalive wireup" name
// what each lane is used for.
#pragma once

#include <ucp/api/ucp.h>

#include <string>
#include <string_view>

namespace ccl::transport::ucx {

// ucp_ep_print_info's text.
std::string endpoint_info(ucp_ep_h ep);

// Whether a lane moves RMA natively ("rma#", "rma_bw#"); RMA emulated over active messages
// (UCX's rma_am, as over tcp) has none.
bool has_rma_lane(std::string_view info);

}  // namespace ccl::transport::ucx
