// The rounds of ccl-check's pairwise test (ClusterKit's scheme): every pair of ranks exactly once,
// in rounds of disjoint pairs, so that a round measures n/2 links at once and no rank is in two
// pairs of a round. The circle method of round-robin tournaments: rank n−1 (or a "bye" when n is
// odd) stays, the others rotate.
#pragma once

#include <utility>
#include <vector>

namespace ccl_check {

using RankPair = std::pair<int, int>;  // first < second

/// n − 1 rounds of n/2 pairs for even n; n rounds of (n − 1)/2 pairs for odd n (one rank rests in
/// each). Every pair of [0, n) appears in exactly one round. No rounds for n < 2.
std::vector<std::vector<RankPair>> pair_rounds(int n);

}  // namespace ccl_check
