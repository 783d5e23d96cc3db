#include "topology/hwloc_discovery.h"

#include <libxml/parser.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <utility>
#include <vector>

#ifdef CCL_HAVE_HWLOC
#include <hwloc.h>
#endif

#include "base/error.h"
#include "base/log.h"
#include "topology/cuda_devices.h"
#include "topology/nvml_links.h"
#include "topology/xml_error_guard.h"

namespace ccl::topo {
namespace {

std::string local_hostname() {
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  return host;
}

void log_summary(const Topology& topo, const char* origin) {
  auto count = [&](NodeType type) { return topo.of_type(type).size(); };
  CCL_INFO(kTopo,
           "topology of %s (%s): %zu packages, %zu NUMA nodes, %zu cores, %zu GPUs, "
           "%zu NICs, %zu NVLinks",
           topo.node(topo.root()).hostname.c_str(), origin, count(NodeType::Package),
           count(NodeType::Numa), count(NodeType::Core), count(NodeType::Gpu), count(NodeType::Nic),
           topo.links().size());  // discovery adds NVLinks only
}

#ifdef CCL_HAVE_HWLOC

// An hwloc topology with ccl's filters set, not yet loaded.
using Hwloc = std::unique_ptr<hwloc_topology, decltype(&hwloc_topology_destroy)>;
Hwloc new_hwloc() {
  hwloc_topology_t topo = nullptr;
  if (hwloc_topology_init(&topo) != 0) throw_system_error(errno, "hwloc_topology_init");
  // Keeps PCI devices of the usual classes (GPUs, NICs, storage...), their OS devices and the
  // bridges above them; drops empty bridges and minor devices.
  hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  // Linux's own backend reads the PCI tree (link speeds included) from sysfs; the "pci" plugin
  // (libpciaccess) finds the same devices here and leaks a few hundred bytes per load, which
  // LeakSanitizer reports in every process that discovers its topology. hwloc 2.1+.
  hwloc_topology_set_components(topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci");
  return Hwloc(topo, &hwloc_topology_destroy);
}

// Declared inside hwloc's attribute union, hence scoped there in C++.
using PciAttr = hwloc_obj_attr_u::hwloc_pcidev_attr_s;
using BridgeAttr = hwloc_obj_attr_u::hwloc_bridge_attr_s;

std::string cpu_list(hwloc_const_bitmap_t set) {
  char* text = nullptr;
  if (set == nullptr || hwloc_bitmap_list_asprintf(&text, set) < 0) return "";
  std::string list = text;
  std::free(text);
  return list;
}

int os_index_of(hwloc_obj_t obj) {
  return obj->os_index == HWLOC_UNKNOWN_INDEX ? -1 : static_cast<int>(obj->os_index);
}

// The slower of two link speeds, 0 meaning unknown (hwloc's value in VMs).
double slower(double a, double b) { return a <= 0 ? b : b <= 0 ? a : std::min(a, b); }

// One hwloc topology (loaded) -> ccl's graph. GPUs get their CUDA device id from a "cuda<N>" OS
// device (hwloc's CUDA plugin); discover_local asks the driver instead.
class Converter {
 public:
  explicit Converter(hwloc_topology_t src) : src_(src) {}

  Topology run() {
    add_cpu_side();
    walk_io(hwloc_get_root_obj(src_));
    return std::move(dst_);
  }

 private:
  std::string next_name(NodeType type) {
    return node_type_name(type) + std::to_string(counters_[type]++);
  }

  void add_cpu_side() {
    hwloc_obj_t root = hwloc_get_root_obj(src_);
    Node& machine = dst_.node(dst_.root());
    machine.memory_bytes = root->total_memory;
    if (const char* host = hwloc_obj_get_info_by_name(root, "HostName")) machine.hostname = host;
    for (hwloc_obj_t obj = nullptr;
         (obj = hwloc_get_next_obj_by_type(src_, HWLOC_OBJ_PACKAGE, obj)) != nullptr;) {
      const int id = dst_.add_node(NodeType::Package, dst_.root(), next_name(NodeType::Package));
      set_cpu_attrs(id, obj);
      packages_[obj] = id;
    }
    for (hwloc_obj_t obj = nullptr;
         (obj = hwloc_get_next_obj_by_type(src_, HWLOC_OBJ_NUMANODE, obj)) != nullptr;) {
      const int index = os_index_of(obj) >= 0 ? os_index_of(obj) : int(obj->logical_index);
      const int id = dst_.add_node(NodeType::Numa, package_of(obj), "numa" + std::to_string(index));
      set_cpu_attrs(id, obj);
      dst_.node(id).memory_bytes = obj->attr->numanode.local_memory;
      numas_.emplace_back(obj, id);
    }
    // Cores go under the NUMA node of their package holding their CPUs (the package when a NUMA
    // node spans packages). Without Core objects (some platforms) the PUs stand in for them.
    const hwloc_obj_type_t core_type =
        hwloc_get_nbobjs_by_type(src_, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
    for (hwloc_obj_t obj = nullptr; (obj = hwloc_get_next_obj_by_type(src_, core_type, obj));) {
      int parent = package_of(obj);
      for (const auto& [numa, id] : numas_) {
        if (dst_.node(id).parent == parent && !hwloc_bitmap_iszero(numa->cpuset) &&
            hwloc_bitmap_isincluded(obj->cpuset, numa->cpuset)) {
          parent = id;
          break;
        }
      }
      const int id =
          dst_.add_node(NodeType::Core, parent, "core" + std::to_string(obj->logical_index));
      set_cpu_attrs(id, obj);
    }
  }

  void set_cpu_attrs(int id, hwloc_obj_t obj) {
    Node& node = dst_.node(id);
    node.os_index = os_index_of(obj);
    node.cpuset = cpu_list(obj->cpuset);
  }

  int package_of(hwloc_obj_t obj) const {
    hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(src_, HWLOC_OBJ_PACKAGE, obj);
    auto it = packages_.find(pkg);
    return it == packages_.end() ? dst_.root() : it->second;
  }

  // Where I/O attached to the normal object `obj` hangs: the package, or a NUMA node with exactly
  // the CPUs of the group/die hwloc attached it to (sub-NUMA clustering), else the machine.
  int attach_point(hwloc_obj_t obj) const {
    for (hwloc_obj_t at = obj; at != nullptr; at = at->parent) {
      if (at->type == HWLOC_OBJ_PACKAGE) return packages_.at(at);
      if (at->type == HWLOC_OBJ_MACHINE) return dst_.root();
      for (const auto& [numa, id] : numas_) {
        if (!hwloc_bitmap_iszero(at->cpuset) && hwloc_bitmap_isequal(at->cpuset, numa->cpuset)) {
          return id;
        }
      }
    }
    return dst_.root();
  }

  void walk_io(hwloc_obj_t obj) {
    const int at = attach_point(obj);
    for (hwloc_obj_t io = obj->io_first_child; io; io = io->next_sibling) add_io(io, at, 0);
    for (hwloc_obj_t child = obj->first_child; child; child = child->next_sibling) walk_io(child);
  }

  // `cap`: the slowest link speed of the bridges left out between `parent` and `obj`.
  void add_io(hwloc_obj_t obj, int parent, double cap) {
    if (obj->type == HWLOC_OBJ_PCI_DEVICE) return add_pci_device(obj, parent, cap);
    if (obj->type != HWLOC_OBJ_BRIDGE) return;  // OS devices outside PCI, Misc: nothing to place
    const BridgeAttr& bridge = obj->attr->bridge;
    int id = -1;
    if (bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) {
      id = dst_.add_node(NodeType::HostBridge, parent, next_name(NodeType::HostBridge));
      char bus[16];
      std::snprintf(bus, sizeof(bus), "%04x:%02x", unsigned(bridge.downstream.pci.domain),
                    unsigned(bridge.downstream.pci.secondary_bus));
      dst_.node(id).bus_id = bus;
    } else {
      const double speed = slower(cap, bridge.upstream.pci.linkspeed);
      if (obj->io_arity <= 1) {  // a hop without branching: see hwloc_discovery.h
        if (obj->io_first_child != nullptr) add_io(obj->io_first_child, parent, speed);
        return;
      }
      id = dst_.add_node(NodeType::PciSwitch, parent, next_name(NodeType::PciSwitch));
      set_pci_attrs(id, bridge.upstream.pci, speed);
    }
    for (hwloc_obj_t child = obj->io_first_child; child != nullptr; child = child->next_sibling) {
      add_io(child, id, 0);
    }
  }

  void add_pci_device(hwloc_obj_t obj, int parent, double cap) {
    const PciAttr& pci = obj->attr->pcidev;
    std::vector<std::string> net_devices, gpu_devices;
    for (hwloc_obj_t os = obj->io_first_child; os != nullptr; os = os->next_sibling) {
      if (os->type != HWLOC_OBJ_OS_DEVICE || os->name == nullptr) continue;
      const hwloc_obj_osdev_type_t type = os->attr->osdev.type;
      if (type == HWLOC_OBJ_OSDEV_NETWORK || type == HWLOC_OBJ_OSDEV_OPENFABRICS) {
        net_devices.push_back(os->name);
      } else if (type == HWLOC_OBJ_OSDEV_GPU || type == HWLOC_OBJ_OSDEV_COPROC) {
        gpu_devices.push_back(os->name);
      }
    }
    // NVIDIA's VGA or 3D controllers, and NVSwitches where they are on PCI (DGX-2 and later, as
    // "other bridge" 0x0680).
    const bool nvidia = pci.vendor_id == 0x10de;
    const bool gpu = nvidia && (pci.class_id == 0x0300 || pci.class_id == 0x0302);
    const bool nvswitch = nvidia && pci.class_id == 0x0680;
    const NodeType type = gpu                    ? NodeType::Gpu
                          : nvswitch             ? NodeType::NvSwitch
                          : !net_devices.empty() ? NodeType::Nic
                                                 : NodeType::PciDevice;
    const int id = dst_.add_node(type, parent, next_name(type));
    set_pci_attrs(id, pci, slower(cap, pci.linkspeed));
    Node& node = dst_.node(id);
    if (type == NodeType::Nic) node.os_devices = std::move(net_devices);
    if (type == NodeType::Gpu) {
      node.os_devices = std::move(gpu_devices);
      node.os_index = cuda_device_id(node);
    }
  }

  static int cuda_device_id(const Node& gpu) {
    int index = -1;
    char tail = 0;
    for (const std::string& name : gpu.os_devices) {
      if (std::sscanf(name.c_str(), "cuda%d%c", &index, &tail) == 1 && index >= 0) return index;
    }
    return -1;
  }

  void set_pci_attrs(int id, const PciAttr& pci, double link_gbps) {
    Node& node = dst_.node(id);
    // The form topology_xml_read.cc's check_bus_id accepts: the function is one hex digit (hwloc
    // reads one from its XML, and Linux gives 0-7), not always below 8.
    char bus[32];
    std::snprintf(bus, sizeof(bus), "%04x:%02x:%02x.%x", unsigned(pci.domain), unsigned(pci.bus),
                  unsigned(pci.dev), unsigned(pci.func));
    node.bus_id = bus;
    node.vendor = pci.vendor_id;
    node.device = pci.device_id;
    node.pci_class = pci.class_id;
    node.link_gbps = link_gbps;
  }

  hwloc_topology_t src_;
  Topology dst_;
  std::map<hwloc_obj_t, int> packages_;
  std::vector<std::pair<hwloc_obj_t, int>> numas_;
  std::map<NodeType, int> counters_;
};

// Keeps libxml2's first error (later ones follow from it); a template: 2.12 made it const.
thread_local std::string* first_xml_error = nullptr;
template <typename ErrorPtr>
void keep_first_xml_error(void*, ErrorPtr error) {
  if (first_xml_error->empty() && error->level >= XML_ERR_ERROR && error->message != nullptr) {
    *first_xml_error = "line " + std::to_string(error->line) + ": " + error->message;
  }
}

// hwloc's bitmap syntax as its exports write it: comma-separated words "0x" + 1 to 16 hex digits
// (hwloc_bitmap_sscanf asserts, instead of failing, on an empty word such as ",x00000003").
bool is_hwloc_bitmap(const std::string& text) {
  size_t at = 0;
  for (;;) {
    const size_t end = std::min(text.find(',', at), text.size());
    const std::string_view word(text.data() + at, end - at);
    if (word.size() < 3 || word.size() > 18 || word[0] != '0' || word[1] != 'x') return false;
    for (char c : word.substr(2)) {
      if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
    }
    if (end == text.size()) return true;
    at = end + 1;
  }
}

// What hwloc 2.9's loader crashes on instead of rejecting, found by
// tests/fuzz/topology_file_fuzz: an object with a cpuset but no complete_cpuset, or a nodeset but
// no complete_nodeset (a NULL dereference in hwloc_topology_load; lstopo --input crashes the same
// way; hwloc's exports always write both), and a set that is no bitmap (an assertion in
// hwloc_bitmap_sscanf). "" when there is none.
std::string hwloc_crasher(const xmlNode* node) {
  static constexpr const char* kSets[] = {"cpuset",  "complete_cpuset",  "allowed_cpuset",
                                          "nodeset", "complete_nodeset", "allowed_nodeset"};
  for (const xmlNode* e = node; e != nullptr; e = e->next) {
    if (e->type != XML_ELEMENT_NODE) continue;
    if (std::strcmp(reinterpret_cast<const char*>(e->name), "object") == 0) {
      for (const char* set : kSets) {
        xmlChar* value = xmlGetProp(e, reinterpret_cast<const xmlChar*>(set));
        if (value == nullptr) continue;
        const bool ok = is_hwloc_bitmap(reinterpret_cast<const char*>(value));
        xmlFree(value);
        if (!ok) {
          return "line " + std::to_string(xmlGetLineNo(e)) + ": an <object>'s " + set +
                 " is no hwloc bitmap";
        }
      }
      for (const char* set : {"cpuset", "nodeset"}) {
        const std::string complete = std::string("complete_") + set;
        const auto* s = reinterpret_cast<const xmlChar*>(set);
        const auto* c = reinterpret_cast<const xmlChar*>(complete.c_str());
        if (xmlHasProp(e, s) != nullptr && xmlHasProp(e, c) == nullptr) {
          return "line " + std::to_string(xmlGetLineNo(e)) + ": an <object> with a " + set +
                 " but no " + complete;
        }
      }
    }
    std::string why = hwloc_crasher(e->children);
    if (!why.empty()) return why;
  }
  return "";
}

// Why `path` is no hwloc XML topology ("" when it looks like one): libxml2 names the line of a
// syntax error, which hwloc's loader does not report.
std::string xml_problem(const std::string& path) {
  if (access(path.c_str(), R_OK) != 0) return std::strerror(errno);
  xmlParserCtxtPtr ctxt = xmlNewParserCtxt();
  if (ctxt == nullptr) return "out of memory";
  std::string why;
  first_xml_error = &why;
  ctxt->sax->serror = &keep_first_xml_error;
  xmlDocPtr doc = xmlCtxtReadFile(ctxt, path.c_str(), nullptr,
                                  XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
  if (doc == nullptr) {
    if (why.empty()) why = "not well-formed XML";
    while (why.back() == '\n') why.pop_back();
  } else {
    xmlNodePtr root = xmlDocGetRootElement(doc);
    const char* name = root != nullptr ? reinterpret_cast<const char*>(root->name) : "";
    why = std::strcmp(name, "topology") == 0
              ? hwloc_crasher(root)
              : std::string("the root element is <") + name + ">, not hwloc's <topology>";
    xmlFreeDoc(doc);
  }
  xmlFreeParserCtxt(ctxt);
  return why;
}

#endif  // CCL_HAVE_HWLOC

}  // namespace

Topology minimal_topology(int cpus, uint64_t memory_bytes, const std::string& hostname) {
  cpus = std::max(cpus, 1);
  Topology topo;
  topo.node(topo.root()).hostname = hostname;
  topo.node(topo.root()).memory_bytes = memory_bytes;
  // Online CPUs are taken to be 0..cpus-1: without hwloc there is no cheaper truth at hand.
  const std::string all = cpus == 1 ? "0" : "0-" + std::to_string(cpus - 1);
  const int package = topo.add_node(NodeType::Package, topo.root(), "package0");
  const int numa = topo.add_node(NodeType::Numa, package, "numa0");
  for (int id : {package, numa}) {
    topo.node(id).os_index = 0;
    topo.node(id).cpuset = all;
  }
  topo.node(numa).memory_bytes = memory_bytes;
  for (int cpu = 0; cpu < cpus; ++cpu) {
    const int core = topo.add_node(NodeType::Core, numa, "core" + std::to_string(cpu));
    topo.node(core).os_index = cpu;
    topo.node(core).cpuset = std::to_string(cpu);
  }
  return topo;
}

Topology discover_local() {
#ifdef CCL_HAVE_HWLOC
  Hwloc hwloc = new_hwloc();
  if (hwloc_topology_load(hwloc.get()) == 0) {
    Topology topo = Converter(hwloc.get()).run();
    // The driver's ids hold for this process (CUDA_VISIBLE_DEVICES); it is loaded only where
    // there are NVIDIA GPUs to name.
    name_gpus_by_cuda_id(topo);
    if (topo.node(topo.root()).hostname.empty()) topo.node(topo.root()).hostname = local_hostname();
    discover_nvlinks(topo);
    log_summary(topo, "hwloc");
    return topo;
  }
  CCL_WARN(kTopo, "topology: hwloc_topology_load failed (%s); using a one-NUMA-node topology",
           std::strerror(errno));
#else
  static std::once_flag warned;
  std::call_once(warned, [] {
    CCL_WARN(kTopo, "topology: ccl was built without hwloc; assuming one package, one NUMA node");
  });
#endif
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN), pages = sysconf(_SC_PHYS_PAGES);
  const uint64_t memory = pages > 0 ? uint64_t(pages) * uint64_t(sysconf(_SC_PAGESIZE)) : 0;
  Topology topo = minimal_topology(int(cpus), memory, local_hostname());
  log_summary(topo, "no hwloc");
  return topo;
}

Topology load_hwloc_xml(const std::string& path) {
#ifdef CCL_HAVE_HWLOC
  // Declared before `hwloc`, so it runs after hwloc_topology_destroy has unloaded the plugin.
  const XmlGenericErrorGuard keep_xml_errors(true);
  if (std::string why = xml_problem(path); !why.empty()) {
    throw_error(cclInvalidArgument, "hwloc XML %s: %s", path.c_str(), why.c_str());
  }
  Hwloc hwloc = new_hwloc();
  if (hwloc_topology_set_xml(hwloc.get(), path.c_str()) != 0) {
    throw_error(cclInvalidArgument, "hwloc XML %s: hwloc cannot read it (%s)", path.c_str(),
                std::strerror(errno));
  }
  if (hwloc_topology_load(hwloc.get()) != 0) {
    throw_error(cclInvalidArgument, "hwloc XML %s: hwloc rejects it as a topology (%s)",
                path.c_str(), std::strerror(errno));
  }
  Topology topo;
  try {
    topo = Converter(hwloc.get()).run();
  } catch (const Error& e) {
    // What hwloc accepts may still not make a topology (two NUMA nodes with one os_index give
    // one name twice); the message must name the file like every other error here.
    throw_error(e.code(), "hwloc XML %s: %s", path.c_str(), e.what());
  }
  log_summary(topo, path.c_str());
  return topo;
#else
  throw_error(cclInvalidUsage, "hwloc XML %s: ccl was built without hwloc", path.c_str());
#endif
}

int current_numa_os_index() {
#ifdef CCL_HAVE_HWLOC
  // A CPU-only topology, loaded once and kept for the process's life: hwloc's read-only queries
  // are thread-safe, and loading costs milliseconds a call would not want to pay.
  static const Hwloc cpus = [] {
    Hwloc topo = new_hwloc();
    hwloc_topology_set_io_types_filter(topo.get(), HWLOC_TYPE_FILTER_KEEP_NONE);
    if (hwloc_topology_load(topo.get()) != 0) topo.reset();
    return topo;
  }();
  hwloc_bitmap_t set = cpus ? hwloc_bitmap_alloc() : nullptr;
  if (set == nullptr) return 0;
  auto numa_holding = [&]() -> int {
    if (hwloc_bitmap_iszero(set)) return -1;
    for (hwloc_obj_t numa = nullptr;
         (numa = hwloc_get_next_obj_by_type(cpus.get(), HWLOC_OBJ_NUMANODE, numa)) != nullptr;) {
      if (hwloc_bitmap_isincluded(set, numa->cpuset)) return os_index_of(numa);
    }
    return -1;
  };
  int index = -1;
  // A binding inside one NUMA node names it; a wider one (or none) leaves the current CPU.
  if (hwloc_get_cpubind(cpus.get(), set, HWLOC_CPUBIND_THREAD) == 0) index = numa_holding();
  if (index < 0 && hwloc_get_last_cpu_location(cpus.get(), set, HWLOC_CPUBIND_THREAD) == 0) {
    index = numa_holding();
  }
  hwloc_bitmap_free(set);
  return index < 0 ? 0 : index;
#else
  return 0;
#endif
}

}  // namespace ccl::topo
