#include "topology/render.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "topology/orders.h"
#include "topology/paths.h"

namespace ccl::topo {

namespace {

// Runs of more cores than this, side by side without children, are one line ("core0..core55"):
// a 2x56-core machine's tree should fit on a screen, and their cpus are on the NUMA line anyway.
constexpr size_t kMaxCoresListed = 4;

// One decimal at most, none when it is zero: "64", "31.5", "6.6".
std::string format_number(double v) {
  char buf[64];
  snprintf(buf, sizeof buf, "%.1f", v);
  std::string s = buf;
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
  return s;
}

std::string format_memory(uint64_t bytes) {
  const double gib = static_cast<double>(bytes) / (1ull << 30);
  if (gib >= 1) return format_number(gib) + " GiB";
  return format_number(static_cast<double>(bytes) / (1ull << 20)) + " MiB";
}

std::string hex4(unsigned v) {
  char buf[16];
  snprintf(buf, sizeof buf, "%04x", v);
  return buf;
}

// The useful attributes of a node, as "key value" parts.
std::vector<std::string> describe(const Node& n) {
  std::vector<std::string> parts;
  if (!n.hostname.empty()) parts.push_back("host " + n.hostname);
  if (!n.cpuset.empty()) parts.push_back("cpus " + n.cpuset);
  if (n.memory_bytes != 0) parts.push_back("memory " + format_memory(n.memory_bytes));
  if (!n.bus_id.empty()) parts.push_back("bus " + n.bus_id);
  if (n.vendor != 0 || n.device != 0)
    parts.push_back("id " + hex4(n.vendor) + ":" + hex4(n.device));
  if (n.link_gbps != 0) parts.push_back("link " + format_number(n.link_gbps) + " GB/s");
  if (n.type == NodeType::Gpu && n.os_index >= 0) {
    parts.push_back("cuda " + std::to_string(n.os_index));
  }
  if (!n.os_devices.empty()) {
    std::string os = "os ";
    for (size_t i = 0; i < n.os_devices.size(); ++i) os += (i ? "," : "") + n.os_devices[i];
    parts.push_back(os);
  }
  return parts;
}

// A line of the tree: one node, or a run of plain cores [first, last] (node ids).
struct Item {
  int first;
  int last;
  size_t count;
};

std::vector<Item> items_of(const Topology& topo, const Node& parent) {
  std::vector<Item> items;
  const auto& kids = parent.children;
  for (size_t i = 0; i < kids.size();) {
    size_t j = i;
    auto plain_core = [&](size_t k) {
      return topo.node(kids[k]).type == NodeType::Core && topo.node(kids[k]).children.empty();
    };
    while (j < kids.size() && plain_core(j)) ++j;
    if (j - i > kMaxCoresListed) {
      items.push_back({kids[i], kids[j - 1], j - i});
      i = j;
    } else {
      items.push_back({kids[i], kids[i], 1});
      ++i;
    }
  }
  return items;
}

std::string item_name(const Topology& topo, const Item& item) {
  if (item.count == 1) return topo.node(item.first).name;
  return topo.node(item.first).name + ".." + topo.node(item.last).name;
}

std::vector<std::string> item_parts(const Topology& topo, const Item& item) {
  if (item.count == 1) return describe(topo.node(item.first));
  return {std::to_string(item.count) + " cores"};
}

void tree_lines(const Topology& topo, const Item& item, int depth, std::string& out) {
  out.append(static_cast<size_t>(depth) * 2, ' ');
  out += item_name(topo, item);
  for (const std::string& part : item_parts(topo, item)) out += "  " + part;
  out += '\n';
  if (item.count != 1) return;
  for (const Item& child : items_of(topo, topo.node(item.first))) {
    tree_lines(topo, child, depth + 1, out);
  }
}

std::string link_text(const Link& l) {
  std::string s = std::string(topo::link_type_name(l.type)) + " x" + std::to_string(l.count);
  if (l.gbps != 0) s += "  " + format_number(l.gbps) + " GB/s";
  return s;
}

// The rank devices (GPUs, else NUMA nodes) and the NICs: where ranks sit and where their traffic
// leaves the machine, the pairs whose path classes matter.
std::vector<int> matrix_devices(const Topology& topo) {
  std::vector<int> devices = topo.of_type(NodeType::Gpu);
  if (devices.empty()) devices = topo.of_type(NodeType::Numa);
  for (int nic : topo.of_type(NodeType::Nic)) devices.push_back(nic);
  return devices;
}

void matrix_lines(const Topology& topo, std::string& out) {
  const std::vector<int> devices = matrix_devices(topo);
  if (devices.empty()) {
    out += "paths: no GPUs, NUMA nodes or NICs\n";
    return;
  }
  size_t width = 3;
  for (int d : devices) width = std::max(width, topo.node(d).name.size());
  auto cell = [&](const std::string& text) {
    return text + std::string(width + 2 - text.size(), ' ');
  };
  out += "paths:\n";
  std::string line = cell("");
  for (int d : devices) line += cell(topo.node(d).name);
  while (!line.empty() && line.back() == ' ') line.pop_back();
  out += line + '\n';
  for (int a : devices) {
    line = cell(topo.node(a).name);
    for (int b : devices) line += cell(topo::path_class_name(topo::path_class(topo, a, b)));
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + '\n';
  }
  out +=
      "legend: LOC same device, NVL NVLink (direct or through NVSwitches), NVB NVLink through a\n"
      "        GPU, PIX one PCI switch, PXB several PCI switches, PHB through a CPU's host\n"
      "        bridge, SYS across the SMP link between packages\n";
}

std::string order_line(const Topology& topo, const char* what, const std::vector<int>& devices,
                       const std::vector<int>& order) {
  std::string line = what;
  for (int i : order) line += " " + topo.node(devices.at(static_cast<size_t>(i))).name;
  return line + '\n';
}

std::string dot_quote(const std::string& text) {
  std::string s = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') s += '\\';
    s += c;
  }
  return s + '"';
}

void dot_nodes(const Topology& topo, const Item& item, std::string& out) {
  const std::string name = item_name(topo, item);
  std::string label = name;
  for (const std::string& part : item_parts(topo, item)) label += "\n" + part;
  std::string quoted = dot_quote(label);
  // A newline in a dot label is written \n.
  for (size_t at = 0; (at = quoted.find('\n', at)) != std::string::npos; at += 2) {
    quoted.replace(at, 1, "\\n");
  }
  out += "  " + dot_quote(name) + " [label=" + quoted + "];\n";
  if (item.count != 1) return;
  for (const Item& child : items_of(topo, topo.node(item.first))) {
    out += "  " + dot_quote(name) + " -> " + dot_quote(item_name(topo, child));
    const double gbps = child.count == 1 ? topo.node(child.first).link_gbps : 0;
    if (gbps != 0) out += " [label=" + dot_quote(format_number(gbps) + " GB/s") + "]";
    out += ";\n";
    dot_nodes(topo, child, out);
  }
}

}  // namespace

std::string render_text(const Topology& topo) {
  std::string out;
  tree_lines(topo, {topo.root(), topo.root(), 1}, 0, out);

  out += "\nlinks:";
  if (topo.links().empty()) out += " none";
  out += '\n';
  for (const Link& l : topo.links()) {
    out += "  " + topo.node(l.a).name + " -- " + topo.node(l.b).name + "  " + link_text(l) + '\n';
  }

  out += '\n';
  matrix_lines(topo, out);

  const std::vector<int> devices = topo::rank_devices(topo);
  out += '\n';
  out += order_line(topo, "ring order:", devices, topo::ring_order(topo, devices));
  out += order_line(topo, "tree order:", devices, topo::tree_order(topo, devices));
  return out;
}

std::string render_dot(const Topology& topo) {
  const std::string& host = topo.node(topo.root()).hostname;
  std::string out = "digraph " + dot_quote(host.empty() ? "topology" : host) + " {\n";
  out += "  node [shape=box, fontsize=10];\n";
  dot_nodes(topo, {topo.root(), topo.root(), 1}, out);
  for (const Link& l : topo.links()) {
    const bool nvlink = l.type == LinkType::NvLink;
    out += "  " + dot_quote(topo.node(l.a).name) + " -> " + dot_quote(topo.node(l.b).name) +
           " [dir=none, " + (nvlink ? "color=green" : "style=dashed") +
           ", label=" + dot_quote(link_text(l)) + "];\n";
  }
  out += "}\n";
  return out;
}

}  // namespace ccl::topo
