// Version-specific code for the torch releases we support (2.10 - 2.14) lives here only.
#pragma once

#include <torch/version.h>

#define TPU_TORCH_VERSION (TORCH_VERSION_MAJOR * 100 + TORCH_VERSION_MINOR)

namespace tpu::compat {

// torch 2.10+ registers a default AutogradPrivateUse1 fallback; nothing to do for those.
constexpr bool kHasDefaultAutogradFallback = TPU_TORCH_VERSION >= 210;

}  // namespace tpu::compat
