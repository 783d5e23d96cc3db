// ccl-check's inventory: what each host is and how its ranks reach each other, gathered to every
// rank with collectives: the host of every rank, each host's topology as ccl sees it (ccl-topo's
// text, cclGetTopologyText), and the transport ccl chose for every pair of ranks
// (cclCommPeerTransport).
#pragma once

#include <ccl/ccl.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ccl_check {

struct Inventory {
  std::vector<std::string> host_of_rank;
  std::map<std::string, std::string> topology_of_host;  // from the host's lowest rank
  std::vector<std::vector<std::string>> transport;      // [rank][peer]; "self" on the diagonal
};

// Every rank's string, on every rank (collective).
std::vector<std::string> gather_strings(ccl::Communicator& comm, const std::string& mine);

// Collective: every rank calls it; every rank gets the whole inventory.
Inventory gather_inventory(ccl::Communicator& comm, const std::string& my_host);

// Pairs per transport ("tcp": 24, ...), each unordered pair once.
std::map<std::string, int> transport_counts(const Inventory& inv);

nlohmann::json to_json(const Inventory& inv);

}  // namespace ccl_check
