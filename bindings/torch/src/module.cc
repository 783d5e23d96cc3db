// The Python module ccl_torch._C: the process group type and its creator. ccl_torch/__init__.py
// registers the creator as torch.distributed's backend "ccl".
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "process_group_ccl.h"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "ccl's torch.distributed backend (use: import ccl_torch; init_process_group('ccl'))";
  // The base class must be known to pybind11 before ours derives from it.
  py::module_::import("torch.distributed");

  py::class_<ccl_torch::ProcessGroupCcl, c10d::ProcessGroup,
             c10::intrusive_ptr<ccl_torch::ProcessGroupCcl>>(m, "ProcessGroupCcl")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout) {
             return c10::make_intrusive<ccl_torch::ProcessGroupCcl>(store, rank, size, timeout);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::call_guard<py::gil_scoped_release>())
      .def("shut_down", &ccl_torch::ProcessGroupCcl::shut_down,
           "Completes the queued operations and releases the communicator.",
           py::call_guard<py::gil_scoped_release>())
      .def(
          "_run_exclusive",
          [](ccl_torch::ProcessGroupCcl& pg, const py::function& fn) {
            py::object result;
            {
              py::gil_scoped_release release;  // while the queue drains
              pg.run_exclusive([&](cclComm_t comm) {
                py::gil_scoped_acquire acquire;
                result = fn(reinterpret_cast<uintptr_t>(comm));
              });
            }
            return result;
          },
          py::arg("fn"),
          "Calls fn(comm_handle) once every queued operation of the group completed, holding "
          "the group's queue until fn returns (for ccl_torch.hooks).");

  m.def("version", [] {
    int v = 0;
    cclGetVersion(&v);
    return v;
  });
}
