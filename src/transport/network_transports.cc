#include "transport/network_transports.h"

#include <exception>

#include "core/bootstrap/socket.h"
#include "transport/tcp/tcp_transport.h"
#ifdef CCL_HAVE_IBVERBS
#include "transport/ib/ib_transport.h"
#endif
#ifdef CCL_HAVE_UCX
#include "transport/ucx/ucx_transport.h"
#endif

namespace ccl::transport {
namespace {

// tcp runs wherever an interface is up: the one it would listen on is the detail.
NetAvailability tcp_availability() {
  NetAvailability a;
  try {
    NetInterface nic = choose_interface();
    a.available = a.by_default = true;
    a.detail = nic.name + " " + nic.address.to_string();
  } catch (const std::exception& e) {
    a.detail = e.what();
  }
  return a;
}

const NetworkTransport kTransports[] = {
#ifdef CCL_HAVE_IBVERBS
    {"ib", ib_availability, make_ib_transport},
#endif
#ifdef CCL_HAVE_UCX
    {"ucx", ucx_availability, make_ucx_transport},
#endif
    {"tcp", tcp_availability, make_tcp_transport},
};

}  // namespace

std::span<const NetworkTransport> network_transports() { return kTransports; }

const NetworkTransport* find_network_transport(std::string_view name) {
  for (const NetworkTransport& t : kTransports) {
    if (name == t.name) return &t;
  }
  return nullptr;
}

}  // namespace ccl::transport
