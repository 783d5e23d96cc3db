#include "topology/paths.h"

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "base/error.h"
#include "sample_topologies.h"
#include "topology/topology_xml.h"

namespace ccl::topo {

// gtest prints path classes by name.
void PrintTo(PathClass c, std::ostream* os) { *os << path_class_name(c); }

namespace {

using testing::add;
using testing::link;

// The class and bandwidth between two named nodes, checked to be symmetric.
PathClass cls(const Topology& t, const std::string& a, const std::string& b) {
  const int ia = t.find(a), ib = t.find(b);
  EXPECT_GE(ia, 0) << a;
  EXPECT_GE(ib, 0) << b;
  const PathClass c = path_class(t, ia, ib);
  EXPECT_EQ(c, path_class(t, ib, ia)) << a << " " << b;
  return c;
}

double bw(const Topology& t, const std::string& a, const std::string& b) {
  const double x = path_bandwidth(t, t.find(a), t.find(b));
  EXPECT_DOUBLE_EQ(x, path_bandwidth(t, t.find(b), t.find(a))) << a << " " << b;
  return x;
}

// The full matrix over `names`, as path class names, row by row.
std::vector<std::string> matrix(const Topology& t, const std::vector<std::string>& names) {
  std::vector<std::string> rows;
  for (const std::string& a : names) {
    std::string row;
    for (const std::string& b : names)
      row += std::string(row.empty() ? "" : " ") + path_class_name(cls(t, a, b));
    rows.push_back(row);
  }
  return rows;
}

TEST(PathsTest, Names) {
  EXPECT_STREQ(path_class_name(PathClass::LOC), "LOC");
  EXPECT_STREQ(path_class_name(PathClass::NVB), "NVB");
  EXPECT_STREQ(path_class_name(PathClass::PXB), "PXB");
  EXPECT_STREQ(path_class_name(PathClass::NET), "NET");
  PathClass c = PathClass::LOC;
  EXPECT_TRUE(parse_path_class("phb", &c));
  EXPECT_EQ(c, PathClass::PHB);
  EXPECT_TRUE(parse_path_class("SYS", &c));
  EXPECT_EQ(c, PathClass::SYS);
  EXPECT_FALSE(parse_path_class("PCI", &c));
  EXPECT_FALSE(parse_path_class(nullptr, &c));
  EXPECT_LT(PathClass::NVL, PathClass::PIX);  // best to worst
  EXPECT_LT(PathClass::PHB, PathClass::SYS);
}

TEST(PathsTest, PcieMatrix) {
  const Topology t = testing::pcie_4gpu();
  const std::vector<std::string> expected = {
      // gpu0 gpu1 gpu2 gpu3 nic0 nvme0
      "LOC PIX SYS SYS SYS PXB",  // gpu0
      "PIX LOC SYS SYS SYS PXB",  // gpu1
      "SYS SYS LOC PHB PIX SYS",  // gpu2
      "SYS SYS PHB LOC PHB SYS",  // gpu3
      "SYS SYS PIX PHB LOC SYS",  // nic0
      "PXB PXB SYS SYS SYS LOC",  // nvme0
  };
  EXPECT_EQ(matrix(t, {"gpu0", "gpu1", "gpu2", "gpu3", "nic0", "nvme0"}), expected);
}

TEST(PathsTest, PcieNonDeviceNodes) {
  const Topology t = testing::pcie_4gpu();
  EXPECT_EQ(cls(t, "gpu0", "swA"), PathClass::PIX);  // its own switch
  EXPECT_EQ(cls(t, "gpu0", "sw0"), PathClass::PXB);  // a switch-to-switch hop
  EXPECT_EQ(cls(t, "gpu0", "hb0"), PathClass::PHB);
  EXPECT_EQ(cls(t, "gpu0", "numa0"), PathClass::PHB);
  EXPECT_EQ(cls(t, "gpu0", "core1"), PathClass::PHB);
  EXPECT_EQ(cls(t, "gpu0", "package0"), PathClass::PHB);
  EXPECT_EQ(cls(t, "gpu0", "numa1"), PathClass::SYS);
  EXPECT_EQ(cls(t, "gpu0", "package1"), PathClass::SYS);
  EXPECT_EQ(cls(t, "gpu2", "numa1"), PathClass::PHB);
  EXPECT_EQ(cls(t, "core0", "core1"), PathClass::PHB);
  EXPECT_EQ(cls(t, "numa0", "numa1"), PathClass::SYS);
  EXPECT_EQ(cls(t, "machine", "machine"), PathClass::LOC);
}

TEST(PathsTest, PcieBandwidth) {
  const Topology t = testing::pcie_4gpu();
  EXPECT_DOUBLE_EQ(bw(t, "gpu0", "gpu1"), 16);  // swA's own link (8) is not on the path
  EXPECT_DOUBLE_EQ(bw(t, "gpu0", "numa0"), 8);  // up through swA
  EXPECT_DOUBLE_EQ(bw(t, "gpu0", "nvme0"), 4);
  EXPECT_DOUBLE_EQ(bw(t, "gpu2", "nic0"), 12.5);
  EXPECT_DOUBLE_EQ(bw(t, "gpu2", "gpu3"), 16);
  EXPECT_DOUBLE_EQ(bw(t, "gpu1", "gpu2"), 8);    // swA (8) is below the SMP link (10)
  EXPECT_DOUBLE_EQ(bw(t, "gpu2", "numa0"), 10);  // the SMP link
  EXPECT_DOUBLE_EQ(bw(t, "numa0", "numa1"), 10);
  EXPECT_DOUBLE_EQ(bw(t, "core0", "core1"), 0);  // nothing known
  EXPECT_DOUBLE_EQ(bw(t, "gpu0", "gpu0"), 0);
}

TEST(PathsTest, DgxMatrix) {
  const Topology t = testing::dgx_like();
  const std::vector<std::string> expected = {
      // gpu0 gpu1 gpu4 nic0 nic1 nic4 nvswitch0 numa0 numa1
      "LOC NVL NVL PIX PXB SYS NVL PHB SYS",  // gpu0
      "NVL LOC NVL PXB PIX SYS NVL PHB SYS",  // gpu1
      "NVL NVL LOC SYS SYS PIX NVL SYS PHB",  // gpu4
      "PIX PXB SYS LOC PXB SYS SYS PHB SYS",  // nic0
      "PXB PIX SYS PXB LOC SYS SYS PHB SYS",  // nic1
      "SYS SYS PIX SYS SYS LOC SYS SYS PHB",  // nic4
      "NVL NVL NVL SYS SYS SYS LOC SYS SYS",  // nvswitch0
      "PHB PHB SYS PHB PHB SYS SYS LOC SYS",  // numa0
      "SYS SYS PHB SYS SYS PHB SYS SYS LOC",  // numa1
  };
  EXPECT_EQ(
      matrix(t, {"gpu0", "gpu1", "gpu4", "nic0", "nic1", "nic4", "nvswitch0", "numa0", "numa1"}),
      expected);
  for (int a = 0; a < 8; ++a) {
    for (int b = 0; b < 8; ++b) {
      const PathClass want = a == b ? PathClass::LOC : PathClass::NVL;
      EXPECT_EQ(cls(t, "gpu" + std::to_string(a), "gpu" + std::to_string(b)), want);
    }
  }
}

TEST(PathsTest, DgxBandwidth) {
  const Topology t = testing::dgx_like();
  EXPECT_DOUBLE_EQ(bw(t, "gpu0", "gpu7"), 450);  // four switches in parallel
  EXPECT_DOUBLE_EQ(bw(t, "gpu0", "nvswitch1"), 100);
  EXPECT_DOUBLE_EQ(bw(t, "gpu0", "nic0"), 50);
  EXPECT_DOUBLE_EQ(bw(t, "gpu0", "nic4"), 40);  // SMP
}

// GPU-GPU-GPU NVLink chain: the ends are NVB (bottleneck of the two hops); with a GPU in the middle
// that has no NVLink to one end, a second intermediate is not allowed (PCIe instead).
TEST(PathsTest, NvlinkThroughIntermediateGpu) {
  Topology t;
  const int package = add(t, NodeType::Package, 0, "package0", "", 0, 0);
  const int hb = add(t, NodeType::HostBridge, package, "hb0", "0000:00");
  const int sw = add(t, NodeType::PciSwitch, hb, "sw0", "0000:01:00.0", 16);
  for (int g = 0; g < 4; ++g) {
    add(t, NodeType::Gpu, sw, "gpu" + std::to_string(g), "0000:0" + std::to_string(g + 2) + ":00.0",
        16, g);
  }
  link(t, "gpu0", "gpu1", LinkType::NvLink, 50, 2);
  link(t, "gpu1", "gpu2", LinkType::NvLink, 25);
  link(t, "gpu2", "gpu3", LinkType::NvLink, 25);
  link(t, "gpu1", "gpu0", LinkType::NvLink, 50, 2);  // a second record adds up
  EXPECT_EQ(cls(t, "gpu0", "gpu1"), PathClass::NVL);
  EXPECT_DOUBLE_EQ(bw(t, "gpu0", "gpu1"), 100);
  EXPECT_EQ(cls(t, "gpu0", "gpu2"), PathClass::NVB);
  EXPECT_DOUBLE_EQ(bw(t, "gpu0", "gpu2"), 25);
  EXPECT_EQ(cls(t, "gpu1", "gpu3"), PathClass::NVB);
  EXPECT_EQ(cls(t, "gpu0", "gpu3"), PathClass::PIX);  // two intermediates: PCIe
  EXPECT_DOUBLE_EQ(bw(t, "gpu0", "gpu3"), 16);
}

// NVSwitches joined to each other (a second NVLink tier): NVL through the chain, with its
// bottleneck; links of unknown bandwidth do not limit.
TEST(PathsTest, NvswitchChain) {
  Topology t;
  const int package = add(t, NodeType::Package, 0, "package0", "", 0, 0);
  for (const char* s : {"nvsA", "nvsB"}) add(t, NodeType::NvSwitch, 0, s);
  for (int g = 0; g < 4; ++g) add(t, NodeType::Gpu, package, "gpu" + std::to_string(g));
  link(t, "gpu0", "nvsA", LinkType::NvLink, 100);
  link(t, "nvsA", "nvsB", LinkType::NvLink, 50);
  link(t, "nvsB", "gpu1", LinkType::NvLink, 100);
  link(t, "nvsB", "gpu2", LinkType::NvLink, 0);
  link(t, "gpu3", "gpu1", LinkType::NvLink, 20);
  EXPECT_EQ(cls(t, "gpu0", "gpu1"), PathClass::NVL);
  EXPECT_DOUBLE_EQ(bw(t, "gpu0", "gpu1"), 50);
  EXPECT_EQ(cls(t, "gpu0", "gpu2"), PathClass::NVL);
  EXPECT_DOUBLE_EQ(bw(t, "gpu0", "gpu2"), 50);
  EXPECT_EQ(cls(t, "gpu1", "gpu2"), PathClass::NVL);
  EXPECT_DOUBLE_EQ(bw(t, "gpu1", "gpu2"), 100);
  EXPECT_EQ(cls(t, "gpu0", "gpu3"), PathClass::NVB);  // through gpu1
  EXPECT_DOUBLE_EQ(bw(t, "gpu0", "gpu3"), 20);
  EXPECT_EQ(cls(t, "gpu0", "nvsB"), PathClass::NVL);
  EXPECT_EQ(cls(t, "gpu3", "nvsA"), PathClass::NVB);      // through gpu1 and nvsB
  EXPECT_EQ(cls(t, "nvsA", "package0"), PathClass::PHB);  // no NVLink: the tree
}

// NUMA nodes of one package are PHB (no SMP link crossed), of different packages SYS.
TEST(PathsTest, CpuNodeMatrix) {
  const Topology t = testing::cpu_2s4n();
  const std::vector<std::string> expected = {
      "LOC PHB SYS SYS PHB PHB SYS",  // numa0
      "PHB LOC SYS SYS PHB PHB SYS",  // numa1
      "SYS SYS LOC PHB SYS SYS PHB",  // numa2
      "SYS SYS PHB LOC SYS SYS PHB",  // numa3
      "PHB PHB SYS SYS LOC PHB SYS",  // core0
      "PHB PHB SYS SYS PHB LOC SYS",  // core2
      "SYS SYS PHB PHB SYS SYS LOC",  // core4
  };
  EXPECT_EQ(matrix(t, {"numa0", "numa1", "numa2", "numa3", "core0", "core2", "core4"}), expected);
  EXPECT_DOUBLE_EQ(bw(t, "numa0", "numa3"), 40);
  EXPECT_DOUBLE_EQ(bw(t, "numa0", "numa1"), 0);
}

// Devices whose locality is unknown (host bridges under the machine, as in some VMs): PHB on a
// machine with one socket, SYS when there are several.
TEST(PathsTest, UnknownLocality) {
  Topology vm;
  const int hb0 = add(vm, NodeType::HostBridge, 0, "hb0", "0000:00");
  const int hb1 = add(vm, NodeType::HostBridge, 0, "hb1", "0000:80");
  add(vm, NodeType::Gpu, hb0, "gpu0", "0000:01:00.0", 16, 0);
  add(vm, NodeType::Gpu, hb1, "gpu1", "0000:81:00.0", 16, 1);
  add(vm, NodeType::Numa, 0, "numa0", "", 0, 0);
  EXPECT_EQ(cls(vm, "gpu0", "gpu1"), PathClass::PHB);
  EXPECT_EQ(cls(vm, "gpu0", "numa0"), PathClass::PHB);
  EXPECT_EQ(cls(vm, "gpu0", "machine"), PathClass::PHB);

  Topology t = testing::cpu_2s4n();
  const int hb = add(t, NodeType::HostBridge, 0, "hb0", "0000:00");
  add(t, NodeType::Gpu, hb, "gpu0", "0000:01:00.0", 16, 0);
  EXPECT_EQ(cls(t, "gpu0", "numa0"), PathClass::SYS);
  EXPECT_EQ(cls(t, "gpu0", "hb0"), PathClass::PHB);

  // NUMA nodes without packages: each is a CPU of its own, so SYS between them (as NCCL).
  Topology numa_only;
  add(numa_only, NodeType::Numa, 0, "numa0", "", 0, 0);
  const int numa1 = add(numa_only, NodeType::Numa, 0, "numa1", "", 0, 1);
  add(numa_only, NodeType::Core, numa1, "core0", "", 0, 0);
  EXPECT_EQ(cls(numa_only, "numa0", "numa1"), PathClass::SYS);
  EXPECT_EQ(cls(numa_only, "numa0", "core0"), PathClass::SYS);
  EXPECT_EQ(cls(numa_only, "numa1", "core0"), PathClass::PHB);
}

// The hand-written machines in tests/data, loaded through the file loader.
TEST(PathsTest, SampleFiles) {
  const std::string dir = CCL_TEST_DATA_DIR;
  const Topology dgx = load_topology_file(dir + "/dgx_h100.xml");
  EXPECT_EQ(cls(dgx, "gpu0", "gpu7"), PathClass::NVL);
  EXPECT_DOUBLE_EQ(bw(dgx, "gpu0", "gpu7"), 360);  // 100 + 80 + 80 + 100 over four NVSwitches
  EXPECT_EQ(cls(dgx, "gpu0", "nic0"), PathClass::PIX);
  EXPECT_EQ(cls(dgx, "gpu0", "nic1"), PathClass::PHB);
  EXPECT_EQ(cls(dgx, "gpu0", "nic4"), PathClass::SYS);
  EXPECT_DOUBLE_EQ(bw(dgx, "gpu0", "nic4"), 64);
  EXPECT_EQ(cls(dgx, "numa0", "numa1"), PathClass::SYS);
  EXPECT_DOUBLE_EQ(bw(dgx, "numa0", "numa1"), 96);

  const Topology pcie = load_topology_file(dir + "/pcie_4gpu.xml");
  EXPECT_EQ(cls(pcie, "gpu0", "gpu1"), PathClass::PIX);
  EXPECT_EQ(cls(pcie, "gpu2", "gpu3"), PathClass::PIX);
  EXPECT_EQ(cls(pcie, "gpu1", "gpu2"), PathClass::PHB);
  EXPECT_EQ(cls(pcie, "gpu0", "nic0"), PathClass::PHB);
  EXPECT_DOUBLE_EQ(bw(pcie, "gpu0", "gpu1"), 32);

  const Topology cpu = load_topology_file(dir + "/cpu_2s4n.xml");
  EXPECT_EQ(cls(cpu, "numa0", "numa1"), PathClass::PHB);
  EXPECT_EQ(cls(cpu, "numa1", "numa2"), PathClass::SYS);
  EXPECT_DOUBLE_EQ(bw(cpu, "numa1", "numa2"), 128);

  const Topology vm = load_topology_file(dir + "/vm.xml");
  EXPECT_EQ(cls(vm, "nic0", "pci0"), PathClass::PHB);
  EXPECT_EQ(cls(vm, "nic0", "numa0"), PathClass::PHB);  // one socket: unknown locality is PHB
}

TEST(PathsTest, BadNodeIsInvalidArgument) {
  const Topology t = testing::pcie_4gpu();
  const int n = static_cast<int>(t.nodes().size());
  try {
    path_class(t, 0, n);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclInvalidArgument);
  }
  EXPECT_THROW(path_bandwidth(t, -1, 0), Error);
}

}  // namespace
}  // namespace ccl::topo
