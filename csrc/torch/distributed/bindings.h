#pragma once

#include <pybind11/pybind11.h>

namespace tpu::dist {

// Adds _C._dist_define(), which defines the submodule _C._dist (TpuBackend) once and returns it.
void AddBindings(pybind11::module_& m);

}  // namespace tpu::dist
