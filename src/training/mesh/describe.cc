// describe_mesh: the mesh as text, for a log or a launch script's output: who is where, and
// which transport each group's pairs use (a tp group on "tcp" is a launch mistake to see early).
#include <algorithm>
#include <sstream>
#include <string>

#include "ccl/training/mesh.hpp"

namespace ccl::training {

namespace {

std::string locality_text(const std::vector<int>& key) {
  if (key.empty()) return "-";
  std::string text;
  for (std::size_t i = 0; i < key.size(); ++i) {
    if (i != 0) text += '.';
    text += std::to_string(key[i]);
  }
  return text;
}

std::string padded(const std::string& text, std::size_t width) {
  return text + std::string(width > text.size() ? width - text.size() : 0, ' ');
}

void describe_ranks(std::ostringstream& out, const MeshPlacement& placement,
                    std::span<const MeshPlace> places) {
  std::size_t host_width = 4;
  std::size_t locality_width = 8;
  for (const MeshPlace& p : places) {
    host_width = std::max(host_width, p.host.size());
    locality_width = std::max(locality_width, locality_text(p.locality).size());
  }
  out << "rank  " << padded("host", host_width) << "  " << padded("locality", locality_width)
      << "  tp  pp  dp\n";
  for (std::size_t r = 0; r < placement.ranks.size(); ++r) {
    const MeshCoord& c = placement.ranks[r].coord;
    const MeshPlace& p = places[r];
    out << padded(std::to_string(r), 4) << "  " << padded(p.host, host_width) << "  "
        << padded(locality_text(p.locality), locality_width) << "  "
        << padded(std::to_string(c.tp), 2) << "  " << padded(std::to_string(c.pp), 2) << "  "
        << c.dp << "\n";
  }
}

void describe_groups(std::ostringstream& out, const MeshPlacement& placement, MeshAxis axis,
                     const MeshTransportOf& transport_of) {
  const std::vector<std::vector<int>> groups = placement.groups(axis);
  out << mesh_axis_name(axis) << " groups (" << groups.size() << "):\n";
  for (std::size_t g = 0; g < groups.size(); ++g) {
    out << "  " << mesh_axis_name(axis) << g << ": ranks";
    for (int r : groups[g]) out << ' ' << r;
    if (transport_of && groups[g].size() > 1) {
      out << "  transports";
      for (std::size_t i = 0; i < groups[g].size(); ++i) {
        for (std::size_t j = i + 1; j < groups[g].size(); ++j) {
          const std::string name = transport_of(axis, groups[g][i], groups[g][j]);
          out << ' ' << groups[g][i] << '-' << groups[g][j] << ' ' << (name.empty() ? "?" : name);
        }
      }
    }
    out << "\n";
  }
}

}  // namespace

std::string describe_mesh(const MeshPlacement& placement, std::span<const MeshPlace> places,
                          const MeshTransportOf& transport_of) {
  if (places.size() != placement.ranks.size()) {
    throw Error(cclInvalidArgument, "ccl::training::describe_mesh: places.size() " +
                                        std::to_string(places.size()) +
                                        " must equal the placement's rank count " +
                                        std::to_string(placement.ranks.size()));
  }
  const MeshShape& s = placement.shape;
  std::ostringstream out;
  out << "device mesh: " << placement.ranks.size() << " ranks = tp " << s.tp << " x pp " << s.pp
      << " x dp " << s.dp << " (tp innermost, pp outermost)\n";
  describe_ranks(out, placement, places);
  for (MeshAxis axis : {MeshAxis::Tp, MeshAxis::Pp, MeshAxis::Dp}) {
    describe_groups(out, placement, axis, transport_of);
  }
  return out.str();
}

}  // namespace ccl::training
