// Verifier: structural checks every program passes before compilation.
#pragma once

#include "base/status.h"
#include "ir/graph.h"

namespace tpu {

Status Verify(const Graph& g);

}  // namespace tpu
