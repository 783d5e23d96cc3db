#include "transport/ib/ib_devices.h"

#include <cerrno>
#include <cstring>

#include "base/error.h"
#include "base/log.h"

namespace ccl::transport::ib {
namespace {

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t')) --e;
  return std::string(s.substr(b, e - b));
}

const char* port_state_name(int state) {
  switch (state) {
    case IBV_PORT_DOWN:
      return "DOWN";
    case IBV_PORT_INIT:
      return "INIT";
    case IBV_PORT_ARMED:
      return "ARMED";
    case IBV_PORT_ACTIVE:
      return "ACTIVE";
    default:
      return "not active";
  }
}

// Queries one port; true if it is usable (then *out is filled), else *why says why not.
bool probe_port(const VerbsApi& api, ibv_context* context, const std::string& device, int port,
                const GidPolicy& policy, const std::string& sysfs_root, IbPort* out,
                std::string* why) {
  const std::string where = device + ":" + std::to_string(port);
  ibv_port_attr attr{};
  int rc = api.query_port(context, static_cast<uint8_t>(port), &attr);
  if (rc != 0) {
    *why = where + ": query_port failed: " + std::strerror(rc);
    return false;
  }
  if (attr.state != IBV_PORT_ACTIVE) {
    *why = where + " is " + port_state_name(attr.state);
    return false;
  }
  IbPort p;
  p.device = device;
  p.port = port;
  p.ethernet = attr.link_layer == IBV_LINK_LAYER_ETHERNET;
  p.active_mtu = attr.active_mtu;
  if (!p.ethernet) {
    if (attr.lid == 0) {
      *why = where + ": InfiniBand port without a LID (no subnet manager?)";
      return false;
    }
    p.lid = attr.lid;
    p.gid.index = 0;
    *out = p;
    return true;
  }
  auto gid = select_roce_gid(sysfs_root, device, port, policy, why);
  if (!gid) return false;
  // The library's view of the entry is the one the QP will use; sysfs only chose it.
  ibv_gid queried{};
  rc = api.query_gid(context, static_cast<uint8_t>(port), gid->index, &queried);
  if (rc != 0) {
    *why = where + ": query_gid(" + std::to_string(gid->index) + ") failed: " + std::strerror(rc);
    return false;
  }
  if (!gid_is_zero(queried)) gid->gid = queried;
  if (gid_is_zero(gid->gid)) {
    *why = where + ": GID " + std::to_string(gid->index) + " is empty";
    return false;
  }
  p.gid = *gid;
  *out = p;
  return true;
}

}  // namespace

bool HcaFilter::accepts(std::string_view device, int port) const {
  if (entries.empty()) return true;
  bool listed = false;
  for (const Entry& e : entries) {
    const bool name_ok = exact ? device == e.name : device.substr(0, e.name.size()) == e.name;
    if (name_ok && (e.port < 0 || e.port == port)) {
      listed = true;
      break;
    }
  }
  return listed != exclude;
}

HcaFilter parse_hca_filter(std::string_view text) {
  HcaFilter filter;
  std::string_view rest = text;
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  if (!rest.empty() && rest.front() == '^') {
    filter.exclude = true;
    rest.remove_prefix(1);
  }
  if (!rest.empty() && rest.front() == '=') {
    filter.exact = true;
    rest.remove_prefix(1);
  }
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string item = trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (item.empty()) continue;
    HcaFilter::Entry entry;
    size_t colon = item.find(':');
    entry.name = trim(std::string_view(item).substr(0, colon));
    if (colon != std::string::npos) {
      const std::string port = trim(std::string_view(item).substr(colon + 1));
      char* end = nullptr;
      errno = 0;
      long value = std::strtol(port.c_str(), &end, 10);
      if (port.empty() || *end != '\0' || errno != 0 || value < 1 || value > 255) {
        throw_error(cclInvalidUsage, "CCL_IB_HCA='%.*s': '%s' is not device:port (port >= 1)",
                    static_cast<int>(text.size()), text.data(), item.c_str());
      }
      entry.port = static_cast<int>(value);
    }
    if (entry.name.empty()) {
      throw_error(cclInvalidUsage, "CCL_IB_HCA='%.*s': an entry without a device name",
                  static_cast<int>(text.size()), text.data());
    }
    filter.entries.push_back(std::move(entry));
  }
  return filter;
}

std::string IbPort::describe() const {
  std::string s = device + ":" + std::to_string(port);
  if (!ethernet) return s + " IB LID " + std::to_string(lid);
  return s + " " + (gid.type.empty() ? std::string("RoCE") : gid.type) + " GID " +
         std::to_string(gid.index) + " " + gid_to_string(gid.gid);
}

PortScan scan_ports(const VerbsApi& api, const HcaFilter& filter, const GidPolicy& policy,
                    const std::string& sysfs_root) {
  PortScan scan;
  int count = 0;
  ibv_device** list = api.get_device_list(&count);
  if (list == nullptr) {
    const int err = errno;
    scan.skipped.push_back(std::string("ibv_get_device_list failed: ") + std::strerror(err) +
                           (err == ENOSYS ? " (no RDMA support in this kernel)" : ""));
    return scan;
  }
  for (int d = 0; d < count; ++d) {
    const std::string name = api.get_device_name(list[d]);
    ibv_context* context = api.open_device(list[d]);
    if (context == nullptr) {
      scan.skipped.push_back(name + ": open_device failed: " + std::strerror(errno));
      continue;
    }
    ibv_device_attr attr{};
    int rc = api.query_device(context, &attr);
    if (rc != 0) {
      scan.skipped.push_back(name + ": query_device failed: " + std::strerror(rc));
    } else {
      for (int port = 1; port <= attr.phys_port_cnt; ++port) {
        if (!filter.accepts(name, port)) {
          scan.skipped.push_back(name + ":" + std::to_string(port) + " excluded by CCL_IB_HCA");
          continue;
        }
        IbPort p;
        std::string why;
        if (probe_port(api, context, name, port, policy, sysfs_root, &p, &why)) {
          scan.ports.push_back(std::move(p));
        } else {
          scan.skipped.push_back(why);
        }
      }
    }
    api.close_device(context);
  }
  api.free_device_list(list);
  for (const std::string& s : scan.skipped) CCL_INFO(kNet | kInit, "ib: skipping %s", s.c_str());
  return scan;
}

std::string why_no_port(const PortScan& scan) {
  if (scan.skipped.empty()) return "no InfiniBand/RoCE device found";
  std::string s = "no usable InfiniBand/RoCE port: ";
  for (size_t i = 0; i < scan.skipped.size(); ++i) {
    if (i > 0) s += "; ";
    s += scan.skipped[i];
  }
  return s;
}

}  // namespace ccl::transport::ib
