// Rematerialization: recomputes a large elementwise value just before a late use, from inputs that
// are live there anyway, instead of keeping it in memory across the long stretch between its uses
// (Note [Rematerialization] in remat.cc).
#pragma once

#include <cstdint>

#include "compiler/passes/pass.h"

namespace tpu {

class RematPass : public Pass {
 public:
  struct Limits {
    int64_t min_bytes = 32 << 10;  // smaller values are not worth the recompute
    int min_gap = 128;             // ops between two uses (or the definition and a use)
    int max_chain = 24;            // ops recomputed for one value
  };
  RematPass() = default;
  explicit RematPass(Limits limits) : limits_(limits) {}
  const char* name() const override { return "remat"; }
  StatusOr<bool> Run(Graph& graph) override;

 private:
  Limits limits_;
};

}  // namespace tpu
