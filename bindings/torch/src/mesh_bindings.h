// ccl_torch._training's device-mesh functions (ccl_torch.mesh builds torch process groups on them)
// and ccl's pipeline schedules (examples/parallel3d runs one over torch's send and recv).
#pragma once

#include <pybind11/pybind11.h>

namespace ccl_torch {

void bind_mesh(pybind11::module_& m);

}  // namespace ccl_torch
