#include <exception>

#include "base/config.h"
#include "transport/ib/ib_devices.h"
#include "transport/ib/ib_transport.h"
#include "transport/ib/verbs_api.h"

namespace ccl::transport {

NetAvailability ib_availability() {
  NetAvailability a;
  std::string why;
  const ib::VerbsApi* api = ib::verbs_api(&why);
  if (api == nullptr) {
    a.detail = why;
    return a;
  }
  try {
    const ib::PortScan scan =
        ib::scan_ports(*api, ib::parse_hca_filter(config_string("CCL_IB_HCA")),
                       ib::gid_policy_from_config(), ib::ib_sysfs_root());
    if (scan.ports.empty()) {
      a.detail = ib::why_no_port(scan);
      return a;
    }
    a.available = a.by_default = true;
    a.detail = scan.ports.front().describe();
    if (scan.ports.size() > 1) a.detail += " (+" + std::to_string(scan.ports.size() - 1) + ")";
  } catch (const std::exception& e) {
    a.detail = e.what();
  }
  return a;
}

}  // namespace ccl::transport
