#include "topology/orders.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "sample_topologies.h"
#include "topology/paths.h"
#include "topology/topology_xml.h"

namespace ccl::topo {
namespace {

std::vector<int> ids(const Topology& t, const std::vector<std::string>& names) {
  std::vector<int> out;
  for (const std::string& n : names) {
    out.push_back(t.find(n));
    EXPECT_GE(out.back(), 0) << n;
  }
  return out;
}

bool is_permutation_of_n(const std::vector<int>& order, size_t n) {
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> iota(n);
  std::iota(iota.begin(), iota.end(), 0);
  return sorted == iota;
}

// The node names of `devices` in `order`.
std::vector<std::string> names(const Topology& t, const std::vector<int>& devices,
                               const std::vector<int>& order) {
  EXPECT_TRUE(is_permutation_of_n(order, devices.size()));
  std::vector<std::string> out;
  for (int i : order) out.push_back(t.node(devices[i]).name);
  return out;
}

// How many ring neighbours (the wrap included) sit in different packages.
int socket_crossings(const Topology& t, const std::vector<int>& devices,
                     const std::vector<int>& ring) {
  int crossings = 0;
  for (size_t i = 0; i < ring.size(); ++i) {
    const int a = devices[ring[i]], b = devices[ring[(i + 1) % ring.size()]];
    crossings += t.ancestor(a, NodeType::Package) != t.ancestor(b, NodeType::Package);
  }
  return crossings;
}

TEST(OrdersTest, LocalityKeySortsDepthFirst) {
  const Topology t = testing::pcie_4gpu();
  // machine / package0 (0) / hb0 (1: after numa0, which has no bus id) / sw0 / swA / gpu0
  EXPECT_EQ(locality_key(t, t.find("gpu0")), (std::vector<int>{0, 1, 0, 0, 0}));
  EXPECT_EQ(locality_key(t, t.find("gpu1")), (std::vector<int>{0, 1, 0, 0, 1}));
  EXPECT_EQ(locality_key(t, t.find("core0")), (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(locality_key(t, t.find("nic0")), (std::vector<int>{1, 1, 0, 1}));  // after gpu2
  EXPECT_TRUE(locality_key(t, t.root()).empty());
  // Sorting all nodes by key is a pre-order walk: parents first, every subtree contiguous.
  std::vector<int> all(t.nodes().size());
  std::iota(all.begin(), all.end(), 0);
  std::sort(all.begin(), all.end(),
            [&](int a, int b) { return locality_key(t, a) < locality_key(t, b); });
  std::vector<int> walk;
  auto visit = [&](auto&& self, int id) -> void {
    walk.push_back(id);
    std::vector<int> kids = t.node(id).children;
    std::sort(kids.begin(), kids.end(),
              [&](int a, int b) { return locality_key(t, a) < locality_key(t, b); });
    for (int k : kids) self(self, k);
  };
  visit(visit, t.root());
  EXPECT_EQ(all, walk);
  EXPECT_EQ(t.node(all[1]).name, "package0");
  EXPECT_THROW(locality_key(t, -1), Error);
}

TEST(OrdersTest, SiblingsInNumericOrder) {
  Topology t;
  const int numa = testing::add(t, NodeType::Numa, 0, "numa0", "", 0, 0);
  for (int c : {10, 2, 1}) testing::add(t, NodeType::Core, numa, "core" + std::to_string(c));
  // No OS indices: names in numeric order ("core2" before "core10").
  EXPECT_EQ(locality_key(t, t.find("core1")), (std::vector<int>{0, 0}));
  EXPECT_EQ(locality_key(t, t.find("core2")), (std::vector<int>{0, 1}));
  EXPECT_EQ(locality_key(t, t.find("core10")), (std::vector<int>{0, 2}));
}

TEST(OrdersTest, RankDevices) {
  const Topology pcie = testing::pcie_4gpu();
  EXPECT_EQ(rank_devices(pcie), pcie.of_type(NodeType::Gpu));
  const Topology cpu = testing::cpu_2s4n();
  EXPECT_EQ(rank_devices(cpu), cpu.of_type(NodeType::Numa));
  EXPECT_EQ(rank_devices(cpu).size(), 4u);
  EXPECT_EQ(rank_devices(Topology()), std::vector<int>{0});
}

TEST(OrdersTest, PcieRingFollowsTheTree) {
  const Topology t = testing::pcie_4gpu();
  const std::vector<int> devices = ids(t, {"gpu3", "gpu1", "gpu2", "gpu0"});
  const std::vector<int> ring = ring_order(t, devices);
  EXPECT_EQ(names(t, devices, ring), (std::vector<std::string>{"gpu0", "gpu1", "gpu2", "gpu3"}));
  EXPECT_EQ(socket_crossings(t, devices, ring), 2);
  EXPECT_EQ(names(t, devices, tree_order(t, devices)),
            (std::vector<std::string>{"gpu2", "gpu3", "gpu0", "gpu1"}));  // nic0 is next to gpu2
  EXPECT_TRUE(ring_order(t, std::vector<int>{}).empty());
  EXPECT_EQ(ring_order(t, ids(t, {"gpu1"})), std::vector<int>{0});
  EXPECT_THROW(ring_order(t, std::vector<int>{999}), Error);
  EXPECT_THROW(tree_order(t, std::vector<int>{-1}), Error);
}

// Any input order gives the same device order (every rank computes the same ring), and the copies
// of one device (several ranks on a NUMA node) sit together.
TEST(OrdersTest, CpuNodeRingWithSeveralRanksPerNuma) {
  const Topology t = testing::cpu_2s4n();
  std::vector<int> devices;
  for (int d : rank_devices(t)) devices.insert(devices.end(), {d, d, d});
  std::mt19937 rng(7);
  std::vector<std::string> first;
  for (int trial = 0; trial < 20; ++trial) {
    std::shuffle(devices.begin(), devices.end(), rng);
    const std::vector<int> ring = ring_order(t, devices);
    const std::vector<std::string> got = names(t, devices, ring);
    EXPECT_EQ(socket_crossings(t, devices, ring), 2);
    if (trial == 0) first = got;
    EXPECT_EQ(got, first);
    EXPECT_EQ(names(t, devices, tree_order(t, devices)), got);  // no NICs: the same order
  }
  const std::vector<std::string> want = {"numa0", "numa0", "numa0", "numa1", "numa1", "numa1",
                                         "numa2", "numa2", "numa2", "numa3", "numa3", "numa3"};
  EXPECT_EQ(first, want);
}

// Copies of one device keep their input order, so ranks that share a device stay in rank order.
TEST(OrdersTest, TiesKeepInputOrder) {
  const Topology t = testing::cpu_2s4n();
  const std::vector<int> devices = ids(t, {"numa2", "numa0", "numa2", "numa0"});
  EXPECT_EQ(ring_order(t, devices), (std::vector<int>{1, 3, 0, 2}));
}

TEST(OrdersTest, DgxRingIsLocalityOrderAndNvl) {
  const Topology t = testing::dgx_like();
  const std::vector<int> devices = rank_devices(t);
  ASSERT_EQ(devices.size(), 8u);
  const std::vector<int> ring = ring_order(t, devices);
  std::vector<std::string> want;
  for (int g = 0; g < 8; ++g) want.push_back("gpu" + std::to_string(g));
  EXPECT_EQ(names(t, devices, ring), want);
  EXPECT_EQ(socket_crossings(t, devices, ring), 2);
  // Every GPU has its own NIC (PIX, 50 GB/s): none is closer, so the tree order is the same.
  EXPECT_EQ(names(t, devices, tree_order(t, devices)), want);
}

// DGX-1-like hybrid cube mesh: gpu3-gpu4 and gpu7-gpu0 are not NVLink neighbours, so the locality
// order 0..7 is replaced by a ring with NVLink between all neighbours, starting like it.
TEST(OrdersTest, CubeMeshRingUsesNvlinkOnly) {
  const Topology t = testing::cube_mesh();
  const std::vector<int> devices = rank_devices(t);
  const std::vector<int> ring = ring_order(t, devices);
  const std::vector<std::string> got = names(t, devices, ring);
  ASSERT_EQ(got.size(), 8u);
  for (size_t i = 0; i < ring.size(); ++i) {
    const int a = devices[ring[i]], b = devices[ring[(i + 1) % ring.size()]];
    EXPECT_EQ(path_class(t, a, b), PathClass::NVL) << got[i] << " " << got[(i + 1) % 8];
  }
  EXPECT_EQ(std::vector<std::string>(got.begin(), got.begin() + 4),
            (std::vector<std::string>{"gpu0", "gpu1", "gpu2", "gpu3"}));
  // The tree order does not search: it is the locality order.
  std::vector<std::string> want;
  for (int g = 0; g < 8; ++g) want.push_back("gpu" + std::to_string(g));
  EXPECT_EQ(names(t, devices, tree_order(t, devices)), want);
}

// Without a ring of NVLink neighbours (a chain), the locality order stays.
TEST(OrdersTest, NvlinkChainKeepsLocalityOrder) {
  Topology t = testing::pcie_4gpu();
  testing::link(t, "gpu0", "gpu2", LinkType::NvLink, 25);
  testing::link(t, "gpu2", "gpu1", LinkType::NvLink, 25);
  const std::vector<int> devices = ids(t, {"gpu0", "gpu1", "gpu2", "gpu3"});
  EXPECT_EQ(ring_order(t, devices), (std::vector<int>{0, 1, 2, 3}));
}

// The hand-written machines in tests/data, loaded through the file loader.
TEST(OrdersTest, SampleFiles) {
  const std::string dir = CCL_TEST_DATA_DIR;
  auto ring_names = [&](const Topology& t) {
    const std::vector<int> devices = rank_devices(t);
    return names(t, devices, ring_order(t, devices));
  };
  const Topology dgx = load_topology_file(dir + "/dgx_h100.xml");
  EXPECT_EQ(ring_names(dgx), (std::vector<std::string>{"gpu0", "gpu1", "gpu2", "gpu3", "gpu4",
                                                       "gpu5", "gpu6", "gpu7"}));
  const Topology pcie = load_topology_file(dir + "/pcie_4gpu.xml");
  EXPECT_EQ(ring_names(pcie), (std::vector<std::string>{"gpu0", "gpu1", "gpu2", "gpu3"}));
  const Topology cpu = load_topology_file(dir + "/cpu_2s4n.xml");
  const std::vector<int> numas = rank_devices(cpu);
  const std::vector<int> ring = ring_order(cpu, numas);
  EXPECT_EQ(names(cpu, numas, ring),
            (std::vector<std::string>{"numa0", "numa1", "numa2", "numa3"}));
  EXPECT_EQ(socket_crossings(cpu, numas, ring), 2);
  const Topology vm = load_topology_file(dir + "/vm.xml");
  EXPECT_EQ(ring_names(vm), std::vector<std::string>{"numa0"});
}

TEST(OrdersTest, RankOrdersGroupHosts) {
  // r0..r7 alternate between hosts "zeta" and "alpha"; locality reversed inside each host.
  std::vector<RankPlace> places;
  for (int r = 0; r < 8; ++r) {
    places.push_back({r % 2 == 0 ? "zeta" : "alpha", {0, 3 - r / 2}});
  }
  // zeta first (it holds rank 0), inside a host by locality key.
  const std::vector<int> want = {6, 4, 2, 0, 7, 5, 3, 1};
  EXPECT_EQ(rank_ring_order(places), want);
  EXPECT_EQ(rank_tree_order(places), want);
  // Equal keys (several ranks on one device, or no locality known): rank order.
  for (RankPlace& p : places) p.locality = {1};
  EXPECT_EQ(rank_ring_order(places), (std::vector<int>{0, 2, 4, 6, 1, 3, 5, 7}));
  // Shorter keys (ancestors) come first; one host: just the locality order.
  std::vector<RankPlace> one = {{"h", {1, 0}}, {"h", {0, 2}}, {"h", {0}}, {"h", {0, 2, 1}}};
  EXPECT_EQ(rank_ring_order(one), (std::vector<int>{2, 1, 3, 0}));
  EXPECT_TRUE(rank_ring_order(std::vector<RankPlace>{}).empty());
}

}  // namespace
}  // namespace ccl::topo
