// Dead-code elimination: drops ops whose values reach no result.
#pragma once

#include "compiler/passes/pass.h"

namespace tpu {

class DcePass : public Pass {
 public:
  const char* name() const override { return "dce"; }
  StatusOr<bool> Run(Graph& graph) override;
};

}  // namespace tpu
