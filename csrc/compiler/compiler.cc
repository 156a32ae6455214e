#include "compiler/compiler.h"

#include <algorithm>

#include "base/hash.h"
#include "base/options.h"
#include "compiler/passes/dce.h"
#include "compiler/passes/remat.h"
#include "ir/verifier.h"

namespace tpu {

Status Optimize(Graph& graph) {
  TPU_RETURN_IF_ERROR(Verify(graph));
  for (size_t i = 0; i < graph.ops.size(); ++i) graph.ops[i].src = static_cast<int32_t>(i);
  DcePass dce;
  TPU_ASSIGN_OR_RETURN(bool changed, dce.Run(graph));
  if (Flags().host_remat) {
    RematPass remat;
    TPU_ASSIGN_OR_RETURN(changed, remat.Run(graph));
    if (changed) TPU_RETURN_IF_ERROR(dce.Run(graph).status());  // originals read by nothing early
  }
  return Status::Ok();
}

int64_t EstimateWork(const Graph& g) {
  int64_t work = 0;
  for (const Op& op : g.ops) {
    int64_t n = op.type.NumElements();
    switch (op.code) {
      case OpCode::kDotGeneral:
        for (int64_t d : op.attrs.c) n *= g.TypeOf(op.operands[0]).dims[d];
        break;
      case OpCode::kConvolution:
        // An upper bound (each output element reads a window of the kernel, not all of it).
        n *= g.TypeOf(op.operands[1]).NumElements();
        break;
      default:
        if (!op.operands.empty()) n = std::max(n, g.TypeOf(op.operands[0]).NumElements());
        break;
    }
    work += n;
  }
  return work;
}

}  // namespace tpu
