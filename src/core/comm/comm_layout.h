// Where a communicator's ranks sit: which host each is on (ranks with equal host ids share
// memory) and the rank orders rings and trees follow, from every rank's place in its machine's
// topology (topology/orders.h). Every rank builds the same layout from the same exchanged places,
// which the algorithms need: ranks that disagreed on an order would wait for each other forever.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "topology/orders.h"

namespace ccl {

struct CommLayout {
  std::vector<int> host_of_rank;  // host index of each rank; hosts numbered by their lowest rank
  int nhosts = 1;
  int ranks_per_host = 1;       // the most ranks any host has
  bool uniform_hosts = true;    // every host has ranks_per_host ranks
  std::vector<int> ring_order;  // empty when it is the identity
  std::vector<int> tree_order;  // empty when it is the identity

  static CommLayout build(std::span<const topo::RankPlace> places);
};

// This process's place: `host_id`, and the locality key of the NUMA node it runs on in the
// topology in use (topo::system_topology()). A topology that cannot be had leaves the key empty,
// with a warning: orders then follow rank numbers.
topo::RankPlace local_place(const std::string& host_id);

// The locality key as text for the rendezvous ("0.2.1"), and back.
std::string encode_locality(const std::vector<int>& key);
std::vector<int> decode_locality(const std::string& text);

}  // namespace ccl
