// Writing ccl's topology file (the format is described in topology_xml.h), and the topology
// this process uses.
#include "topology/topology_xml.h"

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <memory>

#include "base/config.h"
#include "base/error.h"
#include "base/log.h"
#include "topology/hwloc_discovery.h"

namespace ccl::topo {

namespace {

// Attribute text. XML 1.0 cannot hold other control characters at all, even as references, so
// they are refused here rather than written into a file nothing can read back.
void append_escaped(std::string& out, const std::string& text) {
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      // References, because a parser turns literal ones in attributes into spaces.
      case '\t':
        out += "&#9;";
        break;
      case '\n':
        out += "&#10;";
        break;
      case '\r':
        out += "&#13;";
        break;
      default:
        if (c < 0x20) {
          throw_error(cclInvalidArgument, "topology: control character 0x%02x in '%s'", c,
                      text.c_str());
        }
        out += ch;
    }
  }
}

void append_attr(std::string& out, const char* key, const std::string& value) {
  out += ' ';
  out += key;
  out += "=\"";
  append_escaped(out, value);
  out += '"';
}

// The shortest text that parses back to the same double: exact round trips, "64" not "64.000000".
std::string format_double(double v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

std::string format_hex(uint32_t v) {
  char buf[16];
  snprintf(buf, sizeof buf, "0x%04x", v);
  return buf;
}

void write_node(const Topology& topo, int id, int depth, std::string& out) {
  const Node& n = topo.node(id);
  out.append(static_cast<size_t>(depth) * 2, ' ');
  out += '<';
  out += node_type_name(n.type);
  append_attr(out, "name", n.name);
  if (!n.hostname.empty()) append_attr(out, "hostname", n.hostname);
  if (n.os_index != -1) append_attr(out, "os_index", std::to_string(n.os_index));
  if (!n.cpuset.empty()) append_attr(out, "cpuset", n.cpuset);
  if (n.memory_bytes != 0) append_attr(out, "memory_bytes", std::to_string(n.memory_bytes));
  if (!n.bus_id.empty()) append_attr(out, "bus_id", n.bus_id);
  if (n.vendor != 0) append_attr(out, "vendor", format_hex(n.vendor));
  if (n.device != 0) append_attr(out, "device", format_hex(n.device));
  if (n.pci_class != 0) append_attr(out, "pci_class", format_hex(n.pci_class));
  if (n.link_gbps != 0) append_attr(out, "link_gbps", format_double(n.link_gbps));
  if (!n.os_devices.empty()) {
    std::string list;
    for (const std::string& dev : n.os_devices) {
      if (dev.empty() || dev.find(',') != std::string::npos) {
        throw_error(cclInvalidArgument,
                    "topology: node '%s': OS device name '%s' is empty or has a comma",
                    n.name.c_str(), dev.c_str());
      }
      list += (list.empty() ? "" : ",") + dev;
    }
    append_attr(out, "os_devices", list);
  }
  if (n.children.empty()) {
    out += "/>\n";
    return;
  }
  out += ">\n";
  for (int child : n.children) write_node(topo, child, depth + 1, out);
  out.append(static_cast<size_t>(depth) * 2, ' ');
  out += "</";
  out += node_type_name(n.type);
  out += ">\n";
}

}  // namespace

std::string to_xml(const Topology& topo) {
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ccl_topology version=\"1\">\n";
  write_node(topo, topo.root(), 1, out);
  for (const Link& l : topo.links()) {
    out += "  <link";
    append_attr(out, "a", topo.node(l.a).name);
    append_attr(out, "b", topo.node(l.b).name);
    append_attr(out, "type", link_type_name(l.type));
    append_attr(out, "count", std::to_string(l.count));
    append_attr(out, "gbps", format_double(l.gbps));
    out += "/>\n";
  }
  out += "</ccl_topology>\n";
  return out;
}

void save_topology_file(const Topology& topo, const std::string& path) {
  const std::string text = to_xml(topo);
  std::unique_ptr<FILE, int (*)(FILE*)> f(fopen(path.c_str(), "w"), fclose);
  if (!f) throw_system_error(errno, "topology: cannot write %s", path.c_str());
  if (fwrite(text.data(), 1, text.size(), f.get()) != text.size() || fflush(f.get()) != 0) {
    throw_system_error(errno, "topology: cannot write %s", path.c_str());
  }
}

const Topology& system_topology() {
  // A function-local static: initialised once, thread-safe, and retried if it threw.
  static const Topology topo = [] {
    const std::string file = config_string("CCL_TOPO_FILE");
    Topology t = file.empty() ? discover_local() : load_topology_file(file);
    CCL_INFO(kTopo,
             "topology %s: %zu packages, %zu NUMA nodes, %zu cores, %zu GPUs, %zu NICs, %zu links",
             file.empty() ? "discovered" : file.c_str(), t.of_type(NodeType::Package).size(),
             t.of_type(NodeType::Numa).size(), t.of_type(NodeType::Core).size(),
             t.of_type(NodeType::Gpu).size(), t.of_type(NodeType::Nic).size(), t.links().size());
    const std::string dump = config_string("CCL_TOPO_DUMP_FILE");
    if (!dump.empty()) {
      // A debugging aid: failing to write it must not fail the communicator.
      try {
        save_topology_file(t, dump);
        CCL_INFO(kTopo, "topology written to %s", dump.c_str());
      } catch (const Error& e) {
        CCL_WARN(kTopo, "CCL_TOPO_DUMP_FILE: %s", e.what());
      }
    }
    return t;
  }();
  return topo;
}

}  // namespace ccl::topo
