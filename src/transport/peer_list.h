// The argument check every network transport's connect() makes, and the peers it still has to
// connect (transport.h: Transport::connect).
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "transport/transport.h"

namespace ccl::transport {

// Throws cclInvalidUsage when `ctx` is another communicator's than the transport's (`rank`,
// `nranks`, `comm_tag`), cclInvalidArgument when a rank is listed twice in `peers`, is out of
// range or is this rank; the messages start with `transport` ("ib: ..."). Returns the peers, in
// the order of `peers`, for which `connected` is false: those an earlier call did not connect.
std::vector<int> peers_to_connect(const char* transport, const SetupContext& ctx, int rank,
                                  int nranks, const std::string& comm_tag,
                                  std::span<const int> peers,
                                  const std::function<bool(int)>& connected);

}  // namespace ccl::transport
