#include "algorithms/ring_place.h"

#include <vector>

#include "core/error.h"

namespace ccl::algo {

int RingPlace::position_of(int rank) const {
  if (order.empty()) return rank;
  for (int i = 0; i < n; ++i) {
    if (order[i] == rank) return i;
  }
  throw_error(cclInternalError, "ring order has no rank %d", rank);
}

int RingPlace::chain_index(int root, const char* who) const {
  if (root < 0 || root >= n)
    throw_error(cclInvalidArgument, "%s: root %d not in [0,%d)", who, root, n);
  return ((pos - position_of(root)) % n + n) % n;
}

RingPlace place_on_ring(const RingParams& p, const char* who) {
  if (p.nranks < 1) throw_error(cclInvalidArgument, "%s: nranks %d < 1", who, p.nranks);
  if (p.rank < 0 || p.rank >= p.nranks) {
    throw_error(cclInvalidArgument, "%s: rank %d not in [0,%d)", who, p.rank, p.nranks);
  }
  RingPlace ring{p.nranks, p.rank, p.order};
  if (p.order.empty()) return ring;
  if (p.order.size() != static_cast<size_t>(p.nranks)) {
    throw_error(cclInvalidArgument, "%s: ring order has %zu entries for %d ranks", who,
                p.order.size(), p.nranks);
  }
  std::vector<bool> seen(p.nranks, false);
  for (size_t i = 0; i < p.order.size(); ++i) {
    const int r = p.order[i];
    if (r < 0 || r >= p.nranks || seen[r]) {
      throw_error(cclInvalidArgument, "%s: ring order is not a permutation (entry %zu is %d)", who,
                  i, r);
    }
    seen[r] = true;
    if (r == p.rank) ring.pos = static_cast<int>(i);
  }
  return ring;
}

}  // namespace ccl::algo
