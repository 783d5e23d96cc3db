// The rank records every rank reads from the rendezvous at communicator init: each peer's host id
// and locality key ("0.2.1", core/comm/comm_layout.h decode_locality), from which every rank builds the
// same CommLayout. Input: one "host locality" line per rank (at most 64 ranks).
#include "core/comm/comm_layout.h"
#include "base/error.h"
#include "fuzz_check.h"

using namespace ccl;

namespace {

void check_permutation(const std::vector<int>& order, size_t n) {
  if (order.empty()) return;  // the identity
  FUZZ_CHECK(order.size() == n);
  std::vector<bool> seen(n);
  for (int r : order) {
    FUZZ_CHECK(r >= 0 && static_cast<size_t>(r) < n && !seen[r]);
    seen[r] = true;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<topo::RankPlace> places;
  std::string text(reinterpret_cast<const char*>(data), size);
  while (!text.empty() && places.size() < 64) {
    auto [line, rest] = fuzz::split_once(text, '\n');
    text = std::move(rest);
    const auto [host, key] = fuzz::split_once(line, ' ');
    topo::RankPlace place;
    place.host = host;
    try {
      place.locality = decode_locality(key);
    } catch (const Error& e) {
      FUZZ_CHECK(e.code() == cclInternalError);  // how comm init reports a corrupt record
      continue;
    }
    for (int part : place.locality) FUZZ_CHECK(part >= 0);
    places.push_back(std::move(place));
  }
  const CommLayout layout = CommLayout::build(places);
  FUZZ_CHECK(layout.host_of_rank.size() == places.size());
  FUZZ_CHECK(layout.nhosts >= 1 && layout.ranks_per_host >= 1);
  for (int h : layout.host_of_rank) FUZZ_CHECK(h >= 0 && h < layout.nhosts);
  check_permutation(layout.ring_order, places.size());
  check_permutation(layout.tree_order, places.size());
  // Ranks of one host are contiguous in the ring, so it enters and leaves each host once.
  if (!layout.ring_order.empty()) {
    int changes = 0;
    for (size_t i = 1; i < places.size(); ++i) {
      changes += layout.host_of_rank[layout.ring_order[i]] !=
                 layout.host_of_rank[layout.ring_order[i - 1]];
    }
    FUZZ_CHECK(changes == layout.nhosts - 1);
  }
  return 0;
}
