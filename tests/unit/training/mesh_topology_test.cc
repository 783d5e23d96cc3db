// place_mesh on the places of the saved machines in tests/data: each rank's locality is the
// locality key the library itself gives the rank's device (topo::locality_key of a GPU, or of a
// NUMA node on a machine without GPUs), as a caller would pass it to DeviceMesh.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ccl/training/mesh.hpp"
#include "mesh_checks.h"
#include "topology/orders.h"
#include "topology/topology_xml.h"

namespace ccl::training {
namespace {

struct Machine {
  topo::Topology topo;
  std::vector<int> devices;  // rank_devices: GPUs, else NUMA nodes
};

Machine load(const std::string& file) {
  Machine m{topo::load_topology_file(std::string(CCL_TEST_DATA_DIR) + "/" + file), {}};
  m.devices = topo::rank_devices(m.topo);
  return m;
}

// `hosts` copies of `machine`, one rank per device; rank r on host r % hosts and, inside it, on
// device (r / hosts · 3) mod devices (scrambled, so the placement has to sort). Also returns each
// rank's device name.
std::vector<MeshPlace> places_on(const Machine& machine, int hosts,
                                 std::vector<std::string>* names) {
  const int per_host = static_cast<int>(machine.devices.size());
  std::vector<MeshPlace> places;
  names->clear();
  for (int r = 0; r < hosts * per_host; ++r) {
    // 3 is coprime with 8, 4 and 1 device(s) per host, so this is a permutation per host.
    const int device = machine.devices[static_cast<std::size_t>((r / hosts) * 3 % per_host)];
    places.push_back(
        {"node" + std::to_string(r % hosts), topo::locality_key(machine.topo, device)});
    names->push_back(machine.topo.node(device).name);
  }
  return places;
}

// The device names of each tp group, sorted, per host.
std::vector<std::vector<std::string>> tp_devices(const MeshPlacement& m,
                                                 const std::vector<std::string>& names) {
  std::vector<std::vector<std::string>> out;
  for (const auto& g : m.groups(MeshAxis::Tp)) {
    out.emplace_back();
    for (int r : g) out.back().push_back(names[static_cast<std::size_t>(r)]);
    std::sort(out.back().begin(), out.back().end());
  }
  return out;
}

using Names = std::vector<std::vector<std::string>>;

TEST(MeshTopology, DgxH100) {
  const Machine dgx = load("dgx_h100.xml");
  ASSERT_EQ(dgx.devices.size(), 8u);
  std::vector<std::string> names;
  const auto places = places_on(dgx, 2, &names);
  // tp = the 8 GPUs of a host, the pipeline's 2 stages on the 2 hosts.
  const MeshPlacement whole = place_mesh({.tp = 8, .pp = 2, .dp = 1}, places);
  ccl_test::expect_valid_mesh(whole, places);
  for (const auto& g : whole.groups(MeshAxis::Pp)) {
    EXPECT_NE(places[static_cast<std::size_t>(g[0])].host,
              places[static_cast<std::size_t>(g[1])].host);
  }
  // tp 4: the GPUs of one package each (gpu0-3 under package0, gpu4-7 under package1).
  const MeshPlacement half = place_mesh({.tp = 4, .pp = 2, .dp = 2}, places);
  ccl_test::expect_valid_mesh(half, places);
  const std::vector<std::string> low = {"gpu0", "gpu1", "gpu2", "gpu3"};
  const std::vector<std::string> high = {"gpu4", "gpu5", "gpu6", "gpu7"};
  EXPECT_EQ(tp_devices(half, names), (Names{low, high, low, high}));
  // The pipeline's stages on different hosts, the data-parallel pairs inside one.
  const auto host_of = [&](int r) { return places[static_cast<std::size_t>(r)].host; };
  for (const auto& g : half.groups(MeshAxis::Pp)) EXPECT_NE(host_of(g[0]), host_of(g[1]));
  for (const auto& g : half.groups(MeshAxis::Dp)) EXPECT_EQ(host_of(g[0]), host_of(g[1]));
  // tp 2: neighbouring GPUs.
  const MeshPlacement pairs = place_mesh({.tp = 2, .pp = 4, .dp = 2}, places);
  ccl_test::expect_valid_mesh(pairs, places);
  EXPECT_EQ(tp_devices(pairs, names)[1], (std::vector<std::string>{"gpu2", "gpu3"}));
  // 16 GPUs cannot all be one tp group: it would cross the hosts.
  EXPECT_THROW(place_mesh({.tp = 16, .pp = 1, .dp = 1}, places), Error);
}

TEST(MeshTopology, Pcie4Gpu) {
  const Machine pcie = load("pcie_4gpu.xml");
  ASSERT_EQ(pcie.devices.size(), 4u);
  std::vector<std::string> names;
  const auto places = places_on(pcie, 2, &names);
  const MeshPlacement m = place_mesh({.tp = 2, .pp = 2, .dp = 2}, places);
  ccl_test::expect_valid_mesh(m, places);
  const std::vector<std::string> a = {"gpu0", "gpu1"};
  const std::vector<std::string> b = {"gpu2", "gpu3"};
  EXPECT_EQ(tp_devices(m, names), (Names{a, b, a, b}));
}

TEST(MeshTopology, Cpu2Sockets4Numa) {
  const Machine cpu = load("cpu_2s4n.xml");
  ASSERT_EQ(cpu.devices.size(), 4u);
  std::vector<std::string> names;
  const auto places = places_on(cpu, 2, &names);
  // tp 2: the two NUMA nodes of one socket, never across the SMP link.
  const MeshPlacement m = place_mesh({.tp = 2, .pp = 2, .dp = 2}, places);
  ccl_test::expect_valid_mesh(m, places);
  const std::vector<std::string> s0 = {"numa0", "numa1"};
  const std::vector<std::string> s1 = {"numa2", "numa3"};
  EXPECT_EQ(tp_devices(m, names), (Names{s0, s1, s0, s1}));
  ccl_test::expect_valid_mesh(place_mesh({.tp = 4, .pp = 2, .dp = 1}, places), places);
}

TEST(MeshTopology, VmWithOneNumaNode) {
  const Machine vm = load("vm.xml");
  ASSERT_EQ(vm.devices.size(), 1u);
  // Four ranks per VM on its one NUMA node: equal keys, so rank order inside each host.
  std::vector<MeshPlace> places;
  for (int r = 0; r < 8; ++r) {
    places.push_back({"vm" + std::to_string(r / 4), topo::locality_key(vm.topo, vm.devices[0])});
  }
  const MeshPlacement m = place_mesh({.tp = 4, .pp = 1, .dp = 2}, places);
  ccl_test::expect_valid_mesh(m, places);
  EXPECT_EQ(m.groups(MeshAxis::Tp), (std::vector<std::vector<int>>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
}

}  // namespace
}  // namespace ccl::training
