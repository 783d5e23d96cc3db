// Which InfiniBand/RoCE ports ccl may use: CCL_IB_HCA's filter (NCCL's syntax) and a scan of the
// devices the verbs library lists, keeping active ports only, each with how it is addressed (a
// LID on InfiniBand, a RoCE v2 GID on Ethernet, ib_gid.h).
//
// CCL_IB_HCA: a comma list of device-name prefixes ("mlx5" takes mlx5_0, mlx5_1...); a leading
// '^' excludes the listed devices instead; a leading '=' (after the '^' if both) compares exact
// names; "dev:port" restricts an entry to one port. Empty: every device.
#pragma once

#include <infiniband/verbs.h>

#include <string>
#include <string_view>
#include <vector>

#include "transport/ib/ib_gid.h"
#include "transport/ib/verbs_api.h"

namespace ccl::transport::ib {

struct HcaFilter {
  struct Entry {
    std::string name;
    int port = -1;  // -1: every port
  };
  bool exclude = false;
  bool exact = false;
  std::vector<Entry> entries;  // empty: nothing restricted

  bool accepts(std::string_view device, int port) const;
};

// Throws InvalidUsage naming CCL_IB_HCA for a port that is not a number >= 1.
HcaFilter parse_hca_filter(std::string_view text);

struct IbPort {
  std::string device;
  int port = 0;
  bool ethernet = false;  // RoCE; else InfiniBand
  uint16_t lid = 0;       // InfiniBand
  ibv_mtu active_mtu = IBV_MTU_1024;
  GidChoice gid;  // RoCE (index 0, unused, on InfiniBand)

  // One line for NetAvailability and logs: "mlx5_0:1 IB LID 3", "mlx5_0:1 RoCE v2 GID 3
  // ::ffff:10.0.0.1".
  std::string describe() const;
};

struct PortScan {
  std::vector<IbPort> ports;         // usable, in device then port order
  std::vector<std::string> skipped;  // why each other port or device was left out
};

// Lists the ports of every device `filter` accepts, querying them through `api`.
PortScan scan_ports(const VerbsApi& api, const HcaFilter& filter, const GidPolicy& policy,
                    const std::string& sysfs_root);

// One line saying why `scan` found nothing ("no InfiniBand device found", or the reasons).
std::string why_no_port(const PortScan& scan);

}  // namespace ccl::transport::ib
