// Chooses the process's backend (GetBackend()): the host executor by default, PJRT when
// TORCH_TPU_BACKEND=pjrt. The one place that knows every backend.
//
// The pjrt backend's plugin: TORCH_TPU_PJRT_PLUGIN (option pjrt_plugin) when set; else the first
// installed plugin of option pjrt_plugin_candidates, libtpu only where a TPU is present. The core
// cannot ask Python where packages live: torch_tpu/_backend.py computes the candidates and sets
// the option before the backend is first created (runtime/pjrt/backend.h ChoosePlugin).
#pragma once

#include "base/status.h"
#include "runtime/device.h"

namespace tpu {

// Why the process's backend has no devices: Ok when it works; else the error that stopped it
// (an unknown TORCH_TPU_BACKEND, no PJRT plugin, a plugin that failed to start). The backend
// then reports zero devices and every compile returns this error. Creates the backend.
const Status& BackendStatus();
// Whether the process's backend exists yet (options it reads once can change until then).
bool BackendCreated();

}  // namespace tpu
