// ZeRO's layout (pure): units from sizes, slices that cover every element once, the pieces a
// rank's optimizer steps on, and the refusal of units that are not contiguous.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "ccl/training/zero.hpp"

namespace {

using namespace ccl::training;

TEST(ZeroLayout, UnitsGroupConsecutiveParametersBySize) {
  const std::vector<size_t> counts = {100, 100, 300, 50, 50, 10};
  // 1600 bytes per unit: 100+100+(300 over: new), 300+50+50 = 1600, 10 opens the third.
  EXPECT_EQ(assign_zero_units(counts, 1600), (std::vector<size_t>{0, 0, 1, 1, 1, 2}));
  // A parameter larger than a unit is a unit of its own.
  EXPECT_EQ(assign_zero_units(std::vector<size_t>{1000, 1, 1000}, 400),
            (std::vector<size_t>{0, 1, 2}));
}

TEST(ZeroLayout, SlicesCoverEveryElementOnce) {
  for (int n = 1; n <= 5; ++n) {
    for (const std::vector<size_t>& counts :
         {std::vector<size_t>{1}, std::vector<size_t>{7, 3, 11}, std::vector<size_t>{2, 2, 2, 2},
          std::vector<size_t>{13, 1, 1, 40}}) {
      std::vector<ZeroParam> params;
      for (size_t i = 0; i < counts.size(); ++i) params.push_back({counts[i], false, i / 2});
      const auto units = zero_layout(params, n);
      std::vector<std::vector<int>> seen(counts.size());
      for (size_t i = 0; i < counts.size(); ++i) seen[i].assign(counts[i], 0);
      for (const ZeroUnitLayout& u : units) {
        EXPECT_EQ(u.shard, (u.count + static_cast<size_t>(n) - 1) / static_cast<size_t>(n));
        for (int r = 0; r < n; ++r) {
          for (const ZeroPiece& p : zero_pieces(u, r)) {
            ASSERT_LE(p.shard_offset + p.count, u.shard);
            // The piece's place in the unit's buffer is its place in the rank's slice.
            EXPECT_EQ(u.offsets[p.param - u.first_param] + p.param_offset,
                      static_cast<size_t>(r) * u.shard + p.shard_offset);
            for (size_t k = 0; k < p.count; ++k) ++seen[p.param][p.param_offset + k];
          }
        }
      }
      for (size_t i = 0; i < counts.size(); ++i) {
        for (size_t k = 0; k < counts[i]; ++k) {
          EXPECT_EQ(seen[i][k], 1) << "n " << n << " param " << i << " element " << k;
        }
      }
    }
  }
}

TEST(ZeroLayout, ARankMayHoldPiecesOfSeveralParametersOrNone) {
  // One unit of 3 + 4 + 1 = 8 elements over 3 ranks: slices of 3; rank 2 holds 2 real elements
  // and one of padding; over 16 ranks, ranks 8.. hold padding only.
  const std::vector<ZeroParam> params = {{3}, {4}, {1}};
  const auto three = zero_layout(params, 3);
  ASSERT_EQ(three.size(), 1u);
  const auto r1 = zero_pieces(three[0], 1);
  ASSERT_EQ(r1.size(), 1u);
  EXPECT_EQ(r1[0].param, 1u);
  EXPECT_EQ(r1[0].count, 3u);
  const auto r2 = zero_pieces(three[0], 2);
  ASSERT_EQ(r2.size(), 2u);
  EXPECT_EQ(r2[0].param, 1u);
  EXPECT_EQ(r2[1].param, 2u);
  EXPECT_TRUE(zero_pieces(zero_layout(params, 16)[0], 12).empty());
}

TEST(ZeroLayout, RefusesUnitsOutOfOrderAndEmptyParameters) {
  EXPECT_THROW(zero_layout(std::vector<ZeroParam>{{4, false, 1}}, 2), std::invalid_argument);
  EXPECT_THROW(zero_layout(std::vector<ZeroParam>{{4, false, 0}, {4, false, 2}}, 2),
               std::invalid_argument);
  EXPECT_THROW(zero_layout(std::vector<ZeroParam>{{4, false, 0}, {4, false, 1}, {4, false, 0}}, 2),
               std::invalid_argument);
  EXPECT_THROW(zero_layout(std::vector<ZeroParam>{{0}}, 2), std::invalid_argument);
  EXPECT_THROW(zero_layout(std::vector<ZeroParam>{{4}}, 0), std::invalid_argument);
  try {
    zero_layout(std::vector<ZeroParam>{{4, false, 0}, {4, false, 3}}, 2);
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("parameter 1 is in unit 3"), std::string::npos)
        << e.what();
  }
}

}  // namespace
