#include "transport/peer_list.h"

#include <algorithm>

#include "base/error.h"

namespace ccl::transport {

std::vector<int> peers_to_connect(const char* transport, const SetupContext& ctx, int rank,
                                  int nranks, const std::string& comm_tag,
                                  std::span<const int> peers,
                                  const std::function<bool(int)>& connected) {
  if (ctx.rank != rank || ctx.nranks != nranks || ctx.comm_tag != comm_tag) {
    throw_error(cclInvalidUsage, "%s: connect() for another communicator than the transport's",
                transport);
  }
  std::vector<int> sorted(peers.begin(), peers.end());
  std::sort(sorted.begin(), sorted.end());
  auto twice = std::adjacent_find(sorted.begin(), sorted.end());
  if (twice != sorted.end()) {
    throw_error(cclInvalidArgument, "%s: rank %d listed twice in connect()", transport, *twice);
  }
  std::vector<int> fresh;
  for (int p : peers) {
    if (p < 0 || p >= nranks || p == rank) {
      throw_error(cclInvalidArgument, "%s: rank %d cannot connect to rank %d of %d", transport,
                  rank, p, nranks);
    }
    if (!connected(p)) fresh.push_back(p);
  }
  return fresh;
}

}  // namespace ccl::transport
