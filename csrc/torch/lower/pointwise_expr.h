// Expression helpers for elementwise lowerings whose values all share one shape and dtype:
// formulas such as GELU read like the PyTorch CPU kernels they must match, operation for
// operation (the order of roundings is part of the result).
#pragma once

#include "torch/lower/elementwise_util.h"

namespace tpu::torch_bridge {

class Expr {
 public:
  // `like`: a value of the shape and compute dtype every helper works in.
  Expr(Lowering& l, int like)
      : l_(l), b_(l.b()), dims_(b_.TypeOf(like).dims), t_(b_.TypeOf(like).dtype) {}

  Builder& b() { return b_; }
  DType dtype() const { return t_; }
  bool is_float() const { return IsFloat(t_); }

  // A structural constant (part of the program: 0, 1, 0.5, sqrt(2)...).
  int K(double v) { return b_.BroadcastTo(b_.Constant(v, t_), dims_); }
  // A user-given number: a runtime parameter, so changing it does not recompile.
  int P(const at::Scalar& s) { return b_.BroadcastTo(l_.Scalar(s, ToScalarType(t_)), dims_); }
  // A user-given number rounded to `storage` first, for kernels that convert it to the tensor's
  // dtype before computing (logit on bfloat16 clamps to the bfloat16-rounded eps).
  int PAs(const at::Scalar& s, at::ScalarType storage) {
    return b_.BroadcastTo(b_.ConvertIfNeeded(l_.Scalar(s, storage), t_), dims_);
  }

  int Add(int x, int y) { return b_.Binary(OpCode::kAdd, x, y); }
  int Sub(int x, int y) { return b_.Binary(OpCode::kSubtract, x, y); }
  int Mul(int x, int y) { return b_.Binary(OpCode::kMultiply, x, y); }
  int Div(int x, int y) { return b_.Binary(OpCode::kDivide, x, y); }
  int Pow(int x, int y) { return b_.Binary(OpCode::kPower, x, y); }
  // NaN-propagating, like ATen's vectorized maximum/minimum.
  int Max(int x, int y) { return b_.Binary(OpCode::kMaximum, x, y); }
  int Min(int x, int y) { return b_.Binary(OpCode::kMinimum, x, y); }
  int And(int x, int y) { return b_.Binary(OpCode::kAnd, x, y); }
  int Or(int x, int y) { return b_.Binary(OpCode::kOr, x, y); }

  int Neg(int x) { return b_.Unary(OpCode::kNegate, x); }
  int Abs(int x) { return b_.Unary(OpCode::kAbs, x); }
  int Exp(int x) { return b_.Unary(OpCode::kExp, x); }
  int Log(int x) { return b_.Unary(OpCode::kLog, x); }
  int Log1p(int x) { return b_.Unary(OpCode::kLog1p, x); }
  int Tanh(int x) { return b_.Unary(OpCode::kTanh, x); }
  int Erf(int x) { return b_.Unary(OpCode::kErf, x); }
  int Floor(int x) { return b_.Unary(OpCode::kFloor, x); }
  int Ceil(int x) { return b_.Unary(OpCode::kCeil, x); }
  // 1 / (1 + exp(-x)): the logistic op (one kernel on the host executor, within 2 ulp of it;
  // stablehlo.logistic on PJRT) rather than ATen's four-op formula.
  int Sigmoid(int x) { return b_.Unary(OpCode::kLogistic, x); }

  int Lt(int x, int y) { return b_.Compare(CompareDirection::kLT, x, y); }
  int Le(int x, int y) { return b_.Compare(CompareDirection::kLE, x, y); }
  int Gt(int x, int y) { return b_.Compare(CompareDirection::kGT, x, y); }
  int Ge(int x, int y) { return b_.Compare(CompareDirection::kGE, x, y); }
  int Eq(int x, int y) { return b_.Compare(CompareDirection::kEQ, x, y); }
  int Ne(int x, int y) { return b_.Compare(CompareDirection::kNE, x, y); }
  int IsNan(int x) { return Ne(x, x); }
  int Select(int pred, int on_true, int on_false) { return b_.Select(pred, on_true, on_false); }

 private:
  Lowering& l_;
  Builder& b_;
  Dims dims_;
  DType t_;
};

// Raises PyTorch's error for a dtype a kernel does not implement ("abs_cpu" not implemented
// for 'Bool'), with the kernel named after the tpu.
inline void CheckKernelDType(bool ok, const char* kernel, at::ScalarType t) {
  TORCH_CHECK_NOT_IMPLEMENTED(ok, "\"", kernel, "\" not implemented for '", c10::toString(t), "'");
}

// ATen's unary kernels (and clamp with number bounds, and the activations) take no out= tensor of
// another dtype than their result: "Found dtype Double but expected Float".
inline void CheckOutDType(OutArg out, at::ScalarType expected) {
  if (out.t && out.t->defined() && !out.inplace)
    TORCH_CHECK(out.t->scalar_type() == expected, "Found dtype ", out.t->scalar_type(),
                " but expected ", expected);
}

}  // namespace tpu::torch_bridge
