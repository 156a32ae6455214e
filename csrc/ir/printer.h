// Prints a Graph as StableHLO MLIR text (generic op syntax), which XLA's StableHLO parser accepts.
#pragma once

#include <string>

#include "ir/graph.h"

namespace tpu {

std::string PrintStableHlo(const Graph& g, const std::string& name = "main");

}  // namespace tpu
