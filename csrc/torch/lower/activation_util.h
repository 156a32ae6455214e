// Shared by the activation lowerings (activation.cc, shrink_glu.cc): an activation of one input
// and a backward kernel of (grad, x), with ATen's dtype checks.
#pragma once

#include "torch/lower/pointwise_expr.h"

namespace tpu::torch_bridge {

enum ActFlags : int {
  kIntsOk = 1,    // integer inputs are computed in their dtype (bool is not implemented)
  kCastsOut = 2,  // out= may have another dtype (most activations require the input's)
};

// fn(Expr&, x) for an activation of `self`.
template <typename F>
LoweredResult Act(const char* op, const char* kernel, const at::Tensor& self, OutArg out, F&& fn,
                  int flags = 0) {
  at::ScalarType st = self.scalar_type();
  CheckKernelDType(at::isFloatingType(st) || ((flags & kIntsOk) && st != at::kBool), kernel, st);
  if (!(flags & kCastsOut)) CheckOutDType(out, st);
  return LowerElementwise(op, {self}, out, ResultKind::kCommon, [&](Lowering& l, const ValueList& v, DType) {
    Expr e(l, v[0]);
    return fn(e, v[0]);
  });
}

// fn(Expr&, grad, x) for a backward kernel: grad and x promote to a common dtype.
template <typename F>
LoweredResult Bwd(const char* op, const char* kernel, const at::Tensor& grad, const at::Tensor& x, OutArg out,
                  F&& fn, bool ints = false) {
  at::ScalarType common = at::result_type(grad, x);
  CheckKernelDType(at::isFloatingType(common) || (ints && common != at::kBool), kernel, common);
  return LowerElementwise(op, {grad, x}, out, ResultKind::kCommon, [&](Lowering& l, const ValueList& v, DType) {
    Expr e(l, v[0]);
    return fn(e, v[0], v[1]);
  });
}

}  // namespace tpu::torch_bridge
