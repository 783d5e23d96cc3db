#include "inventory.h"

#include <algorithm>
#include <cstring>

namespace ccl_check {

namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out(1);
  for (const char c : text) {
    if (c == sep) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

}  // namespace

// The lengths first (one allreduce of the longest), then one
// allgather of fixed slots of that length.
std::vector<std::string> gather_strings(ccl::Communicator& comm, const std::string& mine) {
  std::vector<double> longest = {static_cast<double>(mine.size())};
  comm.all_reduce(std::span<double>(longest), cclMax);
  const size_t slot = static_cast<size_t>(longest[0]) + 1;
  std::vector<char> own(slot, '\0'), all(slot * static_cast<size_t>(comm.size()));
  std::memcpy(own.data(), mine.data(), mine.size());
  comm.all_gather(std::span<const char>(own), std::span<char>(all));
  std::vector<std::string> out;
  for (int r = 0; r < comm.size(); ++r)
    out.emplace_back(all.data() + static_cast<size_t>(r) * slot);
  return out;
}

Inventory gather_inventory(ccl::Communicator& comm, const std::string& my_host) {
  Inventory inv;
  inv.host_of_rank = gather_strings(comm, my_host);
  const int me = comm.rank();
  // Only a host's lowest rank sends its topology; the others send an empty text.
  const auto first = std::find(inv.host_of_rank.begin(), inv.host_of_rank.end(), my_host);
  const bool speaks = first - inv.host_of_rank.begin() == me;
  const auto topologies = gather_strings(comm, speaks ? ccl::topology_text() : std::string());
  for (int r = 0; r < comm.size(); ++r) {
    const std::string& host = inv.host_of_rank[static_cast<size_t>(r)];
    if (!inv.topology_of_host.contains(host)) {
      inv.topology_of_host[host] = topologies[static_cast<size_t>(r)];
    }
  }
  std::string row;
  for (int p = 0; p < comm.size(); ++p) row += (p > 0 ? "," : "") + comm.peer_transport(p);
  for (const std::string& r : gather_strings(comm, row)) inv.transport.push_back(split(r, ','));
  return inv;
}

std::map<std::string, int> transport_counts(const Inventory& inv) {
  std::map<std::string, int> counts;
  for (size_t a = 0; a < inv.transport.size(); ++a) {
    for (size_t b = a + 1; b < inv.transport[a].size(); ++b) ++counts[inv.transport[a][b]];
  }
  return counts;
}

nlohmann::json to_json(const Inventory& inv) {
  nlohmann::json hosts = nlohmann::json::array();
  for (const auto& [host, topology] : inv.topology_of_host) {
    std::vector<int> ranks;
    for (size_t r = 0; r < inv.host_of_rank.size(); ++r) {
      if (inv.host_of_rank[r] == host) ranks.push_back(static_cast<int>(r));
    }
    hosts.push_back({{"host", host}, {"ranks", ranks}, {"topology", topology}});
  }
  return {
      {"hosts", hosts}, {"transport", inv.transport}, {"transport_pairs", transport_counts(inv)}};
}

}  // namespace ccl_check
