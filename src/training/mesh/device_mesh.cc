// DeviceMesh: gathers the places, runs place_mesh, splits the world communicator three times and
// gathers the transports of every group's pairs for describe().
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <sstream>

#include "ccl/training/mesh.hpp"
#include "mesh/text_exchange.h"

namespace ccl::training {

namespace {

constexpr MeshAxis kAxes[] = {MeshAxis::Tp, MeshAxis::Pp, MeshAxis::Dp};

Communicator split_along(Communicator& world, const MeshRank& me, MeshAxis axis) {
  const MeshSplit& s = axis == MeshAxis::Tp ? me.tp : axis == MeshAxis::Pp ? me.pp : me.dp;
  std::optional<Communicator> group = world.split(s.color, s.key);
  // A non-negative color always yields a communicator; its rank is the key (keys are unique in a
  // group), which the mesh promises as the coordinate.
  if (!group || group->rank() != s.key) {
    throw Error(cclInternalError, std::string("ccl::training::DeviceMesh: the ") +
                                      mesh_axis_name(axis) + " split did not give rank " +
                                      std::to_string(s.key));
  }
  return std::move(*group);
}

// This rank's transports to the members of its group along each axis, one line per axis.
std::string transports_text(DeviceMesh& mesh) {
  std::string text;
  for (MeshAxis axis : kAxes) {
    Communicator& group = mesh.along(axis);
    for (int peer = 0; peer < group.size(); ++peer) {
      if (peer != 0) text += ' ';
      text += group.peer_transport(peer);
    }
    text += '\n';
  }
  return text;
}

std::vector<std::vector<std::string>> parse_transports(const std::string& text) {
  std::vector<std::vector<std::string>> axes;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    axes.emplace_back();
    for (std::string word; words >> word;) axes.back().push_back(word);
  }
  axes.resize(3);
  return axes;
}

// Different shapes on different ranks would split differently and hang until the timeout;
// gathered first, they fail on every rank at once.
void check_same_shape(Communicator& world, const MeshShape& shape) {
  const std::int32_t mine[3] = {shape.tp, shape.pp, shape.dp};
  std::vector<std::int32_t> all(3 * static_cast<std::size_t>(world.size()));
  world.all_gather(std::span<const std::int32_t>(mine), all);
  for (std::size_t r = 0; r < all.size() / 3; ++r) {
    if (!std::equal(mine, mine + 3, all.begin() + static_cast<std::ptrdiff_t>(3 * r))) {
      throw Error(cclInvalidUsage,
                  "ccl::training::DeviceMesh::create: world rank " + std::to_string(r) +
                      " passed tp " + std::to_string(all[3 * r]) + " x pp " +
                      std::to_string(all[3 * r + 1]) + " x dp " + std::to_string(all[3 * r + 2]) +
                      ", this rank tp " + std::to_string(shape.tp) + " x pp " +
                      std::to_string(shape.pp) + " x dp " + std::to_string(shape.dp));
    }
  }
}

}  // namespace

MeshPlace local_mesh_place(std::vector<int> locality) {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) name[0] = '\0';
  return MeshPlace{name, std::move(locality)};
}

DeviceMesh DeviceMesh::create(Communicator& world, const MeshShape& shape, const MeshPlace& place) {
  DeviceMesh mesh;
  mesh.world_rank_ = world.rank();
  check_same_shape(world, shape);
  for (const std::string& text : all_gather_text(world, encode_place(place))) {
    mesh.places_.push_back(decode_place(text));
  }
  // Every rank runs the same pure placement on the same places, so all agree without a message;
  // a bad shape fails on every rank alike, before any split.
  mesh.placement_ = place_mesh(shape, mesh.places_);
  const MeshRank& me = mesh.placement_.ranks[static_cast<std::size_t>(mesh.world_rank_)];
  mesh.tp_ = split_along(world, me, MeshAxis::Tp);
  mesh.pp_ = split_along(world, me, MeshAxis::Pp);
  mesh.dp_ = split_along(world, me, MeshAxis::Dp);
  for (const std::string& text : all_gather_text(world, transports_text(mesh))) {
    mesh.transports_.push_back(parse_transports(text));
  }
  return mesh;
}

Communicator& DeviceMesh::along(MeshAxis axis) {
  return axis == MeshAxis::Tp ? tp_ : axis == MeshAxis::Pp ? pp_ : dp_;
}

std::string DeviceMesh::describe() const {
  auto transport_of = [this](MeshAxis axis, int a, int b) -> std::string {
    const MeshRank& rb = placement_.ranks[static_cast<std::size_t>(b)];
    const int peer = axis == MeshAxis::Tp   ? rb.tp.key
                     : axis == MeshAxis::Pp ? rb.pp.key
                                            : rb.dp.key;
    const auto& names = transports_[static_cast<std::size_t>(a)][static_cast<std::size_t>(axis)];
    return static_cast<std::size_t>(peer) < names.size() ? names[static_cast<std::size_t>(peer)]
                                                         : std::string();
  };
  return describe_mesh(placement_, places_, transport_of);
}

}  // namespace ccl::training
