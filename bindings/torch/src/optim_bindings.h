// ccl_torch._training's optimizers (ccl::training's Optimizer and its SGD, Adam, LAMB and LARS,
// include/ccl/training/optim.hpp): ccl_torch.optim wraps Lamb and Lars as torch optimizers;
// all four step whole tensors or, over a ccl process group, this rank's shards (ZeRO).
#pragma once

#include <pybind11/pybind11.h>

namespace ccl_torch {

void bind_optim(pybind11::module_& m);

}  // namespace ccl_torch
