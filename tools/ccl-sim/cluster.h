// A cluster for the simulator: N identical nodes of G ranks each, their links inside a node
// (NVLink, shared memory, or loopback tcp when both are off), one NIC capacity per node, and a
// two-level fabric of leaf switches with oversubscribed uplinks (a fat tree, or rail-optimized).
//
// Ranks are numbered node-major (rank r on node r / G), as a launcher places them. Its resources,
// each a shared capacity of network.h:
//   - per rank, an intra-node port (tx and rx) at the intra-node beta: a rank's one thread drives
//     its shm copies, so all its sends share one capacity, and all its receives another;
//   - per rank, a core at reduce_gbps: its copies and reductions (core_of);
//   - per node, NIC tx and rx at net.beta x nics_per_node: every rank of a node shares them, as
//     the cost model's N/L term assumes (cost_model.cc);
//   - per leaf, uplink tx ("up") and rx ("down") at fabric_gbps x nics_per_node x nodes_per_leaf
//     / oversubscription: every node under the leaf shares them.
// A message between two nodes under different leaves crosses the sender's leaf uplink and the
// receiver's leaf downlink (the spine is a non-blocking big switch). On a rail-optimized fabric
// each NIC index has its own leaf in every group of nodes_per_leaf nodes, and the model keeps it
// coarse: a message between ranks on the same rail (the same NIC index) never crosses an uplink,
// any other message between nodes crosses its group's uplink and the receiving group's downlink.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/tuning/cost_model.h"
#include "model.h"
#include "network.h"
#include "topology/orders.h"
#include "topology/topology.h"

namespace ccl::sim {

struct ClusterSpec {
  enum class Fabric { FatTree, Rail };
  int nodes = 1;
  int per_node = 1;  // ranks per node
  Fabric fabric = Fabric::FatTree;
  double oversubscription = 1;  // leaf downlink to uplink bandwidth, >= 1
  int nodes_per_leaf = 16;
  int nics_per_node = 1;
  bool nvlink = false;  // ranks of a node are GPUs joined by NVLink/NVSwitch
  bool shm = true;      // ranks of a node talk over shared memory (CCL_SHM_DISABLE=0)
};

// The largest cluster a spec may describe, in ranks.
inline constexpr int64_t kMaxClusterRanks = int64_t{1} << 20;

// Throws std::invalid_argument naming the field unless nodes, per_node, nics_per_node and
// nodes_per_leaf are >= 1, oversubscription is finite and >= 1 and the ranks are at most
// kMaxClusterRanks.
void check_spec(const ClusterSpec& spec);

// "fat-tree", "rail"; and back (false for another name).
const char* fabric_name(ClusterSpec::Fabric fabric);
bool parse_fabric(const std::string& text, ClusterSpec::Fabric* out);

class Cluster : public Network {
 public:
  // Throws std::invalid_argument for a bad spec (check_spec) and InvalidArgument for a bad model.
  Cluster(const ClusterSpec& spec, const SimModel& model);

  // `nodes` copies of the machine `topo`: a rank per rank device (topo::rank_devices: the GPUs,
  // else the NUMA nodes), NVLink when every pair of its GPUs is joined by NVLink (directly or
  // through NVSwitches), a NIC per Nic node (spec's nics_per_node when it has none). The fabric,
  // oversubscription, leaf size and shm come from `spec`.
  static Cluster from_topology(const topo::Topology& topo, int nodes, ClusterSpec spec,
                               const SimModel& model);
  // The spec from_topology builds on: `spec` with the nodes, ranks per node, NVLink and NICs of
  // `nodes` copies of `topo`.
  static ClusterSpec spec_from_topology(const topo::Topology& topo, int nodes, ClusterSpec spec);

  // Network.
  int nranks() const override { return nranks_; }
  const std::vector<Resource>& resources() const override { return resources_; }
  Route route(int from, int to) const override;
  uint32_t core_of(int rank) const override { return core_base_ + static_cast<uint32_t>(rank); }
  double copy_gbps() const override { return model_.copy_gbps; }
  double reduce_gbps() const override { return model_.reduce_gbps; }
  double call_overhead_us() const override { return model_.call_overhead_us; }
  double direct_overhead_us() const override { return model_.direct_overhead_us; }
  double memory_scale(uint64_t footprint_bytes) const override {
    return sim::memory_scale(model_, footprint_bytes);
  }
  int symmetry_period() const override;
  bool xor_symmetric() const override;

  const ClusterSpec& spec() const { return spec_; }
  const SimModel& model() const { return model_; }
  int host_of(int rank) const { return rank / spec_.per_node; }
  int local_index(int rank) const { return rank % spec_.per_node; }
  int nhosts() const { return spec_.nodes; }
  int nleaves() const { return nleaves_; }
  // The leaf (fat tree) or the group of rail leaves (rail) a node hangs from.
  int leaf_of_host(int host) const { return host / spec_.nodes_per_leaf; }
  // The NIC index, hence the rail, a rank's traffic leaves its node by.
  int rail_of(int rank) const;

  // Resource indices (into resources()).
  uint32_t port_tx(int rank) const { return static_cast<uint32_t>(rank); }
  uint32_t port_rx(int rank) const { return rx_base_ + static_cast<uint32_t>(rank); }
  uint32_t nic_tx(int host) const { return nic_base_ + 2 * static_cast<uint32_t>(host); }
  uint32_t nic_rx(int host) const { return nic_tx(host) + 1; }
  uint32_t leaf_up(int leaf) const { return leaf_base_ + 2 * static_cast<uint32_t>(leaf); }
  uint32_t leaf_down(int leaf) const { return leaf_up(leaf) + 1; }

  // The link class inside a node: "nvlink", "shm" or "net" (loopback tcp when shm is off), and
  // its figures.
  const char* intra_link() const;
  // The ranks of a node talk over shared memory: CPUs copying (not NVLink, not loopback tcp).
  bool intra_is_shm() const { return spec_.shm && !spec_.nvlink; }
  const tune::LinkFigures& intra_figures() const;

  // Each rank's place as ccl's rendezvous would see it: host "node<i>", locality {local index},
  // so that CommLayout::build gives the node-major order.
  std::vector<topo::RankPlace> places() const;
  // The tuner's shape of a job on every rank of the cluster, as core/comm/tuner_setup.cc fills
  // it: the window only where one host holds every rank (of two or more) over shm, as the shm
  // transport offers it (shm_transport.cc).
  tune::Shape shape(size_t window_bytes, size_t chunk_bytes) const {
    return shape_of(spec_, window_bytes, chunk_bytes);
  }
  // The same from a spec alone (the shape does not depend on the link model).
  static tune::Shape shape_of(const ClusterSpec& spec, size_t window_bytes, size_t chunk_bytes);
  // A few lines for the report: the size, the link classes with alpha and beta, the fabric.
  std::string describe() const;

 private:
  ClusterSpec spec_;
  SimModel model_;
  int nranks_ = 0;
  int nleaves_ = 0;
  uint32_t rx_base_ = 0, core_base_ = 0, nic_base_ = 0, leaf_base_ = 0;
  std::vector<Resource> resources_;
};

}  // namespace ccl::sim
