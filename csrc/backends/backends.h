// Chooses the process's backend (GetBackend()): the host executor by default, PJRT when
// TORCH_TPU_BACKEND=pjrt. The one place that knows every backend.
#pragma once

#include "runtime/device.h"
