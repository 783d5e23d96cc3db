// The properties every mesh placement must have, checked on any layout (synthetic or from a saved
// topology): each rank in exactly one group per axis, groups of the axis's size, the group rank
// equal to the coordinate, split colors that match the groups, tp groups inside one host.
#pragma once

#include <gtest/gtest.h>

#include <set>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "ccl/training/mesh.hpp"

namespace ccl_test {

inline int axis_size(const ccl::training::MeshShape& s, ccl::training::MeshAxis axis) {
  using ccl::training::MeshAxis;
  return axis == MeshAxis::Tp ? s.tp : axis == MeshAxis::Pp ? s.pp : s.dp;
}

inline int coord_along(const ccl::training::MeshCoord& c, ccl::training::MeshAxis axis) {
  using ccl::training::MeshAxis;
  return axis == MeshAxis::Tp ? c.tp : axis == MeshAxis::Pp ? c.pp : c.dp;
}

inline ccl::training::MeshSplit split_along(const ccl::training::MeshRank& r,
                                            ccl::training::MeshAxis axis) {
  using ccl::training::MeshAxis;
  return axis == MeshAxis::Tp ? r.tp : axis == MeshAxis::Pp ? r.pp : r.dp;
}

inline void expect_valid_mesh(const ccl::training::MeshPlacement& m,
                              std::span<const ccl::training::MeshPlace> places) {
  using ccl::training::MeshAxis;
  const std::size_t n = places.size();
  ASSERT_EQ(m.ranks.size(), n);
  ASSERT_EQ(m.order.size(), n);
  EXPECT_EQ(std::set<int>(m.order.begin(), m.order.end()).size(), n);
  // Coordinates are a bijection onto the shape's box.
  std::set<std::tuple<int, int, int>> coords;
  for (const auto& r : m.ranks) {
    EXPECT_TRUE(r.coord.tp >= 0 && r.coord.tp < m.shape.tp);
    EXPECT_TRUE(r.coord.pp >= 0 && r.coord.pp < m.shape.pp);
    EXPECT_TRUE(r.coord.dp >= 0 && r.coord.dp < m.shape.dp);
    coords.insert({r.coord.tp, r.coord.pp, r.coord.dp});
  }
  EXPECT_EQ(coords.size(), n);
  for (MeshAxis axis : {MeshAxis::Tp, MeshAxis::Pp, MeshAxis::Dp}) {
    const auto groups = m.groups(axis);
    std::vector<int> seen(n, 0);
    for (const auto& g : groups) {
      ASSERT_EQ(static_cast<int>(g.size()), axis_size(m.shape, axis));
      const int color = split_along(m.ranks[static_cast<std::size_t>(g[0])], axis).color;
      for (std::size_t i = 0; i < g.size(); ++i) {
        const auto& r = m.ranks[static_cast<std::size_t>(g[i])];
        ++seen[static_cast<std::size_t>(g[i])];
        EXPECT_EQ(split_along(r, axis).color, color);
        EXPECT_EQ(split_along(r, axis).key, static_cast<int>(i));
        EXPECT_EQ(coord_along(r.coord, axis), static_cast<int>(i));
        if (axis == MeshAxis::Tp) {
          EXPECT_EQ(places[static_cast<std::size_t>(g[i])].host,
                    places[static_cast<std::size_t>(g[0])].host)
              << "tp group of rank " << g[0] << " crosses hosts";
        }
      }
    }
    for (std::size_t r = 0; r < n; ++r) {
      EXPECT_EQ(seen[r], 1) << "rank " << r << " in " << seen[r] << " "
                            << ccl::training::mesh_axis_name(axis) << " groups";
    }
    // Different groups have different colors (the split would merge them otherwise).
    std::set<int> colors;
    for (const auto& g : groups)
      colors.insert(split_along(m.ranks[static_cast<std::size_t>(g[0])], axis).color);
    EXPECT_EQ(colors.size(), groups.size());
  }
}

}  // namespace ccl_test
