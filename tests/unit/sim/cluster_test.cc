// ccl-sim's cluster (tools/ccl-sim/cluster.h): the resources and routes of a uniform cluster
// (inside a node, between nodes, between leaves with oversubscribed uplinks, rails), clusters
// made from the machines of tests/data, and the places and shape ccl itself would see.
#include "cluster.h"

#include <gtest/gtest.h>

#include <limits>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/error.h"
#include "core/comm/comm_layout.h"
#include "topology/topology_xml.h"

namespace ccl::sim {
namespace {

const SimModel kModel = from_figures(tune::default_figures());

ClusterSpec spec(int nodes, int per_node) {
  ClusterSpec s;
  s.nodes = nodes;
  s.per_node = per_node;
  return s;
}

std::vector<uint32_t> resources_of(const Route& route) {
  return {route.resources.begin(), route.resources.begin() + route.count};
}

std::string data_file(const char* name) { return std::string(CCL_TEST_DATA_DIR) + "/" + name; }

// The message of the std::invalid_argument `body` throws ("" if none).
template <typename Body>
std::string invalid_argument_of(Body&& body) {
  try {
    body();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(Cluster, UniformResources) {
  const Cluster c(spec(4, 8), kModel);
  EXPECT_EQ(c.nranks(), 32);
  EXPECT_EQ(c.nhosts(), 4);
  EXPECT_EQ(c.nleaves(), 1);
  EXPECT_EQ(c.host_of(0), 0);
  EXPECT_EQ(c.host_of(7), 0);
  EXPECT_EQ(c.host_of(8), 1);
  EXPECT_EQ(c.host_of(31), 3);
  EXPECT_EQ(c.local_index(13), 5);
  // Per rank a port tx, a port rx and a core; per node a NIC tx and rx; per leaf up and down.
  ASSERT_EQ(c.resources().size(), 3u * 32 + 2 * 4 + 2 * 1);
  std::set<uint32_t> distinct;
  for (int r = 0; r < 32; ++r) {
    distinct.insert({c.port_tx(r), c.port_rx(r), c.core_of(r)});
    EXPECT_EQ(c.resources()[c.port_tx(r)].gbps, kModel.shm.beta_gbps);
    EXPECT_EQ(c.resources()[c.port_rx(r)].gbps, kModel.shm.beta_gbps);
    EXPECT_EQ(c.resources()[c.core_of(r)].gbps, kModel.reduce_gbps);
  }
  for (int h = 0; h < 4; ++h) {
    distinct.insert({c.nic_tx(h), c.nic_rx(h)});
    EXPECT_EQ(c.resources()[c.nic_tx(h)].gbps, kModel.net.beta_gbps);
  }
  distinct.insert({c.leaf_up(0), c.leaf_down(0)});
  EXPECT_EQ(distinct.size(), c.resources().size());  // every index names one resource
  EXPECT_EQ(c.resources()[c.port_tx(3)].name, "rank 3 tx");
  EXPECT_EQ(c.resources()[c.core_of(3)].name, "rank 3 core");
  EXPECT_EQ(c.resources()[c.nic_rx(2)].name, "nic 2 rx");
  EXPECT_EQ(c.resources()[c.leaf_down(0)].name, "leaf 0 down");
  EXPECT_EQ(c.copy_gbps(), kModel.copy_gbps);
  EXPECT_EQ(c.reduce_gbps(), kModel.reduce_gbps);
  EXPECT_EQ(c.call_overhead_us(), kModel.call_overhead_us);
}

TEST(Cluster, RoutesInsideAndBetweenNodes) {
  const Cluster c(spec(4, 8), kModel);
  const Route same = c.route(2, 5);
  EXPECT_STREQ(same.link, "shm");
  EXPECT_EQ(same.alpha_us, kModel.shm.alpha_us);
  // Shared memory is both CPUs copying: the sender's core and port on its side, the receiver's
  // port on the other, and its core while a posted receive copies the bytes out.
  EXPECT_EQ(resources_of(same), (std::vector<uint32_t>{c.port_tx(2), c.core_of(2), c.port_rx(5)}));
  EXPECT_EQ(same.sender, 2);
  EXPECT_EQ(same.send_us, kModel.shm.alpha_us * kModel.sender_share);
  EXPECT_TRUE(same.receiver_copies);
  for (const uint32_t r : resources_of(same)) EXPECT_TRUE(c.resources()[r].memory) << r;
  // Four nodes under one leaf of 16: no uplink.
  const Route cross = c.route(2, 29);
  EXPECT_STREQ(cross.link, "net");
  EXPECT_EQ(cross.alpha_us, kModel.net.alpha_us);
  EXPECT_EQ(resources_of(cross), (std::vector<uint32_t>{c.nic_tx(0), c.nic_rx(3)}));
  EXPECT_FALSE(cross.receiver_copies);
  EXPECT_EQ(cross.send_us, kModel.net.alpha_us * kModel.sender_share);
  for (const uint32_t r : resources_of(cross)) EXPECT_FALSE(c.resources()[r].memory) << r;
  EXPECT_THROW(c.route(3, 3), std::out_of_range);
  EXPECT_THROW(c.route(-1, 3), std::out_of_range);
  EXPECT_THROW(c.route(0, 32), std::out_of_range);
}

TEST(Cluster, CrossLeafUsesOversubscribedUplinks) {
  ClusterSpec s = spec(4, 8);
  s.nodes_per_leaf = 2;
  s.oversubscription = 4;
  s.nics_per_node = 2;
  const Cluster c(s, kModel);
  EXPECT_EQ(c.nleaves(), 2);
  EXPECT_EQ(c.leaf_of_host(1), 0);
  EXPECT_EQ(c.leaf_of_host(2), 1);
  // A NIC per two: 2 x net beta per node; a leaf's uplink: fabric x 2 NICs x 2 nodes / 4.
  EXPECT_EQ(c.resources()[c.nic_tx(0)].gbps, 2 * kModel.net.beta_gbps);
  EXPECT_EQ(c.resources()[c.leaf_up(1)].gbps, kModel.fabric_gbps * 2 * 2 / 4);
  EXPECT_EQ(c.resources()[c.leaf_down(0)].gbps, kModel.fabric_gbps * 2 * 2 / 4);
  // Node 0 to node 1: one leaf.
  EXPECT_EQ(resources_of(c.route(0, 8)), (std::vector<uint32_t>{c.nic_tx(0), c.nic_rx(1)}));
  // Node 1 to node 2: up from leaf 0, down into leaf 1.
  EXPECT_EQ(resources_of(c.route(9, 17)),
            (std::vector<uint32_t>{c.nic_tx(1), c.leaf_up(0), c.leaf_down(1), c.nic_rx(2)}));
  EXPECT_EQ(resources_of(c.route(31, 0)),
            (std::vector<uint32_t>{c.nic_tx(3), c.leaf_up(1), c.leaf_down(0), c.nic_rx(0)}));
  // A last, partly filled leaf.
  EXPECT_EQ(Cluster(spec(5, 1), kModel).nleaves(), 1);
  s = spec(5, 1);
  s.nodes_per_leaf = 2;
  EXPECT_EQ(Cluster(s, kModel).nleaves(), 3);
}

TEST(Cluster, RailKeepsEqualRailsInTheirLeaf) {
  ClusterSpec s = spec(4, 8);
  s.fabric = ClusterSpec::Fabric::Rail;
  s.nics_per_node = 8;
  s.nodes_per_leaf = 2;
  const Cluster c(s, kModel);
  EXPECT_EQ(c.rail_of(13), 5);
  // Local index 0 to local index 0, across groups of leaves: stays on its rail.
  EXPECT_EQ(resources_of(c.route(0, 24)), (std::vector<uint32_t>{c.nic_tx(0), c.nic_rx(3)}));
  // Another rail, even between two nodes of one group: through the spine.
  EXPECT_EQ(resources_of(c.route(0, 9)),
            (std::vector<uint32_t>{c.nic_tx(0), c.leaf_up(0), c.leaf_down(0), c.nic_rx(1)}));
  EXPECT_EQ(resources_of(c.route(1, 24)),
            (std::vector<uint32_t>{c.nic_tx(0), c.leaf_up(0), c.leaf_down(1), c.nic_rx(3)}));
  // Two NICs for eight ranks: locals 0-3 on rail 0, 4-7 on rail 1.
  s.nics_per_node = 2;
  const Cluster two(s, kModel);
  EXPECT_EQ(two.rail_of(3), 0);
  EXPECT_EQ(two.rail_of(4), 1);
  EXPECT_EQ(two.route(0, 27).count, 2);
  EXPECT_EQ(two.route(0, 28).count, 4);
}

TEST(Cluster, IntraNodeLinkClass) {
  ClusterSpec s = spec(2, 8);
  s.nvlink = true;
  const Cluster gpus(s, kModel);
  EXPECT_STREQ(gpus.intra_link(), "nvlink");
  EXPECT_STREQ(gpus.route(0, 7).link, "nvlink");
  EXPECT_EQ(gpus.route(0, 7).alpha_us, kModel.nvlink.alpha_us);
  EXPECT_EQ(gpus.resources()[gpus.port_tx(0)].gbps, kModel.nvlink.beta_gbps);
  // GPUs copy over NVLink: no CPU core on the way, and no CPU cache to fall out of.
  EXPECT_EQ(gpus.route(0, 7).count, 2);
  EXPECT_FALSE(gpus.route(0, 7).receiver_copies);
  EXPECT_EQ(gpus.route(0, 7).send_us, 0);  // the GPU copies, asynchronous to the rank
  EXPECT_FALSE(gpus.resources()[gpus.port_tx(0)].memory);
  EXPECT_FALSE(gpus.resources()[gpus.core_of(0)].memory);
  EXPECT_STREQ(gpus.route(0, 8).link, "net");
  // CCL_SHM_DISABLE=1: the ranks of a node talk over tcp on loopback, at the net figures.
  s.nvlink = false;
  s.shm = false;
  const Cluster tcp(s, kModel);
  EXPECT_STREQ(tcp.route(0, 7).link, "net");
  EXPECT_EQ(tcp.route(0, 7).alpha_us, kModel.net.alpha_us);
  EXPECT_EQ(resources_of(tcp.route(0, 7)), (std::vector<uint32_t>{tcp.port_tx(0), tcp.port_rx(7)}));
  EXPECT_EQ(tcp.resources()[tcp.port_rx(7)].gbps, kModel.net.beta_gbps);
}

TEST(Cluster, BadSpecsNameTheirField) {
  const auto message = [](ClusterSpec s) {
    return invalid_argument_of([&] { Cluster c(s, kModel); });
  };
  ClusterSpec s;
  s.nodes = 0;
  EXPECT_NE(message(s).find("nodes"), std::string::npos);
  s = {};
  s.per_node = -1;
  EXPECT_NE(message(s).find("per_node"), std::string::npos);
  s = {};
  s.oversubscription = 0.5;
  EXPECT_NE(message(s).find("oversubscription"), std::string::npos);
  s.oversubscription = std::numeric_limits<double>::quiet_NaN();
  EXPECT_NE(message(s).find("oversubscription"), std::string::npos);
  s = {};
  s.nics_per_node = 0;
  EXPECT_NE(message(s).find("nics_per_node"), std::string::npos);
  s = {};
  s.nodes_per_leaf = 0;
  EXPECT_NE(message(s).find("nodes_per_leaf"), std::string::npos);
  s = {};
  s.nodes = 1 << 17;
  s.per_node = 9;  // 9 x 2^17 > 2^20, without overflowing an int
  EXPECT_NE(message(s).find("per_node"), std::string::npos);
  s.nodes = 1 << 30;
  s.per_node = 1 << 30;  // the product overflows an int
  EXPECT_NE(message(s).find("ranks"), std::string::npos);
  s.nodes = 1 << 17;
  s.per_node = 8;  // exactly the limit
  EXPECT_NO_THROW(check_spec(s));
  // A bad model is the model's error.
  SimModel bad = kModel;
  bad.nvlink.beta_gbps = 0;
  EXPECT_THROW(Cluster(spec(1, 2), bad), Error);
}

TEST(Cluster, FabricNames) {
  ClusterSpec::Fabric f = ClusterSpec::Fabric::FatTree;
  EXPECT_TRUE(parse_fabric("rail", &f));
  EXPECT_EQ(f, ClusterSpec::Fabric::Rail);
  EXPECT_STREQ(fabric_name(f), "rail");
  EXPECT_TRUE(parse_fabric("fat-tree", &f));
  EXPECT_STREQ(fabric_name(f), "fat-tree");
  EXPECT_FALSE(parse_fabric("torus", &f));
}

TEST(Cluster, FromTopology) {
  ClusterSpec base;
  base.fabric = ClusterSpec::Fabric::Rail;
  base.oversubscription = 2;
  base.nics_per_node = 3;
  const Cluster dgx =
      Cluster::from_topology(topo::load_topology_file(data_file("dgx_h100.xml")), 4, base, kModel);
  EXPECT_EQ(dgx.nranks(), 32);
  EXPECT_EQ(dgx.spec().per_node, 8);
  EXPECT_TRUE(dgx.spec().nvlink);
  EXPECT_EQ(dgx.spec().nics_per_node, 8);
  EXPECT_EQ(dgx.spec().fabric, ClusterSpec::Fabric::Rail);  // the fabric is the spec's
  EXPECT_EQ(dgx.spec().oversubscription, 2);
  EXPECT_STREQ(dgx.route(0, 1).link, "nvlink");
  EXPECT_EQ(dgx.rail_of(13), 5);

  const Cluster cpu =
      Cluster::from_topology(topo::load_topology_file(data_file("cpu_2s4n.xml")), 2, {}, kModel);
  EXPECT_EQ(cpu.spec().per_node, 4);  // a rank per NUMA node
  EXPECT_FALSE(cpu.spec().nvlink);
  EXPECT_EQ(cpu.spec().nics_per_node, 1);
  EXPECT_STREQ(cpu.route(0, 3).link, "shm");

  const Cluster vm =
      Cluster::from_topology(topo::load_topology_file(data_file("vm.xml")), 3, {}, kModel);
  EXPECT_EQ(vm.nranks(), 3);
  EXPECT_EQ(vm.spec().per_node, 1);
  EXPECT_EQ(vm.spec().nics_per_node, 1);
  EXPECT_STREQ(vm.route(0, 2).link, "net");

  // GPUs under PCIe switches only: no NVLink.
  const Cluster pcie =
      Cluster::from_topology(topo::load_topology_file(data_file("pcie_4gpu.xml")), 1, {}, kModel);
  EXPECT_EQ(pcie.spec().per_node, 4);
  EXPECT_FALSE(pcie.spec().nvlink);
}

TEST(Cluster, PlacesGiveTheNodeMajorLayout) {
  const Cluster c(spec(4, 8), kModel);
  const std::vector<topo::RankPlace> places = c.places();
  ASSERT_EQ(places.size(), 32u);
  EXPECT_EQ(places[9].host, "node1");
  EXPECT_EQ(places[9].locality, std::vector<int>{1});
  const CommLayout layout = CommLayout::build(places);
  EXPECT_EQ(layout.nhosts, 4);
  EXPECT_EQ(layout.ranks_per_host, 8);
  EXPECT_TRUE(layout.uniform_hosts);
  for (int r = 0; r < 32; ++r) EXPECT_EQ(layout.host_of_rank[static_cast<size_t>(r)], r / 8);
  // Rank order is the ring and the tree order: the identity, which the layout leaves empty.
  EXPECT_TRUE(layout.ring_order.empty());
  EXPECT_TRUE(layout.tree_order.empty());
}

// The shape core/comm/tuner_setup.cc makes from a communicator's layout and transports.
tune::Shape tuner_setup_shape(const Cluster& c, size_t window, size_t chunk) {
  const std::vector<topo::RankPlace> places = c.places();
  const CommLayout layout = CommLayout::build(places);
  tune::Shape s;
  s.nranks = c.nranks();
  s.nhosts = layout.nhosts;
  s.ranks_per_host = layout.ranks_per_host;
  s.uniform_hosts = layout.uniform_hosts;
  s.shm = c.spec().shm;
  // The shm transport's window exists where it joins every rank (one host, two ranks or more).
  s.window_bytes = layout.nhosts == 1 && c.spec().shm && c.nranks() > 1 ? window : 0;
  s.chunk_bytes = chunk;
  return s;
}

void expect_same(const tune::Shape& a, const tune::Shape& b) {
  EXPECT_EQ(a.nranks, b.nranks);
  EXPECT_EQ(a.nhosts, b.nhosts);
  EXPECT_EQ(a.ranks_per_host, b.ranks_per_host);
  EXPECT_EQ(a.uniform_hosts, b.uniform_hosts);
  EXPECT_EQ(a.shm, b.shm);
  EXPECT_EQ(a.window_bytes, b.window_bytes);
  EXPECT_EQ(a.chunk_bytes, b.chunk_bytes);
}

TEST(Cluster, ShapeIsTheTunersShape) {
  constexpr size_t kWindow = 1 << 20, kChunk = 1 << 19;
  ClusterSpec no_shm = spec(1, 8);
  no_shm.shm = false;
  for (const ClusterSpec& s : {spec(4, 8), spec(1, 8), spec(1, 1), spec(16, 1), no_shm}) {
    const Cluster c(s, kModel);
    const tune::Shape shape = c.shape(kWindow, kChunk);
    expect_same(shape, tuner_setup_shape(c, kWindow, kChunk));
    EXPECT_NO_THROW(tune::check_shape(shape));
  }
  const tune::Shape multi = Cluster(spec(4, 8), kModel).shape(kWindow, kChunk);
  EXPECT_EQ(multi.nranks, 32);
  EXPECT_EQ(multi.nhosts, 4);
  EXPECT_EQ(multi.ranks_per_host, 8);
  EXPECT_TRUE(multi.shm);
  EXPECT_EQ(multi.window_bytes, 0u);  // no direct path across hosts
  EXPECT_EQ(multi.chunk_bytes, kChunk);
  EXPECT_EQ(Cluster(spec(1, 8), kModel).shape(kWindow, kChunk).window_bytes, kWindow);
  EXPECT_EQ(Cluster(spec(1, 1), kModel).shape(kWindow, kChunk).window_bytes, 0u);
  EXPECT_EQ(Cluster(no_shm, kModel).shape(kWindow, kChunk).window_bytes, 0u);
}

TEST(Cluster, Describe) {
  ClusterSpec s = spec(4, 8);
  s.nvlink = true;
  s.oversubscription = 2;
  s.nodes_per_leaf = 2;
  const std::string text = Cluster(s, kModel).describe();
  EXPECT_NE(text.find("4 nodes x 8 ranks = 32 ranks"), std::string::npos) << text;
  EXPECT_NE(text.find("nvlink, alpha 2 us, beta 360 GB/s"), std::string::npos) << text;
  EXPECT_NE(text.find("between nodes: net, alpha 25 us, beta 3 GB/s"), std::string::npos) << text;
  EXPECT_NE(text.find("fat-tree, 2 nodes per leaf (2 leaves), oversubscription 2"),
            std::string::npos)
      << text;
  // One node: no fabric lines.
  const std::string one = Cluster(spec(1, 2), kModel).describe();
  EXPECT_EQ(one.find("fabric"), std::string::npos) << one;
  EXPECT_NE(one.find("1 node x 2 ranks"), std::string::npos) << one;
}

}  // namespace
}  // namespace ccl::sim
