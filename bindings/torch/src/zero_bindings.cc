// ZeRO's layout of ccl::training (units, equal slices, the pieces of parameters in a rank's
// slice) for ccl_torch.zero, so the torch wrapper and the C++ engine cut parameters alike.
#include "zero_bindings.h"

#include <pybind11/stl.h>

#include <ccl/training.hpp>
#include <tuple>
#include <vector>

namespace py = pybind11;
using namespace ccl::training;

namespace ccl_torch {

void bind_zero(py::module_& m) {
  m.def(
      "zero_layout",
      [](const std::vector<size_t>& counts, const std::vector<size_t>& units, int nranks,
         int rank) {
        if (counts.size() != units.size()) {
          throw py::value_error("zero_layout: " + std::to_string(counts.size()) + " counts but " +
                                std::to_string(units.size()) + " units");
        }
        if (rank < 0 || rank >= nranks) {
          throw py::value_error("zero_layout: rank " + std::to_string(rank) + " is outside [0, " +
                                std::to_string(nranks) + ")");
        }
        std::vector<ZeroParam> params;
        for (size_t i = 0; i < counts.size(); ++i) params.push_back({counts[i], false, units[i]});
        py::list out;
        for (const ZeroUnitLayout& u : zero_layout(params, nranks)) {
          py::dict d;
          d["first_param"] = u.first_param;
          d["params"] = u.params;
          d["count"] = u.count;
          d["shard"] = u.shard;
          d["offsets"] = u.offsets;
          std::vector<std::tuple<size_t, size_t, size_t, size_t>> pieces;
          for (const ZeroPiece& p : zero_pieces(u, rank)) {
            pieces.emplace_back(p.param, p.param_offset, p.shard_offset, p.count);
          }
          d["pieces"] = pieces;
          out.append(d);
        }
        return out;
      },
      py::arg("counts"), py::arg("units"), py::arg("nranks"), py::arg("rank"),
      "ccl::training::zero_layout and zero_pieces: per unit {first_param, params, count, shard "
      "(elements per rank), offsets (of its parameters in the unit's flat buffer), pieces "
      "[(param, param_offset, shard_offset, count)] of `rank`'s slice}. ValueError for units not "
      "numbered 0, 1, ... along the list or a count of 0.");
  m.def("assign_zero_units", &assign_zero_units, py::arg("counts"), py::arg("unit_bytes"),
        "ccl::training::assign_zero_units: consecutive parameters grouped up to unit_bytes.");
}

}  // namespace ccl_torch
