// place_mesh and describe_mesh of ccl::training for ccl_torch.mesh, which makes the torch process
// groups of the placement (torch.distributed.new_group), so the placement has one implementation.
// Places cross as (host, locality) pairs, placements as plain lists and dicts. pipeline_schedule
// gives a pipeline stage's actions (examples/parallel3d runs them over torch's send/recv).
#include "mesh_bindings.h"

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <ccl/training.hpp>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "borrowed_comm.h"

namespace py = pybind11;
using namespace ccl::training;

namespace ccl_torch {

namespace {

using PlaceTuple = std::pair<std::string, std::vector<int>>;

std::vector<MeshPlace> places_of(const std::vector<PlaceTuple>& tuples) {
  std::vector<MeshPlace> places;
  places.reserve(tuples.size());
  for (const auto& [host, locality] : tuples) places.push_back({host, locality});
  return places;
}

py::dict placement_dict(const MeshPlacement& m) {
  py::dict out;
  out["order"] = m.order;
  std::vector<std::tuple<int, int, int>> coords;
  for (const MeshRank& r : m.ranks) coords.emplace_back(r.coord.tp, r.coord.pp, r.coord.dp);
  out["coords"] = coords;
  py::dict groups;
  for (MeshAxis axis : {MeshAxis::Tp, MeshAxis::Pp, MeshAxis::Dp}) {
    groups[mesh_axis_name(axis)] = m.groups(axis);
  }
  out["groups"] = groups;
  return out;
}

PipelineKind pipeline_kind(const std::string& name) {
  if (name == "gpipe") return PipelineKind::GPipe;
  if (name == "1f1b") return PipelineKind::OneFOneB;
  if (name == "interleaved") return PipelineKind::Interleaved;
  throw std::invalid_argument(
      "ccl_torch._training.pipeline_schedule: kind must be 'gpipe', "
      "'1f1b' or 'interleaved', not '" +
      name + "'");
}

}  // namespace

void bind_mesh(py::module_& m) {
  m.def(
      "place_mesh",
      [](int tp, int pp, int dp, const std::vector<PlaceTuple>& places) {
        return placement_dict(place_mesh({.tp = tp, .pp = pp, .dp = dp}, places_of(places)));
      },
      py::arg("tp"), py::arg("pp"), py::arg("dp"), py::arg("places"),
      "ccl::training::place_mesh: places[r] = (host, locality list) of world rank r. Returns "
      "{'order': world ranks in mesh order, 'coords': (tp, pp, dp) by world rank, 'groups': "
      "{'tp'|'pp'|'dp': every group, each in group-rank order}}. RuntimeError (ccl::Error, "
      "cclInvalidArgument) naming the argument for a bad shape.");
  m.def(
      "describe_mesh",
      [](int tp, int pp, int dp, const std::vector<PlaceTuple>& places,
         const std::map<std::tuple<std::string, int, int>, std::string>& transports) {
        const std::vector<MeshPlace> p = places_of(places);
        const MeshPlacement placement = place_mesh({.tp = tp, .pp = pp, .dp = dp}, p);
        MeshTransportOf transport_of;
        if (!transports.empty()) {
          transport_of = [&transports](MeshAxis axis, int a, int b) -> std::string {
            const auto it = transports.find({mesh_axis_name(axis), a, b});
            return it == transports.end() ? std::string() : it->second;
          };
        }
        return describe_mesh(placement, p, transport_of);
      },
      py::arg("tp"), py::arg("pp"), py::arg("dp"), py::arg("places"),
      py::arg("transports") = std::map<std::tuple<std::string, int, int>, std::string>{},
      "ccl::training::describe_mesh; transports maps (axis, world rank a, world rank b) to the "
      "transport a uses to b.");
  m.def(
      "peer_transport",
      [](uintptr_t comm, int peer) { return BorrowedComm(comm).get().peer_transport(peer); },
      py::arg("comm"), py::arg("peer"),
      "The transport the communicator (a BackendCcl._run_exclusive handle) uses to `peer`.");
  m.def(
      "pipeline_schedule",
      [](const std::string& kind, int stages, int microbatches, int stage, int virtual_stages) {
        std::vector<std::tuple<std::string, int, int>> actions;
        for (const PipelineAction& a :
             pipeline_schedule(pipeline_kind(kind), stages, microbatches, stage, virtual_stages)) {
          actions.emplace_back(a.kind == PipelineAction::Forward ? "forward" : "backward",
                               a.microbatch, a.chunk);
        }
        return actions;
      },
      py::arg("kind"), py::arg("stages"), py::arg("microbatches"), py::arg("stage"),
      py::arg("virtual_stages") = 1,
      "ccl::training::pipeline_schedule: the ordered actions of pipeline stage `stage` of "
      "`stages` as [('forward'|'backward', microbatch, chunk)]; kind 'gpipe', '1f1b' or "
      "'interleaved'. ValueError for a bad kind or argument.");
}

}  // namespace ccl_torch
