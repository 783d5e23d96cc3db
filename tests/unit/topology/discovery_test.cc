// Discovery: this machine through hwloc, hwloc XML files (this machine's export and a hand-written
// two-socket GPU box), NVLink lanes turned into links, and the NUMA node of the calling thread.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "topology/hwloc_discovery.h"

#ifdef CCL_HAVE_HWLOC
#include <hwloc.h>
#endif

#include "../support/temp_file.h"
#include "base/error.h"
#include "topology/cuda_devices.h"
#include "topology/nvml_links.h"
#include "topology/topology_xml.h"

namespace ccl::topo {
namespace {

using ccl::test::TempFile;

// Parent and child lists agree, ids are indices, names are unique, every node reaches the root.
void expect_consistent(const Topology& topo) {
  const auto& nodes = topo.nodes();
  ASSERT_FALSE(nodes.empty());
  EXPECT_EQ(nodes[0].type, NodeType::Machine);
  EXPECT_EQ(nodes[0].parent, -1);
  std::set<std::string> names;
  for (const Node& n : nodes) {
    EXPECT_EQ(n.id, &n - nodes.data());
    EXPECT_TRUE(names.insert(n.name).second) << "duplicate name " << n.name;
    if (n.id != 0) {
      ASSERT_GE(n.parent, 0) << n.name;
      ASSERT_LT(n.parent, static_cast<int>(nodes.size())) << n.name;
      const auto& siblings = nodes[n.parent].children;
      EXPECT_EQ(std::count(siblings.begin(), siblings.end(), n.id), 1) << n.name;
      EXPECT_NE(n.type, NodeType::Machine) << n.name;
    }
    for (int child : n.children) EXPECT_EQ(nodes.at(child).parent, n.id) << n.name;
    int steps = 0;
    for (int at = n.id; at != 0 && steps <= static_cast<int>(nodes.size()); at = nodes[at].parent) {
      ++steps;
    }
    EXPECT_LE(steps, static_cast<int>(nodes.size())) << n.name << " is on a cycle";
  }
}

const Node& named(const Topology& topo, const std::string& name) {
  const int id = topo.find(name);
  if (id < 0) throw std::runtime_error("no node " + name);
  return topo.node(id);
}

std::string parent_name(const Topology& topo, const std::string& name) {
  return topo.node(named(topo, name).parent).name;
}

TEST(Discovery, CanonicalPciBusId) {
  EXPECT_EQ(canonical_pci_bus_id("0000:3B:00.0"), "0000:3b:00.0");
  EXPECT_EQ(canonical_pci_bus_id("00000000:17:00.1"), "0000:17:00.1");
  EXPECT_EQ(canonical_pci_bus_id("1a:02.3"), "0000:1a:02.3");
  EXPECT_EQ(canonical_pci_bus_id("c01c:00:1f.7"), "c01c:00:1f.7");
  EXPECT_EQ(canonical_pci_bus_id(""), "");
  EXPECT_EQ(canonical_pci_bus_id("eth0"), "");
  EXPECT_EQ(canonical_pci_bus_id("0000:17:00.0x"), "");
  EXPECT_EQ(canonical_pci_bus_id("0000:17:40.0"), "");  // device numbers stop at 0x1f
  EXPECT_EQ(canonical_pci_bus_id("0000:17:00.8"), "");  // functions stop at 7
  EXPECT_EQ(canonical_pci_bus_id("0x17:00.0"), "");
  EXPECT_EQ(canonical_pci_bus_id("0000:117:00.0"), "");
  EXPECT_EQ(canonical_pci_bus_id("0000:17:00."), "");
}

TEST(Discovery, MinimalTopology) {
  const Topology topo = minimal_topology(4, 1ull << 30, "box");
  expect_consistent(topo);
  EXPECT_EQ(topo.node(0).hostname, "box");
  EXPECT_EQ(parent_name(topo, "numa0"), "package0");
  EXPECT_EQ(named(topo, "numa0").cpuset, "0-3");
  EXPECT_EQ(named(topo, "numa0").memory_bytes, 1ull << 30);
  ASSERT_EQ(topo.of_type(NodeType::Core).size(), 4u);
  EXPECT_EQ(parent_name(topo, "core3"), "numa0");
  EXPECT_EQ(named(topo, "core3").cpuset, "3");
  EXPECT_EQ(minimal_topology(0, 0, "").of_type(NodeType::Core).size(), 1u);
}

TEST(Discovery, LocalMachine) {
  const Topology topo = discover_local();
  expect_consistent(topo);
  EXPECT_FALSE(topo.node(0).hostname.empty());
  EXPECT_GE(topo.of_type(NodeType::Package).size(), 1u);
  ASSERT_GE(topo.of_type(NodeType::Numa).size(), 1u);
  const auto cores = topo.of_type(NodeType::Core);
  ASSERT_GE(cores.size(), 1u);
  // Physical cores: never more than the online CPUs (SMT makes them fewer).
  EXPECT_LE(static_cast<long>(cores.size()), sysconf(_SC_NPROCESSORS_ONLN));
  for (int core : cores) {
    EXPECT_FALSE(topo.node(core).cpuset.empty());
    EXPECT_GE(topo.node(core).os_index, 0);
    EXPECT_NE(topo.node(topo.node(core).parent).type, NodeType::Machine);
  }
  for (int numa : topo.of_type(NodeType::Numa)) EXPECT_GT(topo.node(numa).memory_bytes, 0u);
  for (int gpu : topo.of_type(NodeType::Gpu)) {
    EXPECT_EQ(topo.node(gpu).vendor, 0x10de);
    EXPECT_NE(topo.ancestor(gpu, NodeType::HostBridge), -1);
  }
#ifdef CCL_HAVE_HWLOC
  hwloc_topology_t hw = nullptr;
  ASSERT_EQ(hwloc_topology_init(&hw), 0);
  ASSERT_EQ(hwloc_topology_load(hw), 0);
  EXPECT_EQ(static_cast<int>(cores.size()), hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_CORE));
  EXPECT_EQ(static_cast<int>(topo.of_type(NodeType::Numa).size()),
            hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_NUMANODE));
  hwloc_topology_destroy(hw);
#endif
}

TEST(Discovery, LocalEthernetNic) {
  if (!std::filesystem::exists("/sys/class/net/eth0/device")) {
    GTEST_SKIP() << "no PCI eth0 here";
  }
#ifndef CCL_HAVE_HWLOC
  GTEST_SKIP() << "built without hwloc";
#endif
  const Topology topo = discover_local();
  int found = -1;
  for (int nic : topo.of_type(NodeType::Nic)) {
    const auto& os = topo.node(nic).os_devices;
    if (std::find(os.begin(), os.end(), "eth0") != os.end()) found = nic;
  }
  ASSERT_GE(found, 0) << "no NIC with os device eth0";
  EXPECT_NE(topo.ancestor(found, NodeType::HostBridge), -1);
  EXPECT_FALSE(canonical_pci_bus_id(topo.node(found).bus_id).empty());
  EXPECT_EQ(topo.node(found).pci_class >> 8, 0x02u);  // a network controller
}

TEST(Discovery, LocalGpusCarryCudaIds) {
  const Topology topo = discover_local();
  std::error_code ec;  // no such directory: no GPUs
  const auto driver_gpus = static_cast<size_t>(
      std::distance(std::filesystem::directory_iterator("/proc/driver/nvidia/gpus", ec), {}));
#ifdef CCL_HAVE_HWLOC
  EXPECT_EQ(topo.of_type(NodeType::Gpu).size(), driver_gpus);
#endif
  if (driver_gpus == 0) GTEST_SKIP() << "no NVIDIA GPU here";
  const auto ids = cuda_device_ids();
  for (int gpu : topo.of_type(NodeType::Gpu)) {
    const Node& node = topo.node(gpu);
    auto it = ids.find(node.bus_id);
    EXPECT_EQ(node.os_index, it == ids.end() ? -1 : it->second) << node.bus_id;
  }
}

#ifdef CCL_HAVE_HWLOC
// The same machine exported by hwloc with every I/O object kept: loading applies the filters
// again, so the file gives exactly what live discovery gives.
TEST(Discovery, OwnXmlExportMatches) {
  hwloc_topology_t hw = nullptr;
  ASSERT_EQ(hwloc_topology_init(&hw), 0);
  hwloc_topology_set_io_types_filter(hw, HWLOC_TYPE_FILTER_KEEP_ALL);
  // As discovery does: the pci plugin (libpciaccess) leaks; Linux's backend finds the same tree.
  hwloc_topology_set_components(hw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci");
  ASSERT_EQ(hwloc_topology_load(hw), 0);
  TempFile file("");
  ASSERT_EQ(hwloc_topology_export_xml(hw, file.path().c_str(), 0), 0);
  hwloc_topology_destroy(hw);
  const Topology live = discover_local();
  const Topology loaded = load_hwloc_xml(file.path());
  expect_consistent(loaded);
  EXPECT_EQ(loaded.node(0).hostname, live.node(0).hostname);
  ASSERT_EQ(loaded.nodes().size(), live.nodes().size());
  for (size_t i = 0; i < live.nodes().size(); ++i) {
    const Node& a = live.nodes()[i];
    const Node& b = loaded.nodes()[i];
    if (a.type == NodeType::NvSwitch) continue;  // NVML, live only
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.type, b.type) << a.name;
    EXPECT_EQ(a.parent, b.parent) << a.name;
    EXPECT_EQ(a.cpuset, b.cpuset) << a.name;
    EXPECT_EQ(a.bus_id, b.bus_id) << a.name;
    EXPECT_EQ(a.os_devices, b.os_devices) << a.name;
  }
}

// Two packages; behind package0's host bridge a root port, then a switch (upstream port 18:00.0,
// downstream ports 19:00.0 and 19:01.0) with an H100 and a ConnectX NIC; an NVMe and an NVSwitch
// behind package1.
constexpr const char* kGpuBox = R"(<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
 <object type="Machine" os_index="0" cpuset="0x0000000f" complete_cpuset="0x0000000f" allowed_cpuset="0x0000000f" nodeset="0x00000003" complete_nodeset="0x00000003" allowed_nodeset="0x00000003" gp_index="1">
  <info name="HostName" value="gpubox"/>
  <object type="Package" os_index="0" cpuset="0x00000003" complete_cpuset="0x00000003" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="2">
   <object type="NUMANode" os_index="0" cpuset="0x00000003" complete_cpuset="0x00000003" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="3" local_memory="68719476736"/>
   <object type="Core" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="4"><object type="PU" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="5"/></object>
   <object type="Core" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="6"><object type="PU" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="7"/></object>
   <object type="Bridge" gp_index="20" bridge_type="0-1" depth="0" bridge_pci="0000:[17-1b]">
    <object type="Bridge" gp_index="21" bridge_type="1-1" depth="1" bridge_pci="0000:[18-1b]" pci_busid="0000:17:00.0" pci_type="0604 [8086:347a] [0000:0000] 04" pci_link_speed="31.507692">
     <object type="Bridge" gp_index="22" bridge_type="1-1" depth="2" bridge_pci="0000:[19-1b]" pci_busid="0000:18:00.0" pci_type="0604 [1000:c010] [0000:0000] b0" pci_link_speed="31.507692">
      <object type="Bridge" gp_index="23" bridge_type="1-1" depth="3" bridge_pci="0000:[1a-1a]" pci_busid="0000:19:00.0" pci_type="0604 [1000:c010] [0000:0000] b0" pci_link_speed="31.507692">
       <object type="PCIDev" gp_index="24" pci_busid="0000:1a:00.0" pci_type="0302 [10de:2330] [10de:16c1] a1" pci_link_speed="31.507692"><object type="OSDev" gp_index="25" name="cuda0" subtype="CUDA" osdev_type="5"/></object>
      </object>
      <object type="Bridge" gp_index="26" bridge_type="1-1" depth="3" bridge_pci="0000:[1b-1b]" pci_busid="0000:19:01.0" pci_type="0604 [1000:c010] [0000:0000] b0" pci_link_speed="15.753846">
       <object type="PCIDev" gp_index="27" pci_busid="0000:1b:00.0" pci_type="0207 [15b3:101b] [15b3:0007] 00" pci_link_speed="31.507692"><object type="OSDev" gp_index="28" name="ib0" osdev_type="2"/><object type="OSDev" gp_index="29" name="mlx5_0" osdev_type="3"/></object>
      </object>
     </object>
    </object>
   </object>
  </object>
  <object type="Package" os_index="1" cpuset="0x0000000c" complete_cpuset="0x0000000c" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="8">
   <object type="NUMANode" os_index="1" cpuset="0x0000000c" complete_cpuset="0x0000000c" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="9" local_memory="68719476736"/>
   <object type="Core" os_index="0" cpuset="0x00000004" complete_cpuset="0x00000004" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="10"><object type="PU" os_index="2" cpuset="0x00000004" complete_cpuset="0x00000004" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="11"/></object>
   <object type="Core" os_index="1" cpuset="0x00000008" complete_cpuset="0x00000008" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="12"><object type="PU" os_index="3" cpuset="0x00000008" complete_cpuset="0x00000008" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="13"/></object>
   <object type="Bridge" gp_index="30" bridge_type="0-1" depth="0" bridge_pci="0000:[80-80]">
    <object type="PCIDev" gp_index="31" pci_busid="0000:80:00.0" pci_type="0108 [144d:a80a] [144d:a801] 00" pci_link_speed="7.876923"><object type="OSDev" gp_index="32" name="nvme0n1" subtype="Disk" osdev_type="0"/></object>
    <object type="PCIDev" gp_index="33" subtype="NVSwitch" pci_busid="0000:80:01.0" pci_type="0680 [10de:22a3] [0000:0000] a1" pci_link_speed="1.969231"/>
   </object>
  </object>
 </object>
</topology>
)";

TEST(Discovery, HandWrittenGpuBox) {
  TempFile file(kGpuBox);
  const Topology topo = load_hwloc_xml(file.path());
  expect_consistent(topo);
  EXPECT_EQ(topo.node(0).hostname, "gpubox");
  EXPECT_EQ(topo.node(0).memory_bytes, 2 * 68719476736ull);
  EXPECT_EQ(topo.of_type(NodeType::Package).size(), 2u);
  EXPECT_EQ(parent_name(topo, "numa1"), "package1");
  EXPECT_EQ(named(topo, "numa1").cpuset, "2-3");
  EXPECT_EQ(named(topo, "numa1").memory_bytes, 68719476736ull);
  EXPECT_EQ(parent_name(topo, "core2"), "numa1");
  EXPECT_EQ(named(topo, "core2").os_index, 0);  // core os indices restart per package here

  // The root port (one child) and the downstream ports are left out: the switch holds both.
  EXPECT_EQ(parent_name(topo, "hostbridge0"), "package0");
  EXPECT_EQ(named(topo, "hostbridge0").bus_id, "0000:17");
  EXPECT_EQ(topo.of_type(NodeType::PciSwitch).size(), 1u);
  EXPECT_EQ(parent_name(topo, "pciswitch0"), "hostbridge0");
  EXPECT_EQ(named(topo, "pciswitch0").bus_id, "0000:18:00.0");
  EXPECT_NEAR(named(topo, "pciswitch0").link_gbps, 31.507692, 1e-4);

  const Node& gpu = named(topo, "gpu0");
  EXPECT_EQ(gpu.type, NodeType::Gpu);
  EXPECT_EQ(parent_name(topo, "gpu0"), "pciswitch0");
  EXPECT_EQ(gpu.bus_id, "0000:1a:00.0");
  EXPECT_EQ(gpu.vendor, 0x10de);
  EXPECT_EQ(gpu.device, 0x2330);
  EXPECT_EQ(gpu.pci_class, 0x0302u);
  EXPECT_EQ(gpu.os_index, 0);  // from the "cuda0" OS device: a file's GPUs are not this machine's
  EXPECT_EQ(gpu.os_devices, std::vector<std::string>{"cuda0"});
  EXPECT_NEAR(gpu.link_gbps, 31.507692, 1e-4);

  const Node& nic = named(topo, "nic0");
  EXPECT_EQ(nic.type, NodeType::Nic);
  EXPECT_EQ(parent_name(topo, "nic0"), "pciswitch0");
  EXPECT_EQ(nic.bus_id, "0000:1b:00.0");
  EXPECT_EQ(nic.os_devices, (std::vector<std::string>{"ib0", "mlx5_0"}));
  // Its own link says x16, but the switch port above it runs at x8: the slower hop counts.
  EXPECT_NEAR(nic.link_gbps, 15.753846, 1e-4);

  EXPECT_EQ(parent_name(topo, "hostbridge1"), "package1");
  EXPECT_EQ(named(topo, "pci0").type, NodeType::PciDevice);
  EXPECT_EQ(named(topo, "pci0").pci_class, 0x0108u);
  EXPECT_EQ(parent_name(topo, "pci0"), "hostbridge1");
  EXPECT_EQ(named(topo, "nvswitch0").type, NodeType::NvSwitch);
  EXPECT_EQ(parent_name(topo, "nvswitch0"), "hostbridge1");
  EXPECT_TRUE(topo.links().empty());  // NVLink is never read for a file
}

// hwloc reads a PCI function as one hex digit, so its XML may hold 0000:80:01.b; the converter
// keeps that bus id, and what it produced must read back from ccl's format (the topology_file
// fuzzer found a file that loaded but whose saved form was refused as a "bad bus_id";
// corpus/topology_file/hwloc_pci_function_b.xml).
TEST(Discovery, HwlocBusIdsRoundTripThroughCclFormat) {
  std::string box = kGpuBox;
  const std::string nvswitch = "pci_busid=\"0000:80:01.0\"";
  ASSERT_NE(box.find(nvswitch), std::string::npos);
  box.replace(box.find(nvswitch), nvswitch.size(), "pci_busid=\"0000:80:01.b\"");
  TempFile file(box);
  const Topology topo = load_topology_file(file.path());
  EXPECT_EQ(named(topo, "nvswitch0").bus_id, "0000:80:01.b");
  const std::string saved = to_xml(topo);
  const Topology back = from_xml(saved, "saved.xml");
  EXPECT_EQ(named(back, "nvswitch0").bus_id, "0000:80:01.b");
  EXPECT_EQ(to_xml(back), saved);
  // Not a real function: CUDA and NVML matching leave it alone.
  EXPECT_EQ(canonical_pci_bus_id("0000:80:01.b"), "");
}

TEST(Discovery, BadHwlocXml) {
  auto expect_rejected = [](const std::string& path, const std::string& why) {
    try {
      load_hwloc_xml(path);
      ADD_FAILURE() << path << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), cclInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  expect_rejected("/nonexistent/ccl/topo.xml", "No such file");
  TempFile broken("<topology version=\"2.0\">\n <object type=\"Machine\">\n</topology>\n");
  expect_rejected(broken.path(), "line 3");
  TempFile other("<system version=\"1\"/>\n");
  expect_rejected(other.path(), "<system>");
  TempFile empty_topology("<topology version=\"2.0\"></topology>\n");
  expect_rejected(empty_topology.path(), "hwloc");
  // hwloc 2.9 itself crashes on these (found by tests/fuzz/topology_file_fuzz).
  TempFile half_cpusets(
      "<topology version=\"2.0\">\n <object type=\"Machine\" os_index=\"0\" cpuset=\"0x1\" "
      "nodeset=\"0x1\" complete_nodeset=\"0x1\" gp_index=\"1\"/>\n</topology>\n");
  expect_rejected(half_cpusets.path(), "line 2: an <object> with a cpuset but no complete_cpuset");
  TempFile half_nodesets(
      "<topology version=\"2.0\">\n <object type=\"Machine\" cpuset=\"0x1\" "
      "complete_cpuset=\"0x1\">\n  <object type=\"NUMANode\" os_index=\"0\" cpuset=\"0x1\" "
      "complete_cpuset=\"0x1\" nodeset=\"0x1\"/>\n </object>\n</topology>\n");
  expect_rejected(half_nodesets.path(),
                  "line 3: an <object> with a nodeset but no complete_nodeset");
  // A set that is no bitmap: hwloc_bitmap_sscanf asserts on an empty word.
  for (const char* bad : {",x00000003", "0x", "3", "0x1,,0x2", "0x12345678901234567"}) {
    TempFile not_a_bitmap(std::string("<topology version=\"2.0\">\n <object type=\"Machine\" "
                                      "cpuset=\"0x1\" complete_cpuset=\"") +
                          bad + "\"/>\n</topology>\n");
    expect_rejected(not_a_bitmap.path(),
                    "line 2: an <object>'s complete_cpuset is no hwloc bitmap");
  }
  // hwloc accepts two NUMA nodes with one os_index; the converter names both "numa0".
  std::string twin_numas = kGpuBox;
  const std::string numa1 = "type=\"NUMANode\" os_index=\"1\"";
  ASSERT_NE(twin_numas.find(numa1), std::string::npos);
  twin_numas.replace(twin_numas.find(numa1), numa1.size(), "type=\"NUMANode\" os_index=\"0\"");
  TempFile twins(twin_numas);
  expect_rejected(twins.path(), "numa0");
}

// hwloc's libxml2 plugin installs a libxml2 error handler that lives in the plugin, and hwloc
// unloads the plugin with its last topology: libxml2's next "generic" error (an undecodable
// encoding) jumped into unmapped memory. Found by tests/fuzz/topology_file_fuzz; ctest runs each
// test in a process of its own, where no other topology keeps the plugin loaded.
TEST(Discovery, XmlErrorAfterAnHwlocFile) {
  TempFile box(kGpuBox);
  EXPECT_EQ(load_hwloc_xml(box.path()).of_type(NodeType::Gpu).size(), 1u);
  const std::string bad_encoding =
      "<?xml version=\"1.0\" encoding=\"UTF-.8\"?>\n<ccl_topology version=\"1\">\xff"
      "</ccl_topology>\n";
  TempFile bad(bad_encoding);
  for (int i = 0; i < 2; ++i) {
    EXPECT_THROW(from_xml(bad_encoding, "bad.xml"), Error);
    EXPECT_THROW(load_topology_file(bad.path()), Error);
    EXPECT_THROW(load_hwloc_xml(bad.path()), Error);
  }
}
#else
TEST(Discovery, NoHwlocXml) {
  try {
    load_hwloc_xml("/tmp/x.xml");
    ADD_FAILURE() << "accepted without hwloc";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclInvalidUsage);
  }
}
#endif

TEST(Discovery, NvLinkLanesBecomeLinks) {
  Topology topo = minimal_topology(1, 0, "nv");
  const int hb = topo.add_node(NodeType::HostBridge, 1, "hostbridge0");
  const int g0 = topo.add_node(NodeType::Gpu, hb, "gpu0");
  const int g1 = topo.add_node(NodeType::Gpu, hb, "gpu1");
  topo.node(g0).bus_id = "0000:17:00.0";
  topo.node(g1).bus_id = "0000:18:00.0";
  std::vector<NvLinkLane> lanes;
  for (int i = 0; i < 4; ++i) lanes.push_back({g0, "00000000:18:00.0", 6});  // NVLink 4.0
  for (int i = 0; i < 3; ++i) lanes.push_back({g1, "0000:17:00.0", 6});      // one side short
  lanes.push_back({g0, "0000:C1:00.0", 7});  // NVLink 5.0 to a switch
  lanes.push_back({g0, "0000:c1:00.0", 7});
  lanes.push_back({g1, "0000:c1:00.0", 7});
  lanes.push_back({g1, "0000:c2:00.0", 0});  // another switch, version unknown
  lanes.push_back({g0, "0000:17:00.0", 6});  // to itself: ignored
  lanes.push_back({g0, "garbage", 6});       // ignored
  ASSERT_EQ(add_nvlink_lanes(topo, lanes), 4);
  expect_consistent(topo);
  ASSERT_EQ(topo.of_type(NodeType::NvSwitch).size(), 2u);
  EXPECT_EQ(named(topo, "nvswitch0").bus_id, "0000:c1:00.0");
  EXPECT_EQ(parent_name(topo, "nvswitch1"), "machine");
  const int sw0 = topo.find("nvswitch0"), sw1 = topo.find("nvswitch1");
  auto find_link = [&](int a, int b) -> const Link* {
    for (const Link& l : topo.links()) {
      if ((l.a == a && l.b == b) || (l.a == b && l.b == a)) return &l;
    }
    return nullptr;
  };
  const Link* gg = find_link(g0, g1);
  ASSERT_NE(gg, nullptr);
  EXPECT_EQ(gg->type, LinkType::NvLink);
  EXPECT_EQ(gg->count, 4);
  EXPECT_DOUBLE_EQ(gg->gbps, 4 * nvlink_lane_gbps(6));
  ASSERT_NE(find_link(g0, sw0), nullptr);
  EXPECT_EQ(find_link(g0, sw0)->count, 2);
  EXPECT_DOUBLE_EQ(find_link(g0, sw0)->gbps, 2 * nvlink_lane_gbps(7));
  ASSERT_NE(find_link(g1, sw1), nullptr);
  EXPECT_EQ(find_link(g1, sw1)->count, 1);
  EXPECT_EQ(find_link(g0, sw1), nullptr);
  EXPECT_GT(nvlink_lane_gbps(7), nvlink_lane_gbps(6));
  // Found again later, a switch is reused rather than duplicated.
  ASSERT_EQ(add_nvlink_lanes(topo, {{g1, "0000:c2:00.0", 6}}), 1);
  EXPECT_EQ(topo.of_type(NodeType::NvSwitch).size(), 2u);
}

TEST(Discovery, NvLinksOfAMachineWithoutGpusAreNone) {
  Topology topo = minimal_topology(2, 0, "cpu");
  EXPECT_EQ(discover_nvlinks(topo), 0);
}

// A thread bound to one CPU of each NUMA node in turn is told that node.
TEST(Discovery, CurrentNumaFollowsBinding) {
  const Topology topo = discover_local();
  for (int numa : topo.of_type(NodeType::Numa)) {
    const Node& node = topo.node(numa);
    auto core = std::find_if(node.children.begin(), node.children.end(),
                             [&](int c) { return topo.node(c).type == NodeType::Core; });
    if (core == node.children.end()) continue;  // memory without CPUs
    const int cpu = std::stoi(topo.node(*core).cpuset);
    int seen = -2;
    bool bound = false;
    std::thread([&] {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpu, &set);
      bound = pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
      seen = current_numa_os_index();
    }).join();
    if (!bound) continue;  // not allowed there (cgroup)
    EXPECT_EQ(seen, node.os_index) << "cpu " << cpu;
  }
  const int here = current_numa_os_index();
  bool known = false;
  for (int numa : topo.of_type(NodeType::Numa)) known |= topo.node(numa).os_index == here;
  EXPECT_TRUE(known) << here;
}

}  // namespace
}  // namespace ccl::topo
