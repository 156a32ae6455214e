// Prints a Graph as StableHLO MLIR text (generic op syntax), which XLA's StableHLO parser accepts.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "ir/graph.h"

namespace tpu {

std::string PrintStableHlo(const Graph& g, const std::string& name = "main");

// A parameter printed as a constant of the function instead of as one of its arguments (an
// exported program with its weights inlined): `bytes` are its elements, dense, little-endian
// (bool: one byte each, 0 or 1).
struct ConstantParam {
  int param;
  std::string bytes;
};
// The arguments are the remaining parameters, in order. InvalidArgument when a constant's
// parameter is out of range or repeated, or its byte count is not its type's.
StatusOr<std::string> PrintStableHlo(const Graph& g, const std::string& name,
                                     const std::vector<ConstantParam>& constants);

}  // namespace tpu
