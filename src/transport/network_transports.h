// The network transports this build has, in ccl's order of preference between hosts (ib, ucx,
// tcp), each with a probe that says whether it can run here and a factory. The communicator's
// choice per pair (core/comm/transport_choice.h) and ccl-topo read this one list; a transport
// CMake did not build (no verbs.h, no libucx) is absent, and its name is still known so that
// CCL_NET=ucx can say why it is missing.
#pragma once

#include <memory>
#include <span>
#include <string_view>

#include "transport/net_availability.h"
#include "transport/transport.h"

namespace ccl::transport {

struct NetworkTransport {
  const char* name;  // as CCL_NET spells it and Transport::name() returns
  // Without connecting anything; may load a library or open a device, so asked once per init.
  NetAvailability (*probe)();
  std::unique_ptr<Transport> (*make)(const SetupContext& ctx);
};

// Every network transport ccl knows, built or not, in preference order.
inline constexpr std::string_view kNetworkTransportNames[] = {"ib", "ucx", "tcp"};

// The ones this build has, in preference order.
std::span<const NetworkTransport> network_transports();
// The entry named `name`, or nullptr when this build lacks it (or the name is unknown).
const NetworkTransport* find_network_transport(std::string_view name);

}  // namespace ccl::transport
