// DeviceMesh with ranks as threads of one process: each group's allreduce sums exactly its
// members, the group ranks are the coordinates, and describe() names every rank and pair.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "../support/rank_threads.h"
#include "ccl/training/mesh.hpp"

namespace ccl::training {
namespace {

class DeviceMeshTest : public testing::TestWithParam<MeshShape> {};

// Two NUMA nodes in one host, ranks dealt round-robin over them, as CPU ranks pinned by a
// launcher would be.
MeshPlace place_of(int rank) { return {"testhost", {rank % 2, rank}}; }

TEST_P(DeviceMeshTest, GroupsReduceOverTheirMembers) {
  const MeshShape shape = GetParam();
  const int n = shape.tp * shape.pp * shape.dp;
  ccl_test::run_ranks(n, [&](ccl::Communicator& world) {
    DeviceMesh mesh = DeviceMesh::create(world, shape, place_of(world.rank()));
    EXPECT_EQ(mesh.world_rank(), world.rank());
    const std::uint32_t bit = 1u << world.rank();
    for (MeshAxis axis : {MeshAxis::Tp, MeshAxis::Pp, MeshAxis::Dp}) {
      const std::vector<int> members = mesh.placement().group(axis, world.rank());
      ccl::Communicator& group = mesh.along(axis);
      ASSERT_EQ(group.size(), static_cast<int>(members.size())) << mesh_axis_name(axis);
      EXPECT_EQ(members[static_cast<std::size_t>(group.rank())], world.rank());
      std::uint32_t want = 0;
      for (int r : members) want |= 1u << r;
      // One bit per world rank: the sum is exactly the members' bits when each is counted once.
      std::vector<std::uint32_t> data = {bit};
      group.all_reduce(data);
      EXPECT_EQ(data[0], want) << mesh_axis_name(axis);
    }
    EXPECT_EQ(mesh.tp().rank(), mesh.coord().tp);
    EXPECT_EQ(mesh.pp().rank(), mesh.coord().pp);
    EXPECT_EQ(mesh.dp().rank(), mesh.coord().dp);
    // The same description everywhere, with every rank's line and every pair's transport known.
    const std::string text = mesh.describe();
    for (int r = 0; r < n; ++r) {
      EXPECT_NE(text.find("\n" + std::to_string(r) + std::string(r < 10 ? 5 : 4, ' ') + "testhost"),
                std::string::npos)
          << "rank " << r << " missing from\n"
          << text;
    }
    EXPECT_EQ(text.find(" ?"), std::string::npos) << text;
    if (shape.tp > 1) {
      EXPECT_NE(text.find("transports 0-"), std::string::npos) << text;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Shapes, DeviceMeshTest,
                         testing::Values(MeshShape{1, 1, 1}, MeshShape{2, 1, 1}, MeshShape{2, 2, 1},
                                         MeshShape{1, 2, 2}, MeshShape{2, 2, 2}),
                         [](const testing::TestParamInfo<MeshShape>& info) {
                           const MeshShape& s = info.param;
                           return "tp" + std::to_string(s.tp) + "pp" + std::to_string(s.pp) + "dp" +
                                  std::to_string(s.dp);
                         });

TEST(DeviceMesh, BadShapeFailsOnEveryRank) {
  ccl_test::run_ranks(2, [](ccl::Communicator& world) {
    try {
      DeviceMesh::create(world, {.tp = 3, .pp = 1, .dp = 1}, place_of(world.rank()));
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), cclInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("tp 3 x pp 1 x dp 1 = 3"), std::string::npos);
    }
  });
}

TEST(DeviceMesh, DifferentShapesFailOnEveryRank) {
  ccl_test::run_ranks(2, [](ccl::Communicator& world) {
    const MeshShape shape = world.rank() == 0 ? MeshShape{2, 1, 1} : MeshShape{1, 1, 2};
    try {
      DeviceMesh::create(world, shape, place_of(world.rank()));
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), cclInvalidUsage);
      EXPECT_NE(std::string(e.what()).find("world rank " + std::to_string(1 - world.rank())),
                std::string::npos)
          << e.what();
    }
  });
}

TEST(DeviceMesh, LocalPlaceHasTheHostName) {
  const MeshPlace place = local_mesh_place({1, 2});
  EXPECT_FALSE(place.host.empty());
  EXPECT_EQ(place.locality, (std::vector<int>{1, 2}));
}

}  // namespace
}  // namespace ccl::training
