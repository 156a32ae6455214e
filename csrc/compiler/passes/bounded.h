// Makes a program with bounded dims static (Note [Bounded dims in the IR], ir/types.h), for
// backends that run static shapes (the host executor): every value keeps its padded layout, each
// bounded dim's runtime size becomes an i32 value of the program (from the set_dimension_size
// that set it), get_dimension_size reads that value, and before an op that combines positions
// along a bounded dim the operand's padding is replaced with the op's neutral value -- a reduce's
// init value, zero for a dot_general's contraction -- so it never reaches a result (as XLA's
// dynamic padder does). A program without bounded dims is left as it is.
#pragma once

#include "compiler/passes/pass.h"

namespace tpu {

class BoundedDimsPass : public Pass {
 public:
  const char* name() const override { return "bounded-dims"; }
  StatusOr<bool> Run(Graph& graph) override;
};

}  // namespace tpu
