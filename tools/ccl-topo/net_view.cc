#include "net_view.h"

#include <cstdio>
#include <cstring>
#include <exception>
#include <vector>

#include "base/config.h"
#include "ccl/ccl.h"
#include "core/comm/transport_choice.h"

namespace ccl::topo_tool {

std::string render_network_transports() {
  std::string out;
  const std::string net = config_string("CCL_NET");
  out += "Network transports (between hosts; CCL_NET=" + (net.empty() ? "unset" : net) + "):\n";
  try {
    const NetPolicy policy = parse_net_policy(net);
    const std::vector<NetCandidate> candidates = probe_network_transports(policy);
    for (const NetCandidate& c : candidates) {
      const transport::NetAvailability& a = c.availability;
      const char* state = !a.available                       ? "not available"
                          : a.by_default || policy.is_list() ? "usable"
                                                             : "usable when asked for";
      char line[64];
      snprintf(line, sizeof(line), "  %-4s %-22s ", c.name.c_str(), state);
      out += line + a.detail + "\n";
    }
    out += "Offered to peers on other hosts, in order: " +
           encode_offer(net_offer(policy, candidates)) +
           "\n(a pair takes the first transport of the lower rank's list that the other offers)\n";
  } catch (const std::exception& e) {
    out += std::string("Init would fail: ") + e.what() + "\n";
  }
  return out;
}

int print_pair_transports() {
  cclComm_t comm = nullptr;
  if (cclCommInitFromEnv(&comm) != cclSuccess) {
    fprintf(stderr, "ccl-topo --pairs: %s\n", cclGetLastError(comm));
    if (comm != nullptr) cclCommDestroy(comm);
    return 1;
  }
  int rank = 0, nranks = 1;
  cclCommUserRank(comm, &rank);
  cclCommCount(comm, &nranks);
  // Each rank knows the transports of its own pairs; rank 0 gathers them as short names.
  constexpr size_t kName = 8;
  std::vector<char> mine(static_cast<size_t>(nranks) * kName, '\0');
  for (int p = 0; p < nranks; ++p) {
    const char* name = "?";
    cclCommPeerTransport(comm, p, &name);
    strncpy(&mine[static_cast<size_t>(p) * kName], name, kName - 1);
  }
  std::vector<char> all(mine.size() * static_cast<size_t>(nranks));
  cclResult_t rc = cclAllGather(mine.data(), all.data(), mine.size(), cclUint8, comm, nullptr);
  if (rc != cclSuccess) {
    fprintf(stderr, "ccl-topo --pairs: %s\n", cclGetLastError(comm));
    cclCommDestroy(comm);
    return 1;
  }
  if (rank == 0) {
    printf("Transport chosen between ranks (row: rank, column: peer):\n%6s", "");
    for (int p = 0; p < nranks; ++p) printf(" %6d", p);
    printf("\n");
    for (int r = 0; r < nranks; ++r) {
      printf("%6d", r);
      for (int p = 0; p < nranks; ++p) {
        const char* cell = &all[(static_cast<size_t>(r) * nranks + p) * kName];
        printf(" %6s", r == p ? "-" : cell);
      }
      printf("\n");
    }
  }
  cclCommDestroy(comm);
  return 0;
}

}  // namespace ccl::topo_tool
