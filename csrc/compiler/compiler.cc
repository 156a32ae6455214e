#include "compiler/compiler.h"

#include <algorithm>

#include "base/hash.h"
#include "base/options.h"
#include "compiler/passes/bounded.h"
#include "compiler/passes/dce.h"
#include "compiler/passes/remat.h"
#include "ir/verifier.h"
#include "ir/window.h"

namespace tpu {

Status Optimize(Graph& graph) {
  TPU_RETURN_IF_ERROR(Verify(graph));
  for (size_t i = 0; i < graph.ops.size(); ++i) graph.ops[i].src = static_cast<int32_t>(i);
  TPU_RETURN_IF_ERROR(BoundedDimsPass().Run(graph).status());  // the host runs static shapes
  DcePass dce;
  TPU_ASSIGN_OR_RETURN(bool changed, dce.Run(graph));
  if (Flags().host_remat) {
    RematPass remat;
    TPU_ASSIGN_OR_RETURN(changed, remat.Run(graph));
    if (changed) TPU_RETURN_IF_ERROR(dce.Run(graph).status());  // originals read by nothing early
  }
  return Status::Ok();
}

namespace {

// A dot_general's multiply-adds per result element: the product of its contracting dims.
int64_t ContractedSize(const Graph& g, const Op& dot) {
  int64_t k = 1;
  for (int64_t d : dot.attrs.c) k *= g.TypeOf(dot.operands[0]).dims[d];
  return k;
}

}  // namespace

int64_t EstimateWork(const Graph& g) {
  int64_t work = 0;
  for (const Op& op : g.ops) {
    int64_t n = op.type.NumElements();
    switch (op.code) {
      case OpCode::kDotGeneral:
        n *= ContractedSize(g, op);
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

int64_t EstimateFlops(const Graph& g) {
  int64_t flops = 0;
  for (const Op& op : g.ops) {
    const int64_t out = op.type.NumElements();
    if (op.code == OpCode::kDotGeneral) {
      flops += 2 * out * ContractedSize(g, op);
    } else if (op.code == OpCode::kConvolution) {
      // Each output element multiplies a kernel window: the kernel's elements per output feature.
      const TensorType& kernel = g.TypeOf(op.operands[1]);
      const int64_t features = kernel.dims[ConvolutionSpec::FromAttrs(op.attrs).dn.kernel_output_feature];
      flops += 2 * out * (features > 0 ? kernel.NumElements() / features : 0);
    } else if (GetOpKind(op.code) != OpKind::Structural && op.code != OpCode::kParameterPlaceholder &&
               op.code != OpCode::kConstant) {
      flops += 16 * out;
    }
  }
  return flops;
}

}  // namespace tpu
