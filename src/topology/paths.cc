#include "topology/paths.h"

#include <strings.h>

#include <algorithm>
#include <array>
#include <limits>
#include <vector>

#include "base/error.h"

namespace ccl::topo {

namespace {

constexpr std::array<const char*, 8> kPathClassNames = {"LOC", "NVL", "NVB", "PIX",
                                                        "PXB", "PHB", "SYS", "NET"};

// Both ends' bandwidths where known: an unknown (0) bandwidth does not limit a path.
double min_known(double x, double y) {
  if (x <= 0) return y;
  if (y <= 0) return x;
  return std::min(x, y);
}

bool is_cpu_side(NodeType t) {
  return t == NodeType::Machine || t == NodeType::Package || t == NodeType::Numa ||
         t == NodeType::Core || t == NodeType::HostBridge;
}

void check_node(const Topology& topo, int id) {
  if (id < 0 || id >= static_cast<int>(topo.nodes().size())) {
    throw_error(cclInvalidArgument, "topology: no node %d (the topology has %zu)", id,
                topo.nodes().size());
  }
}

// The links of one type touching each node, as (other end, gbps) pairs, indexed by node id.
struct Adjacency {
  std::vector<std::vector<std::pair<int, double>>> edges;
  bool switch_to_switch = false;  // some link joins two NVSwitches
};

Adjacency adjacency(const Topology& topo, LinkType type) {
  Adjacency adj;
  adj.edges.resize(topo.nodes().size());
  for (const Link& l : topo.links()) {
    if (l.type != type) continue;
    adj.edges[l.a].emplace_back(l.b, l.gbps);
    adj.edges[l.b].emplace_back(l.a, l.gbps);
    adj.switch_to_switch = adj.switch_to_switch || (topo.node(l.a).type == NodeType::NvSwitch &&
                                                    topo.node(l.b).type == NodeType::NvSwitch);
  }
  return adj;
}

// Total gbps of the links between u and v (parallel links add up); -1 when there is none, so
// that a link of unknown bandwidth (0) still counts as a connection.
double direct_gbps(const Adjacency& adj, int u, int v) {
  double total = -1;
  for (const auto& [other, gbps] : adj.edges[u]) {
    if (other == v) total = std::max(total, 0.0) + gbps;
  }
  return total;
}

// The widest path from u to v whose interior nodes all satisfy `via`: {reachable, bottleneck
// bandwidth (0: unknown)}. A max-bottleneck Dijkstra where unknown links do not limit.
template <typename Via>
std::pair<bool, double> widest(const Topology& topo, const Adjacency& adj, int u, int v, Via via) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<double> best(topo.nodes().size(), -1);  // -1: not reached
  std::vector<int> open = {u};                        // reached, not yet expanded
  best[u] = kInf;
  while (!open.empty()) {
    const auto widest_open =
        std::max_element(open.begin(), open.end(), [&](int x, int y) { return best[x] < best[y]; });
    const int x = *widest_open;
    open.erase(widest_open);
    if (x == v) return {true, best[x] == kInf ? 0 : best[x]};
    if (x != u && !via(x)) continue;  // an end point, not a way through
    for (const auto& [y, gbps] : adj.edges[x]) {
      // A node already expanded has a bottleneck no later route can beat.
      const double width = std::min(best[x], gbps > 0 ? gbps : kInf);
      if (width <= best[y]) continue;
      if (best[y] < 0) open.push_back(y);
      best[y] = width;
    }
  }
  return {false, 0};
}

// An NVL connection: a direct NVLink, or a route whose interior nodes are all NVSwitches. Its
// bandwidth adds up the parallel routes (direct links, and one route per NVSwitch both ends link
// to: a DGX spreads each GPU's lanes over several switches), else the widest longer route.
std::pair<bool, double> nvl(const Topology& topo, const Adjacency& adj, int u, int v) {
  bool reach = false;
  double total = 0;
  const double direct = direct_gbps(adj, u, v);
  if (direct >= 0) reach = true, total += direct;
  // Each switch once, however many parallel link records lead to it.
  std::vector<int> switches;
  for (const auto& [s, gbps] : adj.edges[u]) {
    if (topo.node(s).type == NodeType::NvSwitch && s != v) switches.push_back(s);
  }
  std::sort(switches.begin(), switches.end());
  switches.erase(std::unique(switches.begin(), switches.end()), switches.end());
  for (int s : switches) {
    const double second = direct_gbps(adj, s, v);
    if (second < 0) continue;
    reach = true;
    total += min_known(direct_gbps(adj, u, s), second);
  }
  // Longer routes (NVSwitch to NVSwitch) only matter when the short ones are absent.
  if (reach || !adj.switch_to_switch) return {reach, total};
  return widest(topo, adj, u, v, [&](int x) { return topo.node(x).type == NodeType::NvSwitch; });
}

// NVB: NVLink through exactly one intermediate GPU (as NCCL, which routes through at most one).
std::pair<bool, double> nvb(const Topology& topo, const Adjacency& adj, int u, int v) {
  bool reach = false;
  double best = 0;
  for (int g : topo.of_type(NodeType::Gpu)) {
    if (g == u || g == v) continue;
    const auto [r1, w1] = nvl(topo, adj, u, g);
    if (!r1) continue;
    const auto [r2, w2] = nvl(topo, adj, g, v);
    if (!r2) continue;
    reach = true;
    best = std::max(best, min_known(w1, w2));
  }
  return {reach, best};
}

// The chain of ancestors from `id` (itself first) up to the root.
std::vector<int> up_chain(const Topology& topo, int id) {
  std::vector<int> chain;
  for (int x = id; x >= 0; x = topo.node(x).parent) chain.push_back(x);
  return chain;
}

struct TreePath {
  std::vector<int> nodes;  // a ... lca ... b
  int lca = -1;
};

TreePath tree_path(const Topology& topo, int a, int b) {
  const std::vector<int> up_a = up_chain(topo, a);
  const std::vector<int> up_b = up_chain(topo, b);
  TreePath path;
  size_t ia = up_a.size(), ib = up_b.size();
  // Both chains end at the root; strip the common tail.
  while (ia > 0 && ib > 0 && up_a[ia - 1] == up_b[ib - 1]) --ia, --ib;
  path.lca = up_a[ia];
  path.nodes.assign(up_a.begin(), up_a.begin() + static_cast<long>(ia) + 1);
  for (size_t i = ib; i-- > 0;) path.nodes.push_back(up_b[i]);
  return path;
}

// The CPU a node is local to: its package, else its NUMA node, else -1 (unknown locality).
int socket_of(const Topology& topo, int id) {
  const int package = topo.ancestor(id, NodeType::Package);
  return package >= 0 ? package : topo.ancestor(id, NodeType::Numa);
}

// Across the root: SYS between two known sockets (they differ, or the path would stay below
// theirs); with a side of unknown locality, SYS on a machine with several sockets (the traffic
// may cross the SMP link), else PHB.
PathClass across_root(const Topology& topo, int a, int b) {
  if (socket_of(topo, a) >= 0 && socket_of(topo, b) >= 0) return PathClass::SYS;
  size_t sockets = topo.of_type(NodeType::Package).size();
  if (sockets == 0) sockets = topo.of_type(NodeType::Numa).size();
  return sockets > 1 ? PathClass::SYS : PathClass::PHB;
}

PathClass tree_class(const Topology& topo, int a, int b) {
  const TreePath path = tree_path(topo, a, b);
  if (path.lca == topo.root() && a != topo.root() && b != topo.root()) {
    return across_root(topo, a, b);
  }
  for (int x : path.nodes) {
    if (is_cpu_side(topo.node(x).type)) return PathClass::PHB;
  }
  // All PCI: one switch between the two is PIX, a switch-to-switch hop makes it PXB.
  for (size_t i = 0; i + 1 < path.nodes.size(); ++i) {
    if (topo.node(path.nodes[i]).type == NodeType::PciSwitch &&
        topo.node(path.nodes[i + 1]).type == NodeType::PciSwitch) {
      return PathClass::PXB;
    }
  }
  return PathClass::PIX;
}

double tree_bandwidth(const Topology& topo, int a, int b) {
  const TreePath path = tree_path(topo, a, b);
  double bw = 0;
  // A tree edge's bandwidth is the child's link_gbps; the lca is nobody's child on the path.
  for (int x : path.nodes) {
    if (x != path.lca) bw = min_known(bw, topo.node(x).link_gbps);
  }
  const int pa = topo.ancestor(a, NodeType::Package);
  const int pb = topo.ancestor(b, NodeType::Package);
  if (pa >= 0 && pb >= 0 && pa != pb) {
    const Adjacency smp = adjacency(topo, LinkType::Smp);
    double cross = direct_gbps(smp, pa, pb);
    if (cross < 0) {
      cross = widest(topo, smp, pa, pb, [&](int x) {
                return topo.node(x).type == NodeType::Package;
              }).second;
    }
    bw = min_known(bw, std::max(cross, 0.0));
  }
  return bw;
}

}  // namespace

const char* path_class_name(PathClass c) {
  const auto i = static_cast<size_t>(c);
  return i < kPathClassNames.size() ? kPathClassNames[i] : "?";
}

bool parse_path_class(const char* text, PathClass* out) {
  if (text == nullptr) return false;
  for (size_t i = 0; i < kPathClassNames.size(); ++i) {
    if (strcasecmp(text, kPathClassNames[i]) == 0) {
      *out = static_cast<PathClass>(i);
      return true;
    }
  }
  return false;
}

PathClass path_class(const Topology& topo, int a, int b) {
  check_node(topo, a);
  check_node(topo, b);
  if (a == b) return PathClass::LOC;
  const Adjacency nv = adjacency(topo, LinkType::NvLink);
  if (!nv.edges[a].empty() && !nv.edges[b].empty()) {
    if (nvl(topo, nv, a, b).first) return PathClass::NVL;
    if (nvb(topo, nv, a, b).first) return PathClass::NVB;
  }
  return tree_class(topo, a, b);
}

double path_bandwidth(const Topology& topo, int a, int b) {
  check_node(topo, a);
  check_node(topo, b);
  if (a == b) return 0;
  const Adjacency nv = adjacency(topo, LinkType::NvLink);
  if (!nv.edges[a].empty() && !nv.edges[b].empty()) {
    if (const auto [reach, bw] = nvl(topo, nv, a, b); reach) return bw;
    if (const auto [reach, bw] = nvb(topo, nv, a, b); reach) return bw;
  }
  return tree_bandwidth(topo, a, b);
}

}  // namespace ccl::topo
