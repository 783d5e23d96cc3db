#include "core/comm/comm_layout.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "base/error.h"
#include "base/log.h"
#include "topology/hwloc_discovery.h"
#include "topology/topology_xml.h"

namespace ccl {

namespace {

// Orders equal to the identity are dropped: the builders treat "no order" as the identity and
// skip the indirection.
std::vector<int> unless_identity(std::vector<int> order) {
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i] != static_cast<int>(i)) return order;
  }
  return {};
}

}  // namespace

CommLayout CommLayout::build(std::span<const topo::RankPlace> places) {
  CommLayout layout;
  std::map<std::string, int> host_index;
  std::vector<int> host_size;
  for (const topo::RankPlace& place : places) {
    auto [it, added] = host_index.emplace(place.host, static_cast<int>(host_size.size()));
    if (added) host_size.push_back(0);
    ++host_size[it->second];
    layout.host_of_rank.push_back(it->second);
  }
  layout.nhosts = std::max<int>(1, static_cast<int>(host_size.size()));
  if (!host_size.empty()) {
    layout.ranks_per_host = *std::max_element(host_size.begin(), host_size.end());
    layout.uniform_hosts = std::all_of(host_size.begin(), host_size.end(),
                                       [&](int n) { return n == layout.ranks_per_host; });
  }
  layout.ring_order = unless_identity(topo::rank_ring_order(places));
  layout.tree_order = unless_identity(topo::rank_tree_order(places));
  return layout;
}

topo::RankPlace local_place(const std::string& host_id) {
  topo::RankPlace place;
  place.host = host_id;
  try {
    const topo::Topology& topo = topo::system_topology();
    const int numa_index = topo::current_numa_os_index();
    for (int id : topo.of_type(topo::NodeType::Numa)) {
      if (topo.node(id).os_index == numa_index) {
        place.locality = topo::locality_key(topo, id);
        break;
      }
    }
  } catch (const Error& e) {
    CCL_WARN(kTopo, "no topology (%s): rings and trees follow rank numbers", e.what());
  }
  return place;
}

std::string encode_locality(const std::vector<int>& key) {
  std::string text;
  for (size_t i = 0; i < key.size(); ++i) {
    if (i != 0) text += '.';
    text += std::to_string(key[i]);
  }
  return text;
}

std::vector<int> decode_locality(const std::string& text) {
  std::vector<int> key;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('.', at);
    if (end == std::string::npos) end = text.size();
    const std::string part = text.substr(at, end - at);
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos ||
        part.size() > 6) {
      throw_error(cclInternalError, "bad locality key '%s' from a peer", text.c_str());
    }
    key.push_back(std::stoi(part));
    at = end + 1;
  }
  return key;
}

}  // namespace ccl
