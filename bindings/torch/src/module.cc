// The Python module ccl_torch._C: the backend type (a torch.distributed Backend) and its creator.
// ccl_torch/__init__.py registers the creator with torch.distributed under BACKEND_NAME;
// ccl_torch/elastic.py builds on the recovery calls.
#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "backend_ccl.h"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() =
      "ccl's torch.distributed backend (use: import ccl_torch; "
      "init_process_group(ccl_torch.BACKEND))";
  // The base class must be known to pybind11 before ours derives from it.
  py::module_::import("torch.distributed");

  using ccl_torch::BackendCcl;
  py::class_<BackendCcl, c10d::Backend, c10::intrusive_ptr<BackendCcl>>(m, "BackendCcl")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout) {
             return c10::make_intrusive<BackendCcl>(store, rank, size, timeout);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::call_guard<py::gil_scoped_release>())
      .def("shut_down", &BackendCcl::shutdown,
           "Completes the queued operations and releases the communicator.",
           py::call_guard<py::gil_scoped_release>())
      .def("abort", &BackendCcl::abort,
           "Ends the group now: every operation in flight fails at once (here, and on the peers, "
           "whose group is revoked), and every later one raises RuntimeError('... the process "
           "group was aborted').",
           py::call_guard<py::gil_scoped_release>())
      .def("revoke", &BackendCcl::revoke,
           "cclCommRevoke: every pending and later operation of the group fails at once on every "
           "live rank; agree, failed_ranks and shrink still work.",
           py::call_guard<py::gil_scoped_release>())
      .def("agree", &BackendCcl::agree, py::arg("flag"),
           "cclCommAgree: the bitwise AND of the flags of the live ranks (the same on each), even "
           "if ranks die during the call.",
           py::call_guard<py::gil_scoped_release>())
      .def("failed_ranks", &BackendCcl::failed_ranks,
           "cclCommGetFailedRanks: the ranks of this group known to have failed, in increasing "
           "order.",
           py::call_guard<py::gil_scoped_release>())
      .def(
          "shrink_to",
          [](BackendCcl& pg, const std::optional<std::vector<int>>& exclude, bool abort) {
            return pg.shrink_to(exclude.value_or(std::vector<int>{}), abort);
          },
          py::arg("exclude") = py::none(), py::arg("abort") = true,
          "cclCommShrink, called by every rank not in `exclude`: a new BackendCcl of the "
          "others, in their order (new rank = old rank minus the excluded ranks below it). With "
          "abort=True (CCL_SHRINK_ABORT) what is in flight is aborted first and this group takes "
          "no more operations; exclude=None then means the ranks the survivors agree have died. "
          "A death during the shrink raises RuntimeError on every survivor; call it again.",
          py::call_guard<py::gil_scoped_release>())
      .def(
          "grow",
          [](BackendCcl& pg, int nranks, const py::bytes& unique_id) {
            std::string id = unique_id;  // with the GIL: the bytes are a Python object
            py::gil_scoped_release release;
            return pg.grow(nranks, id);
          },
          py::arg("nranks"), py::arg("unique_id"),
          "cclCommGrow by every member (each keeps its rank): a new BackendCcl of `nranks` "
          "ranks, the newcomers (grow_as_newcomer) taking ranks size()..nranks-1. All meet at "
          "`unique_id` (get_unique_id's bytes, made by a member).")
      .def(
          "_run_exclusive",
          [](BackendCcl& pg, const py::function& fn) {
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

  m.def(
      "get_unique_id", [] { return py::bytes(BackendCcl::unique_id()); },
      "cclGetUniqueId: the bytes of a new rendezvous id, for grow; this process serves the "
      "rendezvous until every rank has joined, so a rank that takes part makes it.");
  m.def(
      "grow_as_newcomer",
      [](int nranks, int rank, const py::bytes& unique_id,
         std::optional<std::chrono::milliseconds> timeout) {
        std::string id = unique_id;
        py::gil_scoped_release release;
        return BackendCcl::grow_as_newcomer(nranks, rank, id, timeout);
      },
      py::arg("nranks"), py::arg("rank"), py::arg("unique_id"), py::arg("timeout") = py::none(),
      "cclCommGrow by a newcomer (comm NULL): joins the members of a group that call "
      "BackendCcl.grow(nranks, unique_id), as `rank` (from the group's old size up to "
      "nranks - 1); returns the new BackendCcl. timeout (a timedelta) bounds every wait of "
      "the new communicator (default: CCL_TIMEOUT).");
  // What ccl says of a failed peer (cclRemoteError) or a wait that ran out (cclTimeout), as every
  // failed operation's RuntimeError quotes it: ccl_torch.elastic tells peer failures by them.
  m.attr("_peer_failure_texts") =
      py::make_tuple(cclGetErrorString(cclRemoteError), cclGetErrorString(cclTimeout));
  m.attr("UNIQUE_ID_BYTES") = CCL_UNIQUE_ID_BYTES;
  m.attr("BACKEND_NAME") = ccl_torch::kBackendName;
  m.attr("TORCH_BUILT_AGAINST") = TORCH_VERSION;
  m.def("version", [] {
    int v = 0;
    cclGetVersion(&v);
    return v;
  });
}
