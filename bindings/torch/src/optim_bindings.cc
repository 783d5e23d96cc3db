// The optimizers of ccl_torch._training (optim_bindings.h). Tensors cross as addresses, already
// checked by the Python side to be contiguous float32 CPU tensors: a ref is a tuple
// (param address, grad address, count, exclude[, tensor]).
//
// step releases the GIL: it touches only the caller's floats and the optimizer. step_sharded
// keeps it: it runs inside BackendCcl._run_exclusive's callback, which holds the group's
// operation lock, and a Python thread that held the GIL while it waited for that lock (any of
// the group's calls that does not release the GIL first) would deadlock with this call's
// re-acquiring the GIL at its end. Holding the GIL costs the other Python threads the length of
// one all-reduce of a few doubles per tensor.
#include "optim_bindings.h"

#include <pybind11/stl.h>

#include <ccl/training.hpp>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "borrowed_comm.h"

namespace py = pybind11;
using namespace ccl::training;

namespace {

float* as_floats(uintptr_t address) { return reinterpret_cast<float*>(address); }

// The refs of a list of tuples: 4 or 5 fields, or exactly 5 where each must name its tensor
// (step_sharded). Needs the GIL.
std::vector<ParamRef> refs(const py::iterable& tuples, bool sharded) {
  std::vector<ParamRef> out;
  for (const py::handle item : tuples) {
    const auto t = item.cast<py::tuple>();
    if (t.size() != 5 && (sharded || t.size() != 4)) {
      throw py::value_error(std::string("ccl_torch._training: a ref is (param address, grad ") +
                            "address, count, exclude" + (sharded ? ", tensor)" : "[, tensor])") +
                            ", not a tuple of " + std::to_string(t.size()));
    }
    out.push_back({.param = as_floats(t[0].cast<uintptr_t>()),
                   .grad = as_floats(t[1].cast<uintptr_t>()),
                   .count = t[2].cast<size_t>(),
                   .exclude = t[3].cast<bool>(),
                   .tensor = t.size() == 5 ? t[4].cast<size_t>() : 0});
  }
  return out;
}

}  // namespace

namespace ccl_torch {

void bind_optim(py::module_& m) {
  // std::invalid_argument (bad options, refs or state) reaches Python as ValueError.
  py::class_<Optimizer>(m, "Optimizer",
                        "ccl::training::Optimizer: SGD, Adam, LAMB and LARS on float32 tensors "
                        "given as (param address, grad address, count, exclude[, tensor]) refs.")
      .def(
          "step",
          [](Optimizer& o, const py::iterable& params) {
            const std::vector<ParamRef> r = refs(params, false);
            py::gil_scoped_release release;
            o.step(r);
          },
          py::arg("refs"), "One step over whole tensors (a ref's tensor field is ignored).")
      .def(
          "step_sharded",
          [](Optimizer& o, const py::iterable& pieces, size_t tensors, uintptr_t comm) {
            const std::vector<ParamRef> r = refs(pieces, true);
            BorrowedComm borrowed(comm);
            o.step_sharded(r, tensors, borrowed.get());  // with the GIL: see the file's head
          },
          py::arg("refs"), py::arg("tensors"), py::arg("comm"),
          "One step over this rank's pieces (refs of 5 fields, the last the piece's tensor, "
          "below `tensors`) of tensors sharded over the group whose handle a "
          "BackendCcl._run_exclusive callback got; every rank of the group calls it.")
      .def("set_lr", &Optimizer::set_lr, py::arg("lr"))
      .def_property_readonly("lr", &Optimizer::lr)
      .def_property_readonly("steps", &Optimizer::steps)
      .def_property_readonly("state_bytes", &Optimizer::state_bytes,
                             "Bytes of state held (moments, momentum buffers).")
      .def(
          "save_state",
          [](const Optimizer& o, const py::iterable& params) {
            const std::vector<char> blob = o.save_state(refs(params, false));
            return py::bytes(blob.data(), blob.size());
          },
          py::arg("refs"), "The step count and these refs' state, as bytes for load_state.")
      .def(
          "load_state",
          [](Optimizer& o, const py::iterable& params, const py::bytes& state) {
            const std::string bytes = state;
            o.load_state(refs(params, false), std::span<const char>(bytes.data(), bytes.size()));
          },
          py::arg("refs"), py::arg("state"),
          "Restores what save_state returned for refs of the same counts.");

  py::class_<Sgd, Optimizer>(m, "Sgd").def(
      py::init(
          [](double lr, double momentum, double dampening, double weight_decay, bool nesterov) {
            return Sgd(SgdOptions{.lr = lr,
                                  .momentum = momentum,
                                  .dampening = dampening,
                                  .weight_decay = weight_decay,
                                  .nesterov = nesterov});
          }),
      py::arg("lr") = SgdOptions{}.lr, py::arg("momentum") = 0.0, py::arg("dampening") = 0.0,
      py::arg("weight_decay") = 0.0, py::arg("nesterov") = false, "torch.optim.SGD's update.");

  py::class_<Adam, Optimizer>(m, "Adam").def(
      py::init([](double lr, double beta1, double beta2, double eps, double weight_decay,
                  bool decoupled) {
        return Adam(AdamOptions{.lr = lr,
                                .beta1 = beta1,
                                .beta2 = beta2,
                                .eps = eps,
                                .weight_decay = weight_decay,
                                .decoupled = decoupled});
      }),
      py::arg("lr") = AdamOptions{}.lr, py::arg("beta1") = AdamOptions{}.beta1,
      py::arg("beta2") = AdamOptions{}.beta2, py::arg("eps") = AdamOptions{}.eps,
      py::arg("weight_decay") = 0.0, py::arg("decoupled") = false,
      "torch.optim.Adam's update, or AdamW's with decoupled=True.");

  py::class_<Lamb, Optimizer>(m, "Lamb")
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
      .def_property_readonly("last_trust_ratios", &Lamb::last_trust_ratios);

  py::class_<Lars, Optimizer>(m, "Lars")
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
      .def_property_readonly("last_trust_ratios", &Lars::last_trust_ratios);
}

}  // namespace ccl_torch
