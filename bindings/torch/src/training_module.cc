// The Python module ccl_torch._training: ccl's training layer (C++20, in libccl) for
// ccl_torch.hooks and ccl_torch.optim. It includes no torch header (torch 1.13's are C++17):
// tensors arrive as (data pointer, element count), already checked by the Python side to be
// contiguous float32 CPU tensors, and communicators as the cclComm_t of a ccl process group
// (ProcessGroupCcl._run_exclusive hands it over while the group's queue is drained and held).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <ccl/training.hpp>
#include <cstdint>
#include <optional>
#include <vector>

#include "borrowed_comm.h"
#include "mesh_bindings.h"

namespace py = pybind11;
using namespace ccl::training;
using ccl_torch::BorrowedComm;

namespace {

float* as_floats(uintptr_t address) { return reinterpret_cast<float*>(address); }

// (param address, grad address, count, exclude) tuples, as the Python optimizers pass them.
using ParamTuple = std::tuple<uintptr_t, uintptr_t, size_t, bool>;

std::vector<ParamRef> refs(const std::vector<ParamTuple>& params) {
  std::vector<ParamRef> out;
  out.reserve(params.size());
  for (const auto& [p, g, count, exclude] : params) {
    out.push_back({as_floats(p), as_floats(g), count, exclude});
  }
  return out;
}

}  // namespace

PYBIND11_MODULE(_training, m) {
  m.doc() = "ccl's training layer (DDP buckets, compression, LAMB/LARS) for ccl_torch";
  // ccl::Error is a std::runtime_error: pybind11 raises it as RuntimeError with its message;
  // std::invalid_argument becomes ValueError, std::logic_error RuntimeError.
  ccl_torch::bind_mesh(m);

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

  py::class_<Lamb>(m, "Lamb")
      .def(py::init([](double lr, double beta1, double beta2, double eps, double weight_decay,
                       double clamp) {
             return Lamb(LambOptions{.lr = lr,
                                     .beta1 = beta1,
                                     .beta2 = beta2,
                                     .eps = eps,
                                     .weight_decay = weight_decay,
                                     .clamp = clamp});
           }),
           py::arg("lr"), py::arg("beta1"), py::arg("beta2"), py::arg("eps"),
           py::arg("weight_decay"), py::arg("clamp"))
      .def(
          "step", [](Lamb& o, const std::vector<ParamTuple>& params) { o.step(refs(params)); },
          py::call_guard<py::gil_scoped_release>())
      .def("set_lr", &Lamb::set_lr)
      .def_property_readonly("steps", &Lamb::steps)
      .def_property_readonly("last_trust_ratios", &Lamb::last_trust_ratios);

  py::class_<Lars>(m, "Lars")
      .def(py::init([](double lr, double momentum, double weight_decay, double trust_coefficient,
                       double eps) {
             return Lars(LarsOptions{.lr = lr,
                                     .momentum = momentum,
                                     .weight_decay = weight_decay,
                                     .trust_coefficient = trust_coefficient,
                                     .eps = eps});
           }),
           py::arg("lr"), py::arg("momentum"), py::arg("weight_decay"),
           py::arg("trust_coefficient"), py::arg("eps"))
      .def(
          "step", [](Lars& o, const std::vector<ParamTuple>& params) { o.step(refs(params)); },
          py::call_guard<py::gil_scoped_release>())
      .def("set_lr", &Lars::set_lr)
      .def_property_readonly("steps", &Lars::steps)
      .def_property_readonly("last_trust_ratios", &Lars::last_trust_ratios);
}
