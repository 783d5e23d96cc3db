// place_mesh and describe_mesh on synthetic layouts: hosts, NUMA nodes, odd shapes, bad shapes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ccl/training/mesh.hpp"
#include "mesh_checks.h"

namespace ccl::training {
namespace {

using Groups = std::vector<std::vector<int>>;

// `hosts` hosts of `per_host` ranks, rank r on host r % hosts (interleaved, as a launcher that
// deals ranks round-robin would), locality {r / hosts}.
std::vector<MeshPlace> interleaved(int hosts, int per_host) {
  std::vector<MeshPlace> places;
  for (int r = 0; r < hosts * per_host; ++r) {
    places.push_back({"host" + std::to_string(r % hosts), {r / hosts}});
  }
  return places;
}

TEST(MeshPlacement, TwoHostsTp4Pp2) {
  const auto places = interleaved(2, 4);  // host0: 0 2 4 6, host1: 1 3 5 7
  const MeshPlacement m = place_mesh({.tp = 4, .pp = 2, .dp = 1}, places);
  ccl_test::expect_valid_mesh(m, places);
  EXPECT_EQ(m.groups(MeshAxis::Tp), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  // The pipeline's two stages are the two hosts.
  EXPECT_EQ(m.groups(MeshAxis::Pp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(m.groups(MeshAxis::Dp).size(), 8u);
  EXPECT_EQ(m.ranks[3].coord, (MeshCoord{1, 1, 0}));
}

TEST(MeshPlacement, TwoHostsTp2Pp2Dp2) {
  const auto places = interleaved(2, 4);
  const MeshPlacement m = place_mesh({.tp = 2, .pp = 2, .dp = 2}, places);
  ccl_test::expect_valid_mesh(m, places);
  EXPECT_EQ(m.groups(MeshAxis::Tp), (Groups{{0, 2}, {4, 6}, {1, 3}, {5, 7}}));
  // The pipeline spans the hosts (stage 0 on host0, stage 1 on host1); a host holds its stage's
  // tp × dp block, so the gradient all-reduces stay inside the host.
  EXPECT_EQ(m.groups(MeshAxis::Pp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(m.groups(MeshAxis::Dp), (Groups{{0, 4}, {2, 6}, {1, 5}, {3, 7}}));
  for (int r = 0; r < 8; ++r) EXPECT_EQ(m.ranks[static_cast<std::size_t>(r)].coord.pp, r % 2);
}

TEST(MeshPlacement, TpGroupsStayOnANumaNode) {
  // One host, ranks dealt round-robin over NUMA nodes 0 and 1: tp groups of 4 are the nodes.
  std::vector<MeshPlace> places;
  for (int r = 0; r < 8; ++r) places.push_back({"h", {r % 2, r}});
  const MeshPlacement m = place_mesh({.tp = 4, .pp = 1, .dp = 2}, places);
  ccl_test::expect_valid_mesh(m, places);
  EXPECT_EQ(m.groups(MeshAxis::Tp), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(m.groups(MeshAxis::Dp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  // Adjacent GPUs: keys {gpu} reversed against rank order.
  std::vector<MeshPlace> gpus;
  for (int r = 0; r < 4; ++r) gpus.push_back({"h", {3 - r}});
  EXPECT_EQ(place_mesh({.tp = 2, .pp = 2, .dp = 1}, gpus).groups(MeshAxis::Tp),
            (Groups{{3, 2}, {1, 0}}));
}

TEST(MeshPlacement, UnknownLocalityKeepsRankOrder) {
  const std::vector<MeshPlace> places(6, MeshPlace{"h", {}});
  const MeshPlacement m = place_mesh({.tp = 3, .pp = 1, .dp = 2}, places);
  ccl_test::expect_valid_mesh(m, places);
  EXPECT_EQ(m.groups(MeshAxis::Tp), (Groups{{0, 1, 2}, {3, 4, 5}}));
}

TEST(MeshPlacement, OddShapes) {
  for (const MeshShape shape : {MeshShape{1, 1, 1}, MeshShape{1, 5, 1}, MeshShape{1, 1, 7},
                                MeshShape{3, 1, 2}, MeshShape{1, 3, 2}, MeshShape{3, 2, 1}}) {
    const int n = shape.tp * shape.pp * shape.dp;
    const std::vector<MeshPlace> places(static_cast<std::size_t>(n), MeshPlace{"h", {}});
    ccl_test::expect_valid_mesh(place_mesh(shape, places), places);
  }
  // 2 hosts of 3 ranks, tp 3: a tp group per host.
  const auto places = interleaved(2, 3);
  const MeshPlacement m = place_mesh({.tp = 3, .pp = 1, .dp = 2}, places);
  ccl_test::expect_valid_mesh(m, places);
  EXPECT_EQ(m.groups(MeshAxis::Tp), (Groups{{0, 2, 4}, {1, 3, 5}}));
  // Hosts of different sizes (4 and 2 ranks), tp 2.
  std::vector<MeshPlace> uneven = {{"a", {}}, {"a", {}}, {"b", {}},
                                   {"a", {}}, {"b", {}}, {"a", {}}};
  ccl_test::expect_valid_mesh(place_mesh({.tp = 2, .pp = 3, .dp = 1}, uneven), uneven);
}

// Every factorization of hosts × per-host ranks whose tp fits a host gives a valid mesh.
TEST(MeshPlacement, EveryFittingShapeIsValid) {
  for (int hosts = 1; hosts <= 3; ++hosts) {
    for (int per_host = 1; per_host <= 8; ++per_host) {
      const auto places = interleaved(hosts, per_host);
      const int n = hosts * per_host;
      for (int tp = 1; tp <= per_host; ++tp) {
        if (per_host % tp != 0) continue;
        for (int pp = 1; pp <= n / tp; ++pp) {
          if ((n / tp) % pp != 0) continue;
          SCOPED_TRACE(testing::Message()
                       << hosts << " hosts x " << per_host << ", tp " << tp << " pp " << pp);
          ccl_test::expect_valid_mesh(place_mesh({tp, pp, n / (tp * pp)}, places), places);
        }
      }
    }
  }
}

// The message of the ccl::Error (cclInvalidArgument) place_mesh throws.
std::string refusal(const MeshShape& shape, const std::vector<MeshPlace>& places) {
  try {
    place_mesh(shape, places);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclInvalidArgument);
    return e.what();
  }
  ADD_FAILURE() << "accepted";
  return "";
}

TEST(MeshPlacement, BadShapesAreRefused) {
  const auto eight = interleaved(2, 4);
  EXPECT_NE(refusal({.tp = 0, .pp = 8, .dp = 1}, eight).find("tp 0 must be at least 1"),
            std::string::npos);
  EXPECT_NE(refusal({.tp = 2, .pp = -1, .dp = 1}, eight).find("pp -1"), std::string::npos);
  EXPECT_NE(refusal({.tp = 2, .pp = 2, .dp = 3}, eight)
                .find("tp 2 x pp 2 x dp 3 = 12 must equal the number of ranks 8"),
            std::string::npos);
  // Products beyond an int are compared exactly, not wrapped.
  EXPECT_NE(refusal({.tp = 65536, .pp = 65536, .dp = 1}, eight).find("= 4294967296"),
            std::string::npos);
  // tp larger than a host, or not dividing it: the tp groups would cross hosts.
  EXPECT_NE(refusal({.tp = 8, .pp = 1, .dp = 1}, eight)
                .find("tp 8 does not divide the 4 ranks of host 'host0'"),
            std::string::npos);
  EXPECT_NE(refusal({.tp = 2, .pp = 3, .dp = 1}, interleaved(2, 3)).find("tp groups would cross"),
            std::string::npos);
  EXPECT_NE(refusal({.tp = 1, .pp = 1, .dp = 1}, {}).find("number of ranks 0"), std::string::npos);
}

TEST(MeshDescribe, NamesEveryRankAndPair) {
  const auto places = interleaved(2, 2);
  const MeshPlacement m = place_mesh({.tp = 2, .pp = 2, .dp = 1}, places);
  const std::string text = describe_mesh(m, places, [](MeshAxis axis, int a, int b) {
    return std::string(mesh_axis_name(axis)) + "link" + std::to_string(a) + std::to_string(b);
  });
  EXPECT_NE(text.find("device mesh: 4 ranks = tp 2 x pp 2 x dp 1"), std::string::npos) << text;
  EXPECT_NE(text.find("rank  host   locality  tp  pp  dp\n"
                      "0     host0  0         0   0   0\n"
                      "1     host1  0         0   1   0\n"
                      "2     host0  1         1   0   0\n"
                      "3     host1  1         1   1   0\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("tp groups (2):\n  tp0: ranks 0 2  transports 0-2 tplink02\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  pp1: ranks 2 3  transports 2-3 pplink23\n"), std::string::npos) << text;
  // dp groups of one rank have no pairs.
  EXPECT_NE(text.find("dp groups (4):\n  dp0: ranks 0\n"), std::string::npos) << text;
  // Without transports, only the members.
  EXPECT_EQ(describe_mesh(m, places).find("transports"), std::string::npos);
  EXPECT_THROW(describe_mesh(m, std::span(places).first(3)), Error);
}

}  // namespace
}  // namespace ccl::training
