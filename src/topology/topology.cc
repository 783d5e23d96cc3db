#include "topology/topology.h"

#include <array>
#include <utility>

#include "base/error.h"

namespace ccl::topo {

namespace {

constexpr std::array<std::pair<NodeType, const char*>, 10> kNodeTypeNames = {{
    {NodeType::Machine, "machine"},
    {NodeType::Package, "package"},
    {NodeType::Numa, "numa"},
    {NodeType::Core, "core"},
    {NodeType::HostBridge, "hostbridge"},
    {NodeType::PciSwitch, "pciswitch"},
    {NodeType::PciDevice, "pci"},
    {NodeType::Gpu, "gpu"},
    {NodeType::Nic, "nic"},
    {NodeType::NvSwitch, "nvswitch"},
}};

constexpr std::array<std::pair<LinkType, const char*>, 2> kLinkTypeNames = {{
    {LinkType::NvLink, "nvlink"},
    {LinkType::Smp, "smp"},
}};

}  // namespace

Topology::Topology() {
  Node machine;
  machine.id = 0;
  machine.type = NodeType::Machine;
  machine.name = "machine";
  nodes_.push_back(std::move(machine));
}

int Topology::add_node(NodeType type, int parent, const std::string& name) {
  if (parent < 0 || parent >= static_cast<int>(nodes_.size())) {
    throw_error(cclInvalidArgument, "topology: node '%s' has no parent %d", name.c_str(), parent);
  }
  if (type == NodeType::Machine) {
    throw_error(cclInvalidArgument, "topology: a second machine node '%s'", name.c_str());
  }
  if (name.empty() || find(name) >= 0) {
    throw_error(cclInvalidArgument, "topology: node name '%s' is empty or not unique",
                name.c_str());
  }
  Node node;
  node.id = static_cast<int>(nodes_.size());
  node.type = type;
  node.parent = parent;
  node.name = name;
  nodes_[parent].children.push_back(node.id);
  nodes_.push_back(std::move(node));
  return nodes_.back().id;
}

void Topology::add_link(const Link& link) {
  const int n = static_cast<int>(nodes_.size());
  if (link.a < 0 || link.a >= n || link.b < 0 || link.b >= n || link.a == link.b) {
    throw_error(cclInvalidArgument, "topology: link between nodes %d and %d", link.a, link.b);
  }
  links_.push_back(link);
}

Node& Topology::node(int id) {
  if (id < 0 || id >= static_cast<int>(nodes_.size())) {
    throw_error(cclInvalidArgument, "topology: no node %d", id);
  }
  return nodes_[id];
}

const Node& Topology::node(int id) const { return const_cast<Topology*>(this)->node(id); }

int Topology::find(const std::string& name) const {
  for (const Node& n : nodes_) {
    if (n.name == name) return n.id;
  }
  return -1;
}

std::vector<int> Topology::of_type(NodeType type) const {
  std::vector<int> ids;
  for (const Node& n : nodes_) {
    if (n.type == type) ids.push_back(n.id);
  }
  return ids;
}

int Topology::ancestor(int id, NodeType type) const {
  for (int at = id; at >= 0; at = node(at).parent) {
    if (nodes_[at].type == type) return at;
  }
  return -1;
}

namespace {

template <typename Enum, size_t N>
const char* name_in(const std::array<std::pair<Enum, const char*>, N>& names, Enum value) {
  for (const auto& [v, name] : names) {
    if (v == value) return name;
  }
  return "unknown";
}

template <typename Enum, size_t N>
bool parse_in(const std::array<std::pair<Enum, const char*>, N>& names, const std::string& text,
              Enum* out) {
  for (const auto& [v, name] : names) {
    if (text == name) {
      *out = v;
      return true;
    }
  }
  return false;
}

}  // namespace

const char* node_type_name(NodeType type) { return name_in(kNodeTypeNames, type); }
bool parse_node_type(const std::string& text, NodeType* out) {
  return parse_in(kNodeTypeNames, text, out);
}
const char* link_type_name(LinkType type) { return name_in(kLinkTypeNames, type); }
bool parse_link_type(const std::string& text, LinkType* out) {
  return parse_in(kLinkTypeNames, text, out);
}

}  // namespace ccl::topo
