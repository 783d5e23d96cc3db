// place_mesh: which world rank sits where on the tp × pp × dp mesh, and the split arguments of
// its three groups. Pure (no communicator), so it is tested on any layout, including the saved
// topologies of tests/data, and every rank computes the same answer from the same places.
#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>
#include <string>
#include <tuple>

#include "ccl/training/mesh.hpp"

namespace ccl::training {

namespace {

[[noreturn]] void bad_argument(const std::string& what) {
  throw Error(cclInvalidArgument, "ccl::training::place_mesh: " + what);
}

void check_shape(const MeshShape& shape, std::size_t nranks) {
  const std::pair<const char*, int> sizes[] = {
      {"tp", shape.tp}, {"pp", shape.pp}, {"dp", shape.dp}};
  for (const auto& [name, size] : sizes) {
    if (size < 1)
      bad_argument(std::string(name) + " " + std::to_string(size) + " must be at least 1");
  }
  // In 64 bits: three ints may overflow an int, never an int64.
  const std::int64_t product =
      std::int64_t{shape.tp} * std::int64_t{shape.pp} * std::int64_t{shape.dp};
  if (product != static_cast<std::int64_t>(nranks)) {
    bad_argument("tp " + std::to_string(shape.tp) + " x pp " + std::to_string(shape.pp) + " x dp " +
                 std::to_string(shape.dp) + " = " + std::to_string(product) +
                 " must equal the number of ranks " + std::to_string(nranks));
  }
}

// The locality order: hosts in order of their lowest rank, inside a host by locality key then
// rank (the order the library's rings use, so a tp group is a run of ring neighbours).
std::vector<int> locality_order(std::span<const MeshPlace> places) {
  std::map<std::string, int> host_index;
  for (const MeshPlace& p : places) host_index.emplace(p.host, static_cast<int>(host_index.size()));
  std::vector<int> order(places.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    const MeshPlace& pa = places[static_cast<std::size_t>(a)];
    const MeshPlace& pb = places[static_cast<std::size_t>(b)];
    return std::tie(host_index.at(pa.host), pa.locality, a) <
           std::tie(host_index.at(pb.host), pb.locality, b);
  });
  return order;
}

// Refuses a tp that would put a tp group on two hosts. The order keeps each host's ranks in one
// run, so tp groups (runs of tp) stay inside hosts exactly when every run is a multiple of tp.
void check_tp_fits_hosts(int tp, std::span<const MeshPlace> places, const std::vector<int>& order) {
  std::size_t start = 0;
  while (start < order.size()) {
    const std::string& host = places[static_cast<std::size_t>(order[start])].host;
    std::size_t end = start;
    while (end < order.size() && places[static_cast<std::size_t>(order[end])].host == host) ++end;
    const std::size_t count = end - start;
    if (count % static_cast<std::size_t>(tp) != 0) {
      bad_argument("tp " + std::to_string(tp) + " does not divide the " + std::to_string(count) +
                   " ranks of host '" + host +
                   "': tp groups would cross hosts (every host's rank count must be a multiple "
                   "of tp)");
    }
    start = end;
  }
}

}  // namespace

const char* mesh_axis_name(MeshAxis axis) {
  switch (axis) {
    case MeshAxis::Tp:
      return "tp";
    case MeshAxis::Pp:
      return "pp";
    case MeshAxis::Dp:
      return "dp";
  }
  return "?";
}

MeshPlacement place_mesh(const MeshShape& shape, std::span<const MeshPlace> places) {
  check_shape(shape, places.size());
  MeshPlacement placement;
  placement.shape = shape;
  placement.order = locality_order(places);
  check_tp_fits_hosts(shape.tp, places, placement.order);
  placement.ranks.resize(places.size());
  const int tp = shape.tp;
  const int dp = shape.dp;
  for (std::size_t p = 0; p < placement.order.size(); ++p) {
    const int position = static_cast<int>(p);
    MeshRank& r = placement.ranks[static_cast<std::size_t>(placement.order[p])];
    r.coord = {.tp = position % tp, .pp = position / (tp * dp), .dp = (position / tp) % dp};
    // A group's color is the index of its fixed coordinates; its key the coordinate that varies,
    // so the group communicator's rank is the coordinate along that axis.
    r.tp = {position / tp, r.coord.tp};
    r.pp = {r.coord.tp + tp * r.coord.dp, r.coord.pp};
    r.dp = {r.coord.tp + tp * r.coord.pp, r.coord.dp};
  }
  return placement;
}

namespace {

const MeshSplit& split_of(const MeshRank& r, MeshAxis axis) {
  return axis == MeshAxis::Tp ? r.tp : axis == MeshAxis::Pp ? r.pp : r.dp;
}

}  // namespace

std::vector<int> MeshPlacement::group(MeshAxis axis, int world_rank) const {
  if (world_rank < 0 || static_cast<std::size_t>(world_rank) >= ranks.size()) {
    throw Error(cclInvalidArgument, "ccl::training::MeshPlacement::group: world_rank " +
                                        std::to_string(world_rank) + " is outside [0, " +
                                        std::to_string(ranks.size()) + ")");
  }
  const int color = split_of(ranks[static_cast<std::size_t>(world_rank)], axis).color;
  std::vector<int> members;
  for (int r : order) {
    if (split_of(ranks[static_cast<std::size_t>(r)], axis).color == color) members.push_back(r);
  }
  std::sort(members.begin(), members.end(), [&](int a, int b) {
    return split_of(ranks[static_cast<std::size_t>(a)], axis).key <
           split_of(ranks[static_cast<std::size_t>(b)], axis).key;
  });
  return members;
}

std::vector<std::vector<int>> MeshPlacement::groups(MeshAxis axis) const {
  std::vector<std::vector<int>> all;
  std::vector<bool> seen(ranks.size(), false);
  for (int r : order) {
    if (seen[static_cast<std::size_t>(r)]) continue;
    all.push_back(group(axis, r));
    for (int member : all.back()) seen[static_cast<std::size_t>(member)] = true;
  }
  return all;
}

}  // namespace ccl::training
