// A pass rewrites a Graph in place and says whether it changed anything.
#pragma once

#include "base/status.h"
#include "ir/graph.h"

namespace tpu {

class Pass {
 public:
  virtual ~Pass() = default;
  virtual const char* name() const = 0;
  virtual StatusOr<bool> Run(Graph& graph) = 0;
};

}  // namespace tpu
