// One machine's topology as a graph (DESIGN.md principle 3): a containment tree (machine,
// packages, NUMA nodes, cores; host bridges, PCI switches and devices; GPUs and NICs as PCI
// devices) plus the links the tree does not show (NVLink between GPUs or to NVSwitches, the SMP
// interconnect between packages). Discovery (hwloc_discovery.h) builds it on this machine; the
// XML file (topology_xml.h) saves and loads it, so a DGX-class machine can be studied anywhere.
// Path classes (paths.h) and ring/tree orders (orders.h) are computed from it alone.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ccl::topo {

enum class NodeType : uint8_t {
  Machine,     // the root; one per topology
  Package,     // a CPU socket
  Numa,        // a NUMA node (memory attached to a package)
  Core,        // a physical core
  HostBridge,  // the root of a PCI tree, attached to a package (or NUMA node)
  PciSwitch,   // a PCI bridge or switch below a host bridge
  PciDevice,   // any other PCI device (storage, ...)
  Gpu,         // PCI class 0x0300/0x0302 from vendor 0x10de
  Nic,         // a PCI device with a network or OpenFabrics OS device
  NvSwitch,    // an NVLink switch (no PCI position needed)
};

// Links the containment tree does not show. Tree edges (parent/child) are implicit; a PCI
// device's link to its parent has the device's `link_gbps`.
enum class LinkType : uint8_t {
  NvLink,  // GPU-GPU or GPU-NvSwitch, `count` lanes of `gbps` in total
  Smp,     // between two packages (QPI/UPI/xGMI)
};

struct Node {
  int id = -1;  // index in Topology::nodes()
  NodeType type = NodeType::Machine;
  int parent = -1;
  std::vector<int> children;
  std::string name;    // unique, stable, short: "machine", "package0", "numa1", "gpu3", "nic0"
  int os_index = -1;   // package, NUMA node, core: the OS's index; GPU: CUDA device id or -1
  std::string cpuset;  // package, NUMA node, core: the OS CPU list ("0-15,32-47")
  uint64_t memory_bytes = 0;  // machine, NUMA node
  std::string bus_id;         // PCI nodes: "0000:17:00.0"; host bridge: "0000:17"
  uint16_t vendor = 0;        // PCI
  uint16_t device = 0;        // PCI
  uint32_t pci_class = 0;     // PCI, e.g. 0x0302
  double link_gbps = 0;       // PCI: bandwidth of the link to the parent, GB/s (0: unknown)
  std::vector<std::string> os_devices;  // NIC: "eth0", "mlx5_0"; GPU: "cuda0", "nvidia0"
  std::string hostname;                 // machine only
};

struct Link {
  int a = -1;  // node ids
  int b = -1;
  LinkType type = LinkType::NvLink;
  int count = 1;    // NVLink lanes
  double gbps = 0;  // total bandwidth, GB/s
};

class Topology {
 public:
  Topology();  // a machine node alone

  // Adds a node of `type` under `parent` (a node id); returns its id. The name is set by the
  // caller; it must be unique (InvalidArgument otherwise).
  int add_node(NodeType type, int parent, const std::string& name);
  void add_link(const Link& link);

  const std::vector<Node>& nodes() const { return nodes_; }
  Node& node(int id);
  const Node& node(int id) const;
  const std::vector<Link>& links() const { return links_; }
  int root() const { return 0; }
  // The node named `name`, or -1.
  int find(const std::string& name) const;
  // All nodes of `type`, in id order.
  std::vector<int> of_type(NodeType type) const;
  // The nearest ancestor of `id` (itself included) of `type`, or -1.
  int ancestor(int id, NodeType type) const;

 private:
  std::vector<Node> nodes_;
  std::vector<Link> links_;
};

const char* node_type_name(NodeType type);  // "machine", "package", "numa", ..., "nvswitch"
bool parse_node_type(const std::string& text, NodeType* out);
const char* link_type_name(LinkType type);  // "nvlink", "smp"
bool parse_link_type(const std::string& text, LinkType* out);

}  // namespace ccl::topo
