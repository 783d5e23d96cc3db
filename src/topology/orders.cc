#include "topology/orders.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <map>
#include <numeric>
#include <tuple>

#include "base/error.h"
#include "topology/paths.h"

namespace ccl::topo {

namespace {

// "0000:17:00.0" or "0000:17" as numbers, so the order does not depend on case or width; empty
// when there is no bus id.
std::vector<long> bus_key(const std::string& bus_id) {
  std::vector<long> key;
  const char* p = bus_id.c_str();
  while (*p != '\0') {
    char* end = nullptr;
    key.push_back(std::strtol(p, &end, 16));
    if (end == p) break;  // not hex: the rest is compared as a name
    p = (*end == ':' || *end == '.') ? end + 1 : end;
    if (*end != ':' && *end != '.') break;
  }
  return key;
}

// Names with numbers in them in numeric order: "gpu2" before "gpu10".
bool natural_less(const std::string& x, const std::string& y) {
  size_t i = 0, j = 0;
  while (i < x.size() && j < y.size()) {
    const bool dx = x[i] >= '0' && x[i] <= '9';
    const bool dy = y[j] >= '0' && y[j] <= '9';
    if (dx && dy) {
      size_t ei = i, ej = j;
      while (ei < x.size() && x[ei] >= '0' && x[ei] <= '9') ++ei;
      while (ej < y.size() && y[ej] >= '0' && y[ej] <= '9') ++ej;
      const std::string nx = x.substr(i, ei - i), ny = y.substr(j, ej - j);
      const size_t zx = std::min(nx.find_first_not_of('0'), nx.size());
      const size_t zy = std::min(ny.find_first_not_of('0'), ny.size());
      const std::string tx = nx.substr(zx), ty = ny.substr(zy);
      if (tx.size() != ty.size()) return tx.size() < ty.size();
      if (tx != ty) return tx < ty;
      i = ei, j = ej;
    } else {
      if (x[i] != y[j]) return x[i] < y[j];
      ++i, ++j;
    }
  }
  return x.size() - i < y.size() - j;
}

// The order of siblings: nodes without a PCI position (packages, NUMA nodes, cores) first, by OS
// index; PCI nodes by bus id; then by name and id, so that the order is total.
bool sibling_less(const Node& x, const Node& y) {
  const std::vector<long> bx = bus_key(x.bus_id), by = bus_key(y.bus_id);
  if (bx.empty() != by.empty()) return bx.empty();
  if (bx != by) return bx < by;
  const int ox = x.os_index >= 0 ? x.os_index : INT_MAX;
  const int oy = y.os_index >= 0 ? y.os_index : INT_MAX;
  if (ox != oy) return ox < oy;
  if (natural_less(x.name, y.name)) return true;
  if (natural_less(y.name, x.name)) return false;
  return x.id < y.id;
}

void check_devices(const Topology& topo, std::span<const int> devices) {
  for (int d : devices) {
    if (d < 0 || d >= static_cast<int>(topo.nodes().size())) {
      throw_error(cclInvalidArgument, "topology: device %d is not a node (the topology has %zu)", d,
                  topo.nodes().size());
    }
  }
}

// Indices into `keys` sorted by key, ties (the same device twice) by index.
std::vector<int> sorted_by_key(const std::vector<std::vector<int>>& keys) {
  std::vector<int> order(keys.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return keys[x] < keys[y]; });
  return order;
}

std::vector<int> locality_order(const Topology& topo, std::span<const int> devices) {
  check_devices(topo, devices);
  std::vector<std::vector<int>> keys;
  keys.reserve(devices.size());
  for (int d : devices) keys.push_back(locality_key(topo, d));
  return sorted_by_key(keys);
}

// A ring over `order` with an NVL (or better) path between all neighbours: a depth-first search
// that tries candidates in `order`, so the locality order wins whenever it qualifies. The budget
// bounds the search on large, sparse NVLink graphs; false when none is found within it.
class NvlRingSearch {
 public:
  NvlRingSearch(const std::vector<std::vector<bool>>& ok) : ok_(ok), used_(ok.size(), false) {}

  bool run(std::vector<int>* ring) {
    ring_.assign(1, 0);
    used_[0] = true;
    if (!extend()) return false;
    *ring = ring_;
    return true;
  }

 private:
  bool extend() {
    const size_t n = ok_.size();
    if (ring_.size() == n) return ok_[ring_.back()][ring_.front()];
    for (size_t next = 0; next < n; ++next) {
      if (used_[next] || !ok_[ring_.back()][next]) continue;
      if (++steps_ > kBudget) return false;
      used_[next] = true;
      ring_.push_back(static_cast<int>(next));
      if (extend()) return true;
      ring_.pop_back();
      used_[next] = false;
    }
    return false;
  }

  static constexpr long kBudget = 200000;
  const std::vector<std::vector<bool>>& ok_;
  std::vector<bool> used_;
  std::vector<int> ring_;
  long steps_ = 0;
};

// Ranks grouped by host (hosts in order of their lowest rank), inside a host by locality key,
// then rank.
std::vector<int> host_grouped(std::span<const RankPlace> places) {
  std::map<std::string, int> host_index;
  std::vector<int> host_of(places.size());
  for (size_t r = 0; r < places.size(); ++r) {
    host_of[r] =
        host_index.try_emplace(places[r].host, static_cast<int>(host_index.size())).first->second;
  }
  std::vector<int> order(places.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int x, int y) {
    return std::tie(host_of[x], places[x].locality, x) <
           std::tie(host_of[y], places[y].locality, y);
  });
  return order;
}

}  // namespace

std::vector<int> locality_key(const Topology& topo, int node) {
  if (node < 0 || node >= static_cast<int>(topo.nodes().size())) {
    throw_error(cclInvalidArgument, "topology: no node %d (the topology has %zu)", node,
                topo.nodes().size());
  }
  std::vector<int> key;
  for (int x = node; topo.node(x).parent >= 0; x = topo.node(x).parent) {
    const Node& parent = topo.node(topo.node(x).parent);
    int position = 0;
    for (int sibling : parent.children) {
      if (sibling_less(topo.node(sibling), topo.node(x))) ++position;
    }
    key.push_back(position);
  }
  std::reverse(key.begin(), key.end());
  return key;
}

std::vector<int> rank_devices(const Topology& topo) {
  std::vector<int> devices = topo.of_type(NodeType::Gpu);
  if (devices.empty()) devices = topo.of_type(NodeType::Numa);
  if (devices.empty()) devices.push_back(topo.root());
  return devices;
}

std::vector<int> ring_order(const Topology& topo, std::span<const int> devices) {
  std::vector<int> order = locality_order(topo, devices);
  const size_t n = order.size();
  if (n <= 3) return order;  // every ring of three or fewer has the same neighbours
  // Is each pair (positions in `order`) NVL or better?
  std::vector<std::vector<bool>> nvl(n, std::vector<bool>(n, false));
  bool any_nvl = false;
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i + 1; j < n; ++j) {
      const bool ok = path_class(topo, devices[order[i]], devices[order[j]]) <= PathClass::NVL;
      nvl[i][j] = nvl[j][i] = ok;
      any_nvl = any_nvl || (ok && devices[order[i]] != devices[order[j]]);
    }
  }
  if (!any_nvl) return order;  // PCIe only: the locality order is the ring
  bool all_neighbours = true;
  for (size_t i = 0; i < n; ++i) all_neighbours = all_neighbours && nvl[i][(i + 1) % n];
  if (all_neighbours) return order;
  std::vector<int> ring;
  if (!NvlRingSearch(nvl).run(&ring)) return order;
  std::vector<int> result(n);
  for (size_t i = 0; i < n; ++i) result[i] = order[ring[i]];
  return result;
}

std::vector<int> tree_order(const Topology& topo, std::span<const int> devices) {
  check_devices(topo, devices);
  std::vector<std::vector<int>> keys;
  for (int d : devices) keys.push_back(locality_key(topo, d));
  const std::vector<int> order = sorted_by_key(keys);
  const std::vector<int> nics = topo.of_type(NodeType::Nic);
  if (nics.empty() || order.empty()) return order;
  // The device closest to a NIC: best path class, then bandwidth; the first in locality order
  // among equals (then the order below is the locality order itself).
  int best = -1;
  std::pair<PathClass, double> best_distance{PathClass::NET, 0};
  for (int i : order) {
    std::pair<PathClass, double> distance{PathClass::NET, 0};
    for (int nic : nics) {
      const PathClass c = path_class(topo, devices[i], nic);
      const double bw = path_bandwidth(topo, devices[i], nic);
      if (c < distance.first || (c == distance.first && bw > distance.second)) distance = {c, bw};
    }
    if (best < 0 || distance.first < best_distance.first ||
        (distance.first == best_distance.first && distance.second > best_distance.second)) {
      best = i, best_distance = distance;
    }
  }
  // A depth-first order that enters the chosen device's subtree first at every level: subtrees
  // stay contiguous (the locality of the plain order), and the chosen device is position 0.
  const std::vector<int> chosen = keys[best];
  for (std::vector<int>& key : keys) {
    for (size_t d = 0; d < key.size() && d < chosen.size(); ++d) {
      if (key[d] != chosen[d]) break;
      key[d] = -1;
    }
  }
  return sorted_by_key(keys);
}

std::vector<int> rank_ring_order(std::span<const RankPlace> places) { return host_grouped(places); }

std::vector<int> rank_tree_order(std::span<const RankPlace> places) { return host_grouped(places); }

}  // namespace ccl::topo
