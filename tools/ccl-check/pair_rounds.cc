#include "pair_rounds.h"

#include <algorithm>

namespace ccl_check {

std::vector<std::vector<RankPair>> pair_rounds(int n) {
  std::vector<std::vector<RankPair>> rounds;
  if (n < 2) return rounds;
  const int m = n % 2 == 0 ? n : n + 1;  // with a bye (rank m − 1 = n) when n is odd
  for (int r = 0; r < m - 1; ++r) {
    std::vector<RankPair> round;
    // Position 0 holds the fixed player m − 1; positions 1..m−1 rotate by r.
    auto at = [&](int pos) { return pos == 0 ? m - 1 : (pos - 1 + r) % (m - 1); };
    for (int i = 0; i < m / 2; ++i) {
      const int a = at(i), b = at(m - 1 - i);
      if (a >= n || b >= n) continue;  // the bye
      round.emplace_back(std::min(a, b), std::max(a, b));
    }
    std::sort(round.begin(), round.end());
    rounds.push_back(std::move(round));
  }
  return rounds;
}

}  // namespace ccl_check
