// torch_tpu._C._dist: the Python face of the c10d backend, in PyTorch's c10d pybind conventions
// (the class derives from torch._C._distributed_c10d.Backend, held by c10::intrusive_ptr), so
// torch.distributed's ProcessGroup can register and call it. Defined on first use, after
// `import torch.distributed` has registered the base class.
#include <torch/csrc/utils/pybind.h>

#include "torch/distributed/backend.h"
#include "torch/distributed/bindings.h"

namespace py = pybind11;

namespace tpu::dist {

void AddBindings(py::module_& m) {
  m.def("_dist_define", [m]() mutable -> py::object {
    if (py::hasattr(m, "_dist")) return m.attr("_dist");
    py::module_::import("torch.distributed");
    py::module_ d = m.def_submodule("_dist", "torch_tpu's c10d backend");
    py::class_<TpuBackend, c10d::Backend, c10::intrusive_ptr<TpuBackend>>(d, "TpuBackend")
        .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, double timeout,
                         std::string name, std::string transport, py::object gloo) {
               TpuBackend::Config c;
               c.store = store;
               c.rank = rank;
               c.size = size;
               c.timeout = timeout;
               c.name = std::move(name);
               c.transport = std::move(transport);
               if (!gloo.is_none()) c.gloo = gloo.cast<c10::intrusive_ptr<c10d::Backend>>();
               py::gil_scoped_release release;  // the rendezvous waits on the store
               return c10::make_intrusive<TpuBackend>(c);
             }),
             py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"), py::arg("name"),
             py::arg("transport"), py::arg("gloo") = py::none())
        .def_property_readonly("transport", &TpuBackend::transport_name)
        // What torch.distributed's _set_pg_timeout calls on Gloo's and NCCL's backends (_compat.py
        // routes it here for tpu): the timeout of the collectives issued from now on.
        .def("_set_default_timeout", [](TpuBackend& b, py::object timedelta) {
          double seconds = timedelta.attr("total_seconds")().cast<double>();
          b.setTimeout(std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
        })
        .def_property_readonly("timeout", &TpuBackend::timeout_seconds);
    return py::object(d);
  });
}

}  // namespace tpu::dist
