// Small machines built in code for the path and order tests. Nodes are added in a scrambled order
// (the second package before the first, GPUs out of bus order) so that a result that merely
// follows node ids fails.
#pragma once

#include <cstdio>
#include <string>

#include "topology/topology.h"

namespace ccl::topo::testing {

inline int add(Topology& t, NodeType type, int parent, const std::string& name,
               const std::string& bus = "", double gbps = 0, int os_index = -1) {
  const int id = t.add_node(type, parent, name);
  t.node(id).bus_id = bus;
  t.node(id).link_gbps = gbps;
  t.node(id).os_index = os_index;
  return id;
}

inline void link(Topology& t, const std::string& a, const std::string& b, LinkType type,
                 double gbps, int count = 1) {
  t.add_link(Link{t.find(a), t.find(b), type, count, gbps});
}

// PCIe only, two sockets, four GPUs:
//   package0/numa0, core0, core1; hb0 0000:00 / sw0 (32) / swA (8) / gpu0 (16), gpu1 (16)
//                                                    sw0 / swB (16) / nvme0 (4)
//   package1/numa1; hb1 0000:80 / sw1 (16) / gpu2 (16), nic0 (12.5)
//                   hb2 0000:c0 / sw2 (16) / gpu3 (16)
//   SMP link package0-package1: 10 GB/s.
inline Topology pcie_4gpu() {
  Topology t;
  const int p1 = add(t, NodeType::Package, 0, "package1", "", 0, 1);
  add(t, NodeType::Numa, p1, "numa1", "", 0, 1);
  const int hb2 = add(t, NodeType::HostBridge, p1, "hb2", "0000:c0");
  const int sw2 = add(t, NodeType::PciSwitch, hb2, "sw2", "0000:c1:00.0", 16);
  add(t, NodeType::Gpu, sw2, "gpu3", "0000:c2:00.0", 16, 3);
  const int hb1 = add(t, NodeType::HostBridge, p1, "hb1", "0000:80");
  const int sw1 = add(t, NodeType::PciSwitch, hb1, "sw1", "0000:81:00.0", 16);
  add(t, NodeType::Nic, sw1, "nic0", "0000:83:00.0", 12.5);
  add(t, NodeType::Gpu, sw1, "gpu2", "0000:82:00.0", 16, 2);
  const int p0 = add(t, NodeType::Package, 0, "package0", "", 0, 0);
  const int hb0 = add(t, NodeType::HostBridge, p0, "hb0", "0000:00");
  const int numa0 = add(t, NodeType::Numa, p0, "numa0", "", 0, 0);
  add(t, NodeType::Core, numa0, "core1", "", 0, 1);
  add(t, NodeType::Core, numa0, "core0", "", 0, 0);
  const int sw0 = add(t, NodeType::PciSwitch, hb0, "sw0", "0000:01:00.0", 32);
  const int swb = add(t, NodeType::PciSwitch, sw0, "swB", "0000:05:00.0", 16);
  add(t, NodeType::PciDevice, swb, "nvme0", "0000:06:00.0", 4);
  const int swa = add(t, NodeType::PciSwitch, sw0, "swA", "0000:02:00.0", 8);
  add(t, NodeType::Gpu, swa, "gpu1", "0000:04:00.0", 16, 1);
  add(t, NodeType::Gpu, swa, "gpu0", "0000:03:00.0", 16, 0);
  link(t, "package0", "package1", LinkType::Smp, 10);
  return t;
}

// DGX-like: two sockets; per socket a host bridge and a top switch (64) with four leaf switches
// (64), each holding one GPU (64) and one NIC (50). Four NVSwitches under the machine; every GPU
// links to each with 125, 100, 100, 125 GB/s (450 in all). SMP link: 40 GB/s.
inline Topology dgx_like() {
  Topology t;
  const double nv_gbps[4] = {125, 100, 100, 125};
  for (int s = 3; s >= 0; --s) add(t, NodeType::NvSwitch, 0, "nvswitch" + std::to_string(s));
  for (int p = 1; p >= 0; --p) {
    const std::string ps = std::to_string(p);
    const int package = add(t, NodeType::Package, 0, "package" + ps, "", 0, p);
    add(t, NodeType::Numa, package, "numa" + ps, "", 0, p);
    const int hb = add(t, NodeType::HostBridge, package, "hb" + ps, p == 0 ? "0000:00" : "0000:80");
    const std::string top_bus = p == 0 ? "0000:01:00.0" : "0000:81:00.0";
    const int top = add(t, NodeType::PciSwitch, hb, "swtop" + ps, top_bus, 64);
    for (int i = 3; i >= 0; --i) {
      const int g = 4 * p + i;
      const int base = (p == 0 ? 0x10 : 0x90) + 0x10 * i;
      char bus[32];
      std::snprintf(bus, sizeof(bus), "0000:%02x:00.0", base);
      const int leaf = add(t, NodeType::PciSwitch, top, "sw" + std::to_string(g), bus, 64);
      std::snprintf(bus, sizeof(bus), "0000:%02x:00.0", base + 1);
      add(t, NodeType::Gpu, leaf, "gpu" + std::to_string(g), bus, 64, g);
      std::snprintf(bus, sizeof(bus), "0000:%02x:00.0", base + 2);
      add(t, NodeType::Nic, leaf, "nic" + std::to_string(g), bus, 50);
    }
  }
  for (int g = 0; g < 8; ++g) {
    for (int s = 0; s < 4; ++s) {
      link(t, "gpu" + std::to_string(g), "nvswitch" + std::to_string(s), LinkType::NvLink,
           nv_gbps[s], static_cast<int>(nv_gbps[s] / 25));
    }
  }
  link(t, "package0", "package1", LinkType::Smp, 40);
  return t;
}

// A CPU node: two sockets with two NUMA nodes each (sub-NUMA clustering), two cores per NUMA node.
// SMP link 40 GB/s.
inline Topology cpu_2s4n() {
  Topology t;
  for (int p = 1; p >= 0; --p) {
    const int package = add(t, NodeType::Package, 0, "package" + std::to_string(p), "", 0, p);
    for (int n = 2 * p + 1; n >= 2 * p; --n) {
      const int numa = add(t, NodeType::Numa, package, "numa" + std::to_string(n), "", 0, n);
      for (int c = 2 * n + 1; c >= 2 * n; --c) {
        add(t, NodeType::Core, numa, "core" + std::to_string(c), "", 0, c);
      }
    }
  }
  link(t, "package0", "package1", LinkType::Smp, 40);
  return t;
}

// A DGX-1-like NVLink hybrid cube mesh without NVSwitches, all GPUs under one PCI switch: GPUs
// 0-3 and 4-7 fully connected, plus i <-> i+4. Every NVLink 25 GB/s.
inline Topology cube_mesh() {
  Topology t;
  const int package = add(t, NodeType::Package, 0, "package0", "", 0, 0);
  const int hb = add(t, NodeType::HostBridge, package, "hb0", "0000:00");
  const int sw = add(t, NodeType::PciSwitch, hb, "sw0", "0000:01:00.0", 16);
  for (int g = 7; g >= 0; --g) {
    char bus[32];
    std::snprintf(bus, sizeof(bus), "0000:%02x:00.0", 0x10 + g);
    add(t, NodeType::Gpu, sw, "gpu" + std::to_string(g), bus, 16, g);
  }
  auto nv = [&](int a, int b) {
    link(t, "gpu" + std::to_string(a), "gpu" + std::to_string(b), LinkType::NvLink, 25);
  };
  for (int q = 0; q < 8; q += 4) {
    for (int a = q; a < q + 4; ++a) {
      for (int b = a + 1; b < q + 4; ++b) nv(a, b);
    }
  }
  for (int a = 0; a < 4; ++a) nv(a, a + 4);
  return t;
}

}  // namespace ccl::topo::testing
