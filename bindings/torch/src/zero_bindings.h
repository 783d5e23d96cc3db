// ccl_torch._training's ZeRO layout (ccl_torch.zero shards torch modules on it).
#pragma once

#include <pybind11/pybind11.h>

namespace ccl_torch {

void bind_zero(pybind11::module_& m);

}  // namespace ccl_torch
