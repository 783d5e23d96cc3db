// The Python module ccl_torch._training: ccl's training layer (C++20, in libccl) for
// ccl_torch.hooks and ccl_torch.optim. It includes no torch header (only the pybind11 torch ships):
// tensors arrive as (data pointer, element count), already checked by the Python side to be
// contiguous float32 CPU tensors, and communicators as the cclComm_t of a ccl process group
// (BackendCcl._run_exclusive hands it over while the group's queue is drained and held).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <ccl/training.hpp>
#include <cstdint>
#include <optional>
#include <vector>

#include "borrowed_comm.h"
#include "optim_bindings.h"

namespace py = pybind11;
using namespace ccl::training;
using ccl_torch::BorrowedComm;

namespace {

float* as_floats(uintptr_t address) { return reinterpret_cast<float*>(address); }

}  // namespace

PYBIND11_MODULE(_training, m) {
  m.doc() = "ccl's training layer (DDP buckets, compression, optimizers) for ccl_torch";
  // ccl::Error is a std::runtime_error: pybind11 raises it as RuntimeError with its message;
  // std::invalid_argument becomes ValueError, std::logic_error RuntimeError.

  m.def(
      "assign_buckets",
      [](const std::vector<std::pair<size_t, int>>& tensors, const std::vector<size_t>& limits,
         std::optional<std::vector<size_t>> order) {
        std::vector<TensorSpec> specs;
        for (const auto& [count, dtype] : tensors) {
          specs.push_back({count, static_cast<cclDataType_t>(dtype)});
        }
        return order ? assign_buckets(specs, limits, *order) : assign_buckets(specs, limits);
      },
      py::arg("tensors"), py::arg("limits"), py::arg("order") = py::none(),
      "Buckets of (count, cclDataType_t) tensors, as torch.distributed."
      "_compute_bucket_assignment_by_size.");

  py::class_<Compressor>(m, "Compressor")
      .def_property_readonly("name", &Compressor::name)
      .def_property_readonly("bytes_sent", &Compressor::bytes_sent)
      .def_property("error_feedback", &Compressor::error_feedback, &Compressor::set_error_feedback)
      .def(
          "all_reduce",
          [](Compressor& c, uintptr_t comm, size_t key, uintptr_t data, size_t count) {
            BorrowedComm borrowed(comm);
            c.all_reduce(borrowed.get(), key, std::span<float>(as_floats(data), count));
          },
          py::arg("comm"), py::arg("key"), py::arg("data"), py::arg("count"),
          py::call_guard<py::gil_scoped_release>(),
          "Replaces the count floats at data with their compressed average over comm's ranks.");
  m.def("make_compressor", &make_compressor, py::arg("spec"),
        "A compressor: 'topk:R', 'topk16:R', 'sign' or 'onebit'.");

  ccl_torch::bind_optim(m);
}
