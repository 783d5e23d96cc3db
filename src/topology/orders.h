// Orders of devices and ranks that keep neighbours close (DESIGN.md principle 3). A ring's
// neighbours and a tree's parent/child pairs should share the best path class available, so
// both come from one locality order: a depth-first walk of the containment tree with children
// sorted by PCI bus id (then name). GPUs below one switch end up adjacent, the devices of one
// package form one run, so a ring crosses the SMP link exactly twice.
// All functions are pure and deterministic: every rank computes the same order from the same input.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "topology/topology.h"

namespace ccl::topo {

// The devices ranks of one machine sit on: its GPUs if it has any, else its NUMA nodes (else the
// machine node itself, for a topology that knows nothing). In node id order (discovery order);
// the orders below do not depend on it.
std::vector<int> rank_devices(const Topology& topo);

// Orders over `devices` (node ids of topo): permutations of indices into `devices`.
// A device may appear more than once (several ranks on one NUMA node): its copies end up adjacent.
// InvalidArgument for an id that is not a node of topo.
// ring_order: the locality order. When some devices are NVLink-connected and the locality order has
// a pair of neighbours (the wrap included) that is not NVL or better, a ring with NVL between all
// neighbours is searched for (depth-first, candidates in locality order, bounded) and used instead;
// if there is none, the locality order stays.
std::vector<int> ring_order(const Topology& topo, std::span<const int> devices);
// tree_order: trees are built over positions 0..n-1 in in-order layout, where every subtree is a
// contiguous range of positions and leaves sit next to their parents, so the locality order serves
// them too. One change: the depth-first walk enters the subtree holding the device closest to a
// NIC (best path class, then bandwidth; the first in locality order among equals) first at every
// level, so that device is position 0 -- the root of the first tree and the rank that talks to
// other machines -- while every subtree stays contiguous (a rotation would split one). Without
// NICs, or when all devices are equally close to one, it is the locality order.
std::vector<int> tree_order(const Topology& topo, std::span<const int> devices);

// For ranks spread over machines: each rank's place, and orders of ranks (permutations of
// 0..n-1) that keep the ranks of a machine together and neighbours close.
struct RankPlace {
  std::string host;           // host id: ranks with equal ids share a machine
  std::vector<int> locality;  // locality_key() of the rank's device in its machine's topology
};

// The depth-first position of `node`: child indices from the root down, children sorted by PCI bus
// id then name. Sorting keys lexicographically gives the depth-first (pre-order) order.
std::vector<int> locality_key(const Topology& topo, int node);

// Ranks grouped by host (hosts in order of their lowest rank), inside a host by locality key then
// rank.
std::vector<int> rank_ring_order(std::span<const RankPlace> places);
// The same grouping and order as rank_ring_order: the first rank of each host's run is its
// leader; the runs are contiguous so intra-host tree edges stay inside a machine.
std::vector<int> rank_tree_order(std::span<const RankPlace> places);

}  // namespace ccl::topo
