// ccl's topology file: the data files load as the machines they describe, are canonical (saved
// back byte for byte), round trips are exact, and broken files give file:line errors, not crashes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "base/error.h"
#include "topology/topology.h"
#include "topology/topology_xml.h"

namespace ccl::topo {
namespace {

const char* const kDataFiles[] = {"vm.xml", "dgx_h100.xml", "pcie_4gpu.xml", "cpu_2s4n.xml"};

std::string data_path(const std::string& name) {
  return std::string(CCL_TEST_DATA_DIR) + "/" + name;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Node by node and link by link, every field.
void expect_same(const Topology& a, const Topology& b) {
  ASSERT_EQ(a.nodes().size(), b.nodes().size());
  for (size_t i = 0; i < a.nodes().size(); ++i) {
    const Node& x = a.nodes()[i];
    const Node& y = b.nodes()[i];
    SCOPED_TRACE("node " + x.name);
    EXPECT_EQ(x.id, y.id);
    EXPECT_EQ(x.type, y.type);
    EXPECT_EQ(x.parent, y.parent);
    EXPECT_EQ(x.children, y.children);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.os_index, y.os_index);
    EXPECT_EQ(x.cpuset, y.cpuset);
    EXPECT_EQ(x.memory_bytes, y.memory_bytes);
    EXPECT_EQ(x.bus_id, y.bus_id);
    EXPECT_EQ(x.vendor, y.vendor);
    EXPECT_EQ(x.device, y.device);
    EXPECT_EQ(x.pci_class, y.pci_class);
    EXPECT_EQ(x.link_gbps, y.link_gbps);  // exact: doubles are written in round-trip form
    EXPECT_EQ(x.os_devices, y.os_devices);
    EXPECT_EQ(x.hostname, y.hostname);
  }
  ASSERT_EQ(a.links().size(), b.links().size());
  for (size_t i = 0; i < a.links().size(); ++i) {
    EXPECT_EQ(a.links()[i].a, b.links()[i].a);
    EXPECT_EQ(a.links()[i].b, b.links()[i].b);
    EXPECT_EQ(a.links()[i].type, b.links()[i].type);
    EXPECT_EQ(a.links()[i].count, b.links()[i].count);
    EXPECT_EQ(a.links()[i].gbps, b.links()[i].gbps);
  }
}

TEST(TopologyXml, DataFilesAreCanonicalAndRoundTrip) {
  for (const char* name : kDataFiles) {
    SCOPED_TRACE(name);
    const std::string text = read_text(data_path(name));
    ASSERT_FALSE(text.empty());
    const Topology t = load_topology_file(data_path(name));
    EXPECT_EQ(to_xml(t), text);
    expect_same(from_xml(to_xml(t), "again"), t);
  }
}

TEST(TopologyXml, DgxH100IsWhatItSays) {
  const Topology t = load_topology_file(data_path("dgx_h100.xml"));
  EXPECT_EQ(t.node(t.root()).hostname, "dgx-h100");
  EXPECT_EQ(t.of_type(NodeType::Package).size(), 2u);
  EXPECT_EQ(t.of_type(NodeType::Numa).size(), 2u);
  EXPECT_EQ(t.of_type(NodeType::Core).size(), 112u);
  const auto gpus = t.of_type(NodeType::Gpu);
  const auto nics = t.of_type(NodeType::Nic);
  ASSERT_EQ(gpus.size(), 8u);
  ASSERT_EQ(nics.size(), 8u);
  EXPECT_EQ(t.of_type(NodeType::NvSwitch).size(), 4u);
  for (int i = 0; i < 8; ++i) {
    const Node& gpu = t.node(gpus[i]);
    const Node& nic = t.node(nics[i]);
    EXPECT_EQ(gpu.name, "gpu" + std::to_string(i));
    EXPECT_EQ(gpu.os_index, i);
    EXPECT_EQ(gpu.vendor, 0x10de);
    EXPECT_EQ(gpu.device, 0x2330);
    EXPECT_EQ(gpu.pci_class, 0x0302u);
    EXPECT_EQ(gpu.link_gbps, 64);
    EXPECT_EQ(nic.vendor, 0x15b3);
    EXPECT_EQ(nic.os_devices,
              (std::vector<std::string>{"mlx5_" + std::to_string(i), "ib" + std::to_string(i)}));
    // One switch per GPU-NIC pair; 4 pairs per socket.
    EXPECT_EQ(gpu.parent, nic.parent);
    EXPECT_EQ(t.node(gpu.parent).type, NodeType::PciSwitch);
    EXPECT_EQ(t.ancestor(gpus[i], NodeType::Package), t.find("package" + std::to_string(i / 4)));
  }
  int smp = 0;
  std::vector<int> lanes(8, 0);
  for (const Link& l : t.links()) {
    if (l.type == LinkType::Smp) {
      ++smp;
      continue;
    }
    ASSERT_EQ(t.node(l.a).type, NodeType::Gpu);
    ASSERT_EQ(t.node(l.b).type, NodeType::NvSwitch);
    EXPECT_EQ(l.gbps, 20.0 * l.count);
    lanes[t.node(l.a).os_index] += l.count;
  }
  EXPECT_EQ(smp, 1);
  EXPECT_EQ(t.links().size(), 33u);  // 8 GPUs x 4 NVSwitches + SMP
  for (int n : lanes) EXPECT_EQ(n, 18);
}

TEST(TopologyXml, SmallMachinesAreWhatTheySay) {
  const Topology vm = load_topology_file(data_path("vm.xml"));
  EXPECT_EQ(vm.of_type(NodeType::Core).size(), 2u);
  ASSERT_EQ(vm.of_type(NodeType::Nic).size(), 1u);
  EXPECT_EQ(vm.node(vm.find("nic0")).bus_id, "0000:00:03.0");
  EXPECT_EQ(vm.node(vm.find("nic0")).os_devices, std::vector<std::string>{"eth0"});
  EXPECT_EQ(vm.node(vm.find("pci0")).bus_id, "0000:00:02.0");
  EXPECT_TRUE(vm.links().empty());

  const Topology ws = load_topology_file(data_path("pcie_4gpu.xml"));
  const auto gpus = ws.of_type(NodeType::Gpu);
  ASSERT_EQ(gpus.size(), 4u);
  EXPECT_EQ(ws.node(gpus[0]).parent, ws.node(gpus[1]).parent);
  EXPECT_EQ(ws.node(gpus[2]).parent, ws.node(gpus[3]).parent);
  EXPECT_NE(ws.node(gpus[0]).parent, ws.node(gpus[2]).parent);
  EXPECT_EQ(ws.node(ws.of_type(NodeType::Nic)[0]).parent, ws.of_type(NodeType::HostBridge)[0]);
  EXPECT_TRUE(ws.links().empty());

  const Topology cpu = load_topology_file(data_path("cpu_2s4n.xml"));
  EXPECT_EQ(cpu.of_type(NodeType::Package).size(), 2u);
  const auto numas = cpu.of_type(NodeType::Numa);
  ASSERT_EQ(numas.size(), 4u);
  for (size_t i = 0; i < numas.size(); ++i) {
    EXPECT_EQ(cpu.ancestor(numas[i], NodeType::Package),
              cpu.find("package" + std::to_string(i / 2)));
  }
  EXPECT_EQ(cpu.of_type(NodeType::Core).size(), 32u);
  ASSERT_EQ(cpu.links().size(), 1u);
  EXPECT_EQ(cpu.links()[0].type, LinkType::Smp);
  EXPECT_EQ(cpu.ancestor(cpu.of_type(NodeType::Nic)[0], NodeType::Package), cpu.find("package0"));
}

// Every field away from its default, and strings that need escaping.
TEST(TopologyXml, RoundTripOfUnusualValues) {
  Topology t;
  t.node(0).name = "box & <co>";
  t.node(0).hostname = "h\"o'st\tname\nline";
  t.node(0).memory_bytes = UINT64_MAX;
  const int pkg = t.add_node(NodeType::Package, 0, "p");
  t.node(pkg).os_index = 2147483647;
  t.node(pkg).cpuset = "0-3,8,10-11";
  const int hb = t.add_node(NodeType::HostBridge, pkg, "hb");
  t.node(hb).bus_id = "10000:3a";
  const int gpu = t.add_node(NodeType::Gpu, hb, "g\xc3\xa9");  // UTF-8
  t.node(gpu).bus_id = "10000:3b:1f.7";
  const int nic = t.add_node(NodeType::Nic, hb, "n");
  t.node(nic).bus_id = "0000:3c:01.b";  // hwloc's XML allows a function up to f
  t.node(gpu).vendor = 0xffff;
  t.node(gpu).device = 0x1;
  t.node(gpu).pci_class = 0x030200;
  t.node(gpu).link_gbps = 0.1;
  t.node(gpu).os_devices = {"cuda0", "x y"};
  const int sw = t.add_node(NodeType::NvSwitch, 0, "sw");
  t.add_link({gpu, sw, LinkType::NvLink, 18, 1.0 / 3});
  t.add_link({pkg, gpu, LinkType::Smp, 1, 1e-300});
  expect_same(from_xml(to_xml(t), "t"), t);
  EXPECT_EQ(to_xml(from_xml(to_xml(t), "t")), to_xml(t));
}

TEST(TopologyXml, UnwritableStringsAreRefused) {
  Topology t;
  t.add_node(NodeType::Package, 0, "bad\x01name");
  EXPECT_THROW(to_xml(t), Error);
  Topology u;
  const int nic = u.add_node(NodeType::Nic, 0, "nic0");
  u.node(nic).os_devices = {"a,b"};
  EXPECT_THROW(to_xml(u), Error);
}

struct Broken {
  const char* text;
  int line;           // expected in the message
  const char* words;  // expected in the message
};

TEST(TopologyXml, BrokenInputsGiveFileAndLine) {
  const std::string head = "<?xml version=\"1.0\"?>\n<ccl_topology version=\"1\">\n";
  auto wrap = [&](const std::string& body) { return head + body + "</ccl_topology>\n"; };
  const std::vector<std::pair<std::string, Broken>> cases = {
      {"", {"", 1, "empty"}},
      {"", {"\x01\x02garbage", 1, ""}},
      {"", {"<ccl_topology version=\"1\">\n<machine name=\"m\">\n", 3, ""}},
      {"", {"<topo version=\"1\"/>", 1, "root element is <topo>"}},
      {"", {"<ccl_topology><machine name=\"m\"/></ccl_topology>", 1, "no version"}},
      {"", {"<ccl_topology version=\"2\"/>", 1, "unsupported version '2'"}},
      {"", {"<ccl_topology version=\"1\" x=\"1\"/>", 1, "unknown attribute 'x'"}},
      {"", {"<ccl_topology version=\"1\"/>", 1, "no <machine>"}},
      {"body", {"<machine name=\"m\"/>\n<machine name=\"n\"/>\n", 4, "a second <machine>"}},
      {"body", {"<package name=\"p\"/>\n", 3, "outside <machine>"}},
      {"body",
       {"<machine name=\"m\">\n<cpu name=\"c\"/>\n</machine>\n", 4, "unknown element <cpu>"}},
      {"body",
       {"<machine name=\"m\">\n<core name=\"c\" speed=\"3\"/>\n</machine>\n", 4,
        "unknown attribute 'speed' on <core>"}},
      {"body", {"<machine name=\"m\">\n<core/>\n</machine>\n", 4, "without a name"}},
      {"body",
       {"<machine name=\"m\">\n<core name=\"c\" os_index=\"x1\"/>\n</machine>\n", 4,
        "bad number 'x1' for os_index"}},
      {"body",
       {"<machine name=\"m\">\n<core name=\"c\" os_index=\"-2\"/>\n</machine>\n", 4, "bad number"}},
      {"body", {"<machine name=\"m\" memory_bytes=\"-1\">\n</machine>\n", 3, "bad number"}},
      {"body", {"<machine name=\"m\" memory_bytes=\"18446744073709551616\"/>\n", 3, "bad number"}},
      {"body",
       {"<machine name=\"m\">\n<gpu name=\"g\" vendor=\"10de\"/>\n</machine>\n", 4,
        "bad number '10de' for vendor"}},
      {"body",
       {"<machine name=\"m\">\n<gpu name=\"g\" device=\"0x10000\"/>\n</machine>\n", 4,
        "bad number"}},
      {"body",
       {"<machine name=\"m\">\n<gpu name=\"g\" link_gbps=\"nan\"/>\n</machine>\n", 4,
        "bad number 'nan'"}},
      {"body",
       {"<machine name=\"m\">\n<gpu name=\"g\" link_gbps=\"1e999\"/>\n</machine>\n", 4,
        "bad number"}},
      {"body",
       {"<machine name=\"m\">\n<core name=\"c\" cpuset=\"1-\"/>\n</machine>\n", 4, "cpuset"}},
      {"body",
       {"<machine name=\"m\">\n<core name=\"c\" cpuset=\"3-1\"/>\n</machine>\n", 4, "cpuset"}},
      {"body",
       {"<machine name=\"m\">\n<gpu name=\"g\" bus_id=\"17:00.0\"/>\n</machine>\n", 4,
        "bad bus_id"}},
      {"body",
       {"<machine name=\"m\">\n<gpu name=\"g\" bus_id=\"0000:17:00.g\"/>\n</machine>\n", 4,
        "bad bus_id"}},
      {"body",
       {"<machine name=\"m\">\n<gpu name=\"g\" bus_id=\"0000:17:00.10\"/>\n</machine>\n", 4,
        "bad bus_id"}},
      {"body",
       {"<machine name=\"m\">\n<nic name=\"n\" os_devices=\"a,,b\"/>\n</machine>\n", 4,
        "os_devices"}},
      {"body",
       {"<machine name=\"m\">\n<gpu name=\"g\"/>\n<gpu name=\"g\"/>\n</machine>\n", 5,
        "duplicate node name 'g'"}},
      {"body", {"<machine name=\"m\">\n<gpu name=\"m\"/>\n</machine>\n", 4, "duplicate"}},
      {"body",
       {"<machine name=\"m\">\n<package name=\"p\">\n<machine name=\"x\"/>\n</package>\n"
        "</machine>\n",
        5, "<machine> inside"}},
      {"body",
       {"<machine name=\"m\">\n<gpu name=\"g\"/>\n</machine>\n"
        "<link a=\"g\" b=\"h\" type=\"nvlink\"/>\n",
        6, "link to unknown node 'h'"}},
      {"body",
       {"<machine name=\"m\">\n<gpu name=\"g\"/>\n</machine>\n"
        "<link a=\"g\" b=\"g\" type=\"nvlink\"/>\n",
        6, "itself"}},
      {"body",
       {"<machine name=\"m\">\n<gpu name=\"g\"/>\n<gpu name=\"h\"/>\n</machine>\n"
        "<link a=\"g\" b=\"h\" type=\"pcie\"/>\n",
        7, "unknown link type 'pcie'"}},
      {"body",
       {"<machine name=\"m\">\n<gpu name=\"g\"/>\n<gpu name=\"h\"/>\n</machine>\n"
        "<link a=\"g\" b=\"h\" type=\"nvlink\" count=\"0\"/>\n",
        7, "bad number '0' for count"}},
      {"body",
       {"<machine name=\"m\">\n<gpu name=\"g\"/>\n</machine>\n<link a=\"g\"/>\n", 6,
        "needs a, b and type"}},
      {"body",
       {"<machine name=\"m\">\n<gpu name=\"g\"/>\n<link a=\"g\" b=\"m\" type=\"nvlink\"/>\n"
        "</machine>\n",
        5, "must be a child of <ccl_topology>"}},
      {"body", {"<machine name=\"m\">\nhello\n</machine>\n", 3, "unexpected text 'hello"}},
      {"body", {"<machine name=\"m\" name=\"n\"/>\n", 3, "redefined"}},
  };
  for (const auto& [kind, c] : cases) {
    const std::string text = kind == "body" ? wrap(c.text) : std::string(c.text);
    SCOPED_TRACE(text);
    try {
      from_xml(text, "in.xml");
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), cclInvalidArgument);
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind("in.xml:" + std::to_string(c.line) + ": ", 0), 0u) << msg;
      EXPECT_NE(msg.find(c.words), std::string::npos) << msg;
    }
  }
}

// Whatever the bytes, the reader returns a topology or throws ccl::Error.
TEST(TopologyXml, GarbageNeverCrashes) {
  const std::string good = read_text(data_path("dgx_h100.xml"));
  ASSERT_FALSE(good.empty());
  int errors = 0;
  for (size_t len = 0; len < good.size(); len += 41) {
    try {
      from_xml(good.substr(0, len), "cut.xml");
    } catch (const Error&) {
      ++errors;
    }
  }
  EXPECT_GT(errors, 0);
  std::mt19937 rng(12345);
  for (int i = 0; i < 400; ++i) {
    std::string text = good;
    for (int k = 0; k < 3; ++k) {
      text[rng() % text.size()] = static_cast<char>(rng() % 256);
    }
    try {
      const Topology t = from_xml(text, "mutated.xml");
      EXPECT_GE(t.nodes().size(), 1u);
    } catch (const Error&) {
    }
  }
}

TEST(TopologyXml, Files) {
  try {
    load_topology_file("/nonexistent/topo.xml");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/topo.xml"), std::string::npos);
  }
  const Topology t = load_topology_file(data_path("pcie_4gpu.xml"));
  const std::string path = testing::TempDir() + "ccl_xml_test_" + std::to_string(getpid()) + ".xml";
  save_topology_file(t, path);
  expect_same(load_topology_file(path), t);
  EXPECT_EQ(read_text(path), read_text(data_path("pcie_4gpu.xml")));
  unlink(path.c_str());
  EXPECT_THROW(save_topology_file(t, "/nonexistent/dir/x.xml"), Error);
}

// A file whose root is <topology> goes to the hwloc converter (which needs hwloc).
TEST(TopologyXml, HwlocFilesGoToHwloc) {
  const std::string path =
      testing::TempDir() + "ccl_xml_hwloc_" + std::to_string(getpid()) + ".xml";
  {
    std::ofstream out(path);
    out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n"
           "<topology version=\"2.0\">\n"
           "  <object type=\"Machine\" os_index=\"0\" cpuset=\"0x00000001\" "
           "complete_cpuset=\"0x00000001\" allowed_cpuset=\"0x00000001\" nodeset=\"0x00000001\" "
           "complete_nodeset=\"0x00000001\" allowed_nodeset=\"0x00000001\" gp_index=\"1\">\n"
           "    <object type=\"Package\" os_index=\"0\" cpuset=\"0x00000001\" "
           "complete_cpuset=\"0x00000001\" nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" "
           "gp_index=\"2\">\n"
           "      <object type=\"NUMANode\" os_index=\"0\" cpuset=\"0x00000001\" "
           "complete_cpuset=\"0x00000001\" nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" "
           "gp_index=\"3\" local_memory=\"1073741824\"/>\n"
           "      <object type=\"Core\" os_index=\"0\" cpuset=\"0x00000001\" "
           "complete_cpuset=\"0x00000001\" nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" "
           "gp_index=\"4\">\n"
           "        <object type=\"PU\" os_index=\"0\" cpuset=\"0x00000001\" "
           "complete_cpuset=\"0x00000001\" nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" "
           "gp_index=\"5\"/>\n"
           "      </object>\n    </object>\n  </object>\n</topology>\n";
  }
#ifdef CCL_HAVE_HWLOC
  const Topology t = load_topology_file(path);
  EXPECT_EQ(t.of_type(NodeType::Package).size(), 1u);
  EXPECT_EQ(t.of_type(NodeType::Core).size(), 1u);
#else
  try {
    load_topology_file(path);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclInvalidUsage);
  }
#endif
  unlink(path.c_str());
}

// CCL_TOPO_FILE and CCL_TOPO_DUMP_FILE; once per process, so the only test here that calls it.
TEST(TopologyXml, SystemTopologyFromFileAndDumped) {
  const std::string dump = testing::TempDir() + "ccl_xml_dump_" + std::to_string(getpid()) + ".xml";
  setenv("CCL_TOPO_FILE", data_path("dgx_h100.xml").c_str(), 1);
  setenv("CCL_TOPO_DUMP_FILE", dump.c_str(), 1);
  const Topology& t = system_topology();
  EXPECT_EQ(t.of_type(NodeType::Gpu).size(), 8u);
  EXPECT_EQ(&system_topology(), &t);
  EXPECT_EQ(read_text(dump), read_text(data_path("dgx_h100.xml")));
  unlink(dump.c_str());
  unsetenv("CCL_TOPO_FILE");
  unsetenv("CCL_TOPO_DUMP_FILE");
}

}  // namespace
}  // namespace ccl::topo
