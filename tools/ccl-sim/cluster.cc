#include "cluster.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "text.h"
#include "topology/paths.h"

namespace ccl::sim {

namespace {

void require(bool ok, const char* field, const std::string& rule) {
  if (!ok) throw std::invalid_argument("cluster: " + std::string(field) + " " + rule);
}

// Every pair of the machine's GPUs joined by NVLink, directly, through NVSwitches or through
// another GPU: then a node's ranks (one per GPU) talk over NVLink.
bool gpus_joined_by_nvlink(const topo::Topology& topo) {
  const std::vector<int> gpus = topo.of_type(topo::NodeType::Gpu);
  if (gpus.size() < 2) return false;
  for (size_t i = 0; i < gpus.size(); ++i) {
    for (size_t j = i + 1; j < gpus.size(); ++j) {
      if (topo::path_class(topo, gpus[i], gpus[j]) > topo::PathClass::NVB) return false;
    }
  }
  return true;
}

}  // namespace

void check_spec(const ClusterSpec& spec) {
  require(spec.nodes >= 1, "nodes", "must be >= 1, not " + std::to_string(spec.nodes));
  require(spec.per_node >= 1, "per_node", "must be >= 1, not " + std::to_string(spec.per_node));
  require(std::isfinite(spec.oversubscription) && spec.oversubscription >= 1, "oversubscription",
          "must be >= 1, not " + printf_string("%g", spec.oversubscription));
  require(spec.nodes_per_leaf >= 1, "nodes_per_leaf",
          "must be >= 1, not " + std::to_string(spec.nodes_per_leaf));
  require(spec.nics_per_node >= 1, "nics_per_node",
          "must be >= 1, not " + std::to_string(spec.nics_per_node));
  const int64_t ranks = int64_t{spec.nodes} * spec.per_node;
  require(ranks <= kMaxClusterRanks, "nodes x per_node",
          printf_string("is %lld ranks, more than the %lld a cluster may have",
                        static_cast<long long>(ranks), static_cast<long long>(kMaxClusterRanks)));
}

const char* fabric_name(ClusterSpec::Fabric fabric) {
  return fabric == ClusterSpec::Fabric::Rail ? "rail" : "fat-tree";
}

bool parse_fabric(const std::string& text, ClusterSpec::Fabric* out) {
  if (text == "fat-tree") {
    *out = ClusterSpec::Fabric::FatTree;
  } else if (text == "rail") {
    *out = ClusterSpec::Fabric::Rail;
  } else {
    return false;
  }
  return true;
}

Cluster::Cluster(const ClusterSpec& spec, const SimModel& model) : spec_(spec), model_(model) {
  check_spec(spec);
  check_model(model, "ccl-sim model");
  nranks_ = spec.nodes * spec.per_node;
  nleaves_ = (spec.nodes + spec.nodes_per_leaf - 1) / spec.nodes_per_leaf;
  const auto n = static_cast<uint32_t>(nranks_);
  rx_base_ = n;
  core_base_ = 2 * n;
  nic_base_ = 3 * n;
  leaf_base_ = nic_base_ + 2 * static_cast<uint32_t>(spec.nodes);

  // Names short enough for std::string's inline buffer up to 10^5 ranks: no allocation each.
  resources_.resize(leaf_base_ + 2 * static_cast<size_t>(nleaves_));
  const double port_gbps = intra_figures().beta_gbps;
  // Shared memory is CPUs copying; NVLink is GPUs', and the GPU's own memory is not a CPU cache.
  const bool shm_ports = intra_is_shm();
  for (int r = 0; r < nranks_; ++r) {
    resources_[port_tx(r)] = {"rank " + std::to_string(r) + " tx", port_gbps, shm_ports};
    resources_[port_rx(r)] = {"rank " + std::to_string(r) + " rx", port_gbps, shm_ports};
    resources_[core_of(r)] = {"rank " + std::to_string(r) + " core", model.reduce_gbps,
                              !spec.nvlink};
  }
  const double nic_gbps = model.net.beta_gbps * spec.nics_per_node;
  for (int h = 0; h < spec.nodes; ++h) {
    resources_[nic_tx(h)] = {"nic " + std::to_string(h) + " tx", nic_gbps};
    resources_[nic_rx(h)] = {"nic " + std::to_string(h) + " rx", nic_gbps};
  }
  const double uplink_gbps =
      model.fabric_gbps * spec.nics_per_node * spec.nodes_per_leaf / spec.oversubscription;
  for (int l = 0; l < nleaves_; ++l) {
    resources_[leaf_up(l)] = {"leaf " + std::to_string(l) + " up", uplink_gbps};
    resources_[leaf_down(l)] = {"leaf " + std::to_string(l) + " down", uplink_gbps};
  }
}

ClusterSpec Cluster::spec_from_topology(const topo::Topology& topo, int nodes, ClusterSpec spec) {
  spec.nodes = nodes;
  spec.per_node = static_cast<int>(topo::rank_devices(topo).size());
  spec.nvlink = gpus_joined_by_nvlink(topo);
  const size_t nics = topo.of_type(topo::NodeType::Nic).size();
  if (nics > 0) spec.nics_per_node = static_cast<int>(nics);
  return spec;
}

Cluster Cluster::from_topology(const topo::Topology& topo, int nodes, ClusterSpec spec,
                               const SimModel& model) {
  return Cluster(spec_from_topology(topo, nodes, spec), model);
}

int Cluster::rail_of(int rank) const {
  // Ranks spread evenly over the NICs, in local order (local i of G on NIC i*K/G): with one NIC
  // per rank, the rail is the local index.
  return static_cast<int>(int64_t{local_index(rank)} * spec_.nics_per_node / spec_.per_node);
}

const char* Cluster::intra_link() const {
  if (spec_.nvlink) return "nvlink";
  return spec_.shm ? "shm" : "net";
}

const tune::LinkFigures& Cluster::intra_figures() const {
  if (spec_.nvlink) return model_.nvlink;
  return spec_.shm ? model_.shm : model_.net;
}

Route Cluster::route(int from, int to) const {
  if (from < 0 || from >= nranks_ || to < 0 || to >= nranks_ || from == to) {
    throw std::out_of_range("cluster: no route from rank " + std::to_string(from) + " to rank " +
                            std::to_string(to) + " of " + std::to_string(nranks_));
  }
  Route route;
  const int a = host_of(from), b = host_of(to);
  if (a == b) {
    route.alpha_us = intra_figures().alpha_us;
    route.link = intra_link();
    // A CPU moves shared memory and sockets: part of each message's alpha is the sender's own
    // work. NVLink copies are the GPU's, asynchronous to the rank.
    if (!spec_.nvlink) route.send_us = route.alpha_us * model_.sender_share;
    route.add(port_tx(from));
    if (intra_is_shm()) {
      // The sender's core copies the bytes into the shared buffer as the receiver's copies them
      // out: both cores are busy while they flow (a ring step shares each with the step the
      // rank receives at the same time).
      route.add(core_of(from));
      route.receiver_copies = true;
    }
    route.sender = route.count;
    route.add(port_rx(to));
    return route;
  }
  route.alpha_us = model_.net.alpha_us;
  route.send_us = route.alpha_us * model_.sender_share;
  route.link = "net";
  route.add(nic_tx(a));
  const int la = leaf_of_host(a), lb = leaf_of_host(b);
  const bool via_spine =
      spec_.fabric == ClusterSpec::Fabric::Rail ? rail_of(from) != rail_of(to) : la != lb;
  if (via_spine) route.add(leaf_up(la));
  route.sender = route.count;
  if (via_spine) route.add(leaf_down(lb));
  route.add(nic_rx(b));
  return route;
}

int Cluster::symmetry_period() const {
  // Moving every rank by one node maps nodes, NICs and ports onto themselves; with more than one
  // leaf, only moving by a whole leaf keeps which pairs cross the spine.
  const int64_t period =
      int64_t{spec_.per_node} * (nleaves_ > 1 ? int64_t{spec_.nodes_per_leaf} : int64_t{1});
  return nranks_ % period == 0 ? static_cast<int>(period) : nranks_;
}

bool Cluster::xor_symmetric() const {
  // r ^ kP keeps a rank's local index and moves whole nodes (and leaves) when the ranks per node
  // and the period are powers of two; it stays inside 0..n-1 when n is one too.
  const auto pow2 = [](int64_t v) { return v > 0 && (v & (v - 1)) == 0; };
  const int period = symmetry_period();
  return period < nranks_ && pow2(nranks_) && pow2(period) && pow2(spec_.per_node);
}

std::vector<topo::RankPlace> Cluster::places() const {
  std::vector<topo::RankPlace> places(static_cast<size_t>(nranks_));
  for (int r = 0; r < nranks_; ++r) {
    places[static_cast<size_t>(r)].host = "node" + std::to_string(host_of(r));
    places[static_cast<size_t>(r)].locality = {local_index(r)};
  }
  return places;
}

tune::Shape Cluster::shape_of(const ClusterSpec& spec, size_t window_bytes, size_t chunk_bytes) {
  tune::Shape shape;
  shape.nranks = spec.nodes * spec.per_node;
  shape.nhosts = spec.nodes;
  shape.ranks_per_host = spec.per_node;
  shape.uniform_hosts = true;
  shape.shm = spec.shm;
  // The shm transport offers its window only when it joins every rank (shm_transport.cc), and
  // with one rank there is no shm transport at all.
  shape.window_bytes = spec.nodes == 1 && spec.shm && shape.nranks > 1 ? window_bytes : 0;
  shape.chunk_bytes = chunk_bytes;
  return shape;
}

std::string Cluster::describe() const {
  const tune::LinkFigures& intra = intra_figures();
  std::string out = printf_string("cluster: %d node%s x %d rank%s = %d ranks\n", spec_.nodes,
                                  spec_.nodes == 1 ? "" : "s", spec_.per_node,
                                  spec_.per_node == 1 ? "" : "s", nranks_);
  out += printf_string("  in a node: %s, alpha %g us, beta %g GB/s per rank each way\n",
                       intra_link(), intra.alpha_us, intra.beta_gbps);
  if (spec_.nodes > 1) {
    out += printf_string(
        "  between nodes: net, alpha %g us, beta %g GB/s per rank; %d NIC%s, %g GB/s per node "
        "each way\n",
        model_.net.alpha_us, model_.net.beta_gbps, spec_.nics_per_node,
        spec_.nics_per_node == 1 ? "" : "s", model_.net.beta_gbps * spec_.nics_per_node);
    out += printf_string(
        "  fabric: %s, %d node%s per leaf (%d lea%s), oversubscription %g, leaf uplink %g GB/s "
        "each way\n",
        fabric_name(spec_.fabric), spec_.nodes_per_leaf, spec_.nodes_per_leaf == 1 ? "" : "s",
        nleaves_, nleaves_ == 1 ? "f" : "ves", spec_.oversubscription, resources_[leaf_up(0)].gbps);
  }
  out += printf_string(
      "  per rank: reduce %g GB/s, copy %g GB/s, direct alpha %g us beta %g GB/s, call %g us\n",
      model_.reduce_gbps, model_.copy_gbps, model_.direct.alpha_us, model_.direct.beta_gbps,
      model_.call_overhead_us);
  return out;
}

}  // namespace ccl::sim
