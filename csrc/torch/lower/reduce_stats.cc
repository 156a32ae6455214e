// Statistical reductions: var / std (and their _mean forms), logsumexp, vector norms.
// All compute in the result's opmath type (float32 for bfloat16/float16) and round once.
#include <ATen/ops/linalg_vector_norm.h>
#include <ATen/ops/linalg_vector_norm_meta.h>
#include <ATen/ops/norm_meta.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

#include "torch/lower/reduce_util.h"

namespace tpu::torch_bridge {
namespace {

using Axes = Dims;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

int Bin(Builder& b, OpCode op, int x, int y) { return b.Binary(op, x, y); }

// A runtime scalar broadcast to the shape of `like`.
int ScalarAs(Lowering& l, double v, at::ScalarType t, int like) {
  Dims dims = l.b().TypeOf(like).dims;  // a copy: adding the parameter grows the type table
  return l.b().BroadcastTo(l.Scalar(v, t), dims);
}

// ---- var / std -----------------------------------------------------------------------------------
// Two passes, as PyTorch's CPU does for whole-tensor reductions: the mean, then the sum of squared
// deviations divided by max(0, N - correction) (0 gives inf/nan, like the CPU).
void LowerVar(const char* op, const at::Tensor& self, const Axes& axes, double correction, bool take_sqrt,
              const at::Tensor& var_out, const at::Tensor* mean_out) {
  if (var_out.numel() == 0) return;
  if (self.numel() == 0) {
    const_cast<at::Tensor&>(var_out).fill_(kNaN);
    if (mean_out) const_cast<at::Tensor&>(*mean_out).fill_(kNaN);
    return;
  }
  at::ScalarType compute = OpMath(var_out.scalar_type());
  Lowering l(op);
  Builder& b = l.b();
  int x = l.Input(self, compute);
  Dims dims = ToDims(self.sizes());
  int64_t n = ReducedCount(self, axes);
  int sum = ReduceAlong(l, x, axes, ReduceKind::kAdd);
  int mean = Bin(b, OpCode::kDivide, sum, b.ScalarLike(static_cast<double>(n), sum));
  int dev = Bin(b, OpCode::kSubtract, x, Unreduce(b, mean, dims, axes));
  int ss = ReduceAlong(l, Bin(b, OpCode::kMultiply, dev, dev), axes, ReduceKind::kAdd);
  // The divisor changes with `correction`: a runtime scalar, so it does not recompile.
  int divisor = ScalarAs(l, std::max(0.0, static_cast<double>(n) - correction), compute, ss);
  int var = Bin(b, OpCode::kDivide, ss, divisor);
  if (take_sqrt) var = b.Unary(OpCode::kSqrt, var);
  OutputReduced(l, var, var_out);
  if (mean_out) OutputReduced(l, mean, *mean_out);
  l.Run();
}

void CheckVarInput(const char* what, const at::Tensor& self) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) || at::isComplexType(self.scalar_type()), what,
              " only support floating point and complex dtypes");
}

at::Tensor& VarOut(const char* op, bool take_sqrt, const at::Tensor& self, at::OptionalIntArrayRef dim,
                   const std::optional<at::Scalar>& correction, bool keepdim, at::Tensor& out) {
  CheckVarInput("std and var", self);
  Axes axes = ReduceAxes(self, dim);
  TORCH_CHECK(at::canCast(self.scalar_type(), out.scalar_type()), "result type ", self.scalar_type(),
              " can't be cast to the desired output type ", out.scalar_type());
  ResizeOut(out, ReducedShape(self, axes, keepdim));
  LowerVar(op, self, axes, correction.value_or(1).toDouble(), take_sqrt, out, nullptr);
  return out;
}
at::Tensor Var(const char* op, bool take_sqrt, const at::Tensor& self, at::OptionalIntArrayRef dim,
               const std::optional<at::Scalar>& correction, bool keepdim) {
  CheckVarInput("std and var", self);
  Axes axes = ReduceAxes(self, dim);
  at::Tensor out = EmptyLike(ReducedShape(self, axes, keepdim), c10::toRealValueType(self.scalar_type()), self);
  LowerVar(op, self, axes, correction.value_or(1).toDouble(), take_sqrt, out, nullptr);
  return out;
}
std::tuple<at::Tensor, at::Tensor> VarMean(const char* what, const char* op, bool take_sqrt, const at::Tensor& self,
                                           at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction,
                                           bool keepdim) {
  CheckVarInput(what, self);
  Axes axes = ReduceAxes(self, dim);
  auto shape = ReducedShape(self, axes, keepdim);
  at::Tensor var = EmptyLike(shape, c10::toRealValueType(self.scalar_type()), self);
  at::Tensor mean = EmptyLike(shape, self.scalar_type(), self);
  LowerVar(op, self, axes, correction.value_or(1).toDouble(), take_sqrt, var, &mean);
  return {var, mean};
}

at::Tensor var(const at::Tensor& s, at::OptionalIntArrayRef d, const std::optional<at::Scalar>& c, bool k) {
  return Var("aten::var", false, s, d, c, k);
}
at::Tensor std_(const at::Tensor& s, at::OptionalIntArrayRef d, const std::optional<at::Scalar>& c, bool k) {
  return Var("aten::std", true, s, d, c, k);
}
at::Tensor& var_out(const at::Tensor& s, at::OptionalIntArrayRef d, const std::optional<at::Scalar>& c, bool k,
                    at::Tensor& out) {
  return VarOut("aten::var", false, s, d, c, k, out);
}
at::Tensor& std_out(const at::Tensor& s, at::OptionalIntArrayRef d, const std::optional<at::Scalar>& c, bool k,
                    at::Tensor& out) {
  return VarOut("aten::std", true, s, d, c, k, out);
}
std::tuple<at::Tensor, at::Tensor> var_mean(const at::Tensor& s, at::OptionalIntArrayRef d,
                                            const std::optional<at::Scalar>& c, bool k) {
  return VarMean("var_mean", "aten::var_mean", false, s, d, c, k);
}
std::tuple<at::Tensor, at::Tensor> std_mean(const at::Tensor& s, at::OptionalIntArrayRef d,
                                            const std::optional<at::Scalar>& c, bool k) {
  return VarMean("std_mean", "aten::std_mean", true, s, d, c, k);
}

// ---- logsumexp -----------------------------------------------------------------------------------
// log(sum(exp(x - m))) + m with m = max(x), m taken as 0 where it is infinite (so all -inf gives
// -inf and a +inf gives inf instead of nan), as ATen does.
void LowerLogSumExp(const at::Tensor& self, const Axes& axes, const at::Tensor& out) {
  if (out.numel() == 0) return;
  if (self.numel() == 0) {
    const_cast<at::Tensor&>(out).fill_(-kInf);
    return;
  }
  at::ScalarType rt = out.scalar_type();
  Lowering l("aten::logsumexp");
  Builder& b = l.b();
  int x = b.ConvertIfNeeded(l.Input(self, rt), ToDType(OpMath(rt)));
  int m = ReduceAlong(l, x, axes, ReduceKind::kMax);
  int m_inf = b.Compare(CompareDirection::kEQ, b.Unary(OpCode::kAbs, m), b.ScalarLike(kInf, m));
  m = b.Select(m_inf, b.ScalarLike(0, m), m);
  int e = b.Unary(OpCode::kExp, Bin(b, OpCode::kSubtract, x, Unreduce(b, m, ToDims(self.sizes()), axes)));
  int r = Bin(b, OpCode::kAdd, b.Unary(OpCode::kLog, ReduceAlong(l, e, axes, ReduceKind::kAdd)), m);
  OutputReduced(l, r, out);
  l.Run();
}

at::Tensor& logsumexp_out(const at::Tensor& self, at::IntArrayRef dim, bool keepdim, at::Tensor& out) {
  TORCH_CHECK(at::isFloatingType(out.scalar_type()),
              "logsumexp(): Expected floating point type for result tensor, but got: ", out.scalar_type());
  Axes axes = ReduceAxes(self, dim);
  ResizeOut(out, ReducedShape(self, axes, keepdim));
  LowerLogSumExp(self, axes, out);
  return out;
}
at::Tensor logsumexp(const at::Tensor& self, at::IntArrayRef dim, bool keepdim) {
  // Integer inputs give the default float dtype.
  at::ScalarType rt = at::isIntegralType(self.scalar_type(), /*includeBool=*/true)
                          ? at::typeMetaToScalarType(at::get_default_dtype()) : self.scalar_type();
  Axes axes = ReduceAxes(self, dim);
  at::Tensor out = EmptyLike(ReducedShape(self, axes, keepdim), rt, self);
  LowerLogSumExp(self, axes, out);
  return out;
}

// ---- vector norms --------------------------------------------------------------------------------
// ord 0: count of nonzeros; 1: sum |x|; 2: sqrt(sum x^2); inf / -inf: max / min |x| (NaN
// propagates); otherwise (sum |x|^p)^(1/p). The input is converted to the result dtype first.
void LowerVectorNorm(const at::Tensor& self, const at::Scalar& ord_scalar, const Axes& axes, const at::Tensor& out) {
  if (out.numel() == 0) return;
  if (self.numel() == 0) {
    // The meta function rejected the orders without an identity; the rest give 0.
    const_cast<at::Tensor&>(out).fill_(0);
    return;
  }
  double ord = ord_scalar.toDouble();
  at::ScalarType rt = out.scalar_type();
  at::ScalarType compute = OpMath(rt);
  Lowering l("aten::linalg_vector_norm");
  Builder& b = l.b();
  int x = b.ConvertIfNeeded(l.Input(self, rt), ToDType(compute));
  auto nonzero = [&](int v) {
    return b.Convert(b.Compare(CompareDirection::kNE, v, b.ScalarLike(0, v)), ToDType(compute));
  };
  bool over_size_one = true;
  for (int64_t d : axes) over_size_one &= self.size(d) == 1;
  int r;
  if (over_size_one) {
    // ATen's shortcut, exact: the norm of one element is |x| (x != 0 for ord 0).
    r = ord == 0 ? nonzero(x) : b.Unary(OpCode::kAbs, x);
  } else if (ord == 0) {
    r = ReduceAlong(l, nonzero(x), axes, ReduceKind::kAdd);
  } else if (ord == 2) {
    r = b.Unary(OpCode::kSqrt, ReduceAlong(l, Bin(b, OpCode::kMultiply, x, x), axes, ReduceKind::kAdd));
  } else {
    int a = b.Unary(OpCode::kAbs, x);
    if (ord == 1) {
      r = ReduceAlong(l, a, axes, ReduceKind::kAdd);
    } else if (ord == kInf || ord == -kInf) {
      r = ReduceAlong(l, a, axes, ord > 0 ? ReduceKind::kMax : ReduceKind::kMin);
    } else {
      int s = ReduceAlong(l, Bin(b, OpCode::kPower, a, ScalarAs(l, ord, compute, a)), axes, ReduceKind::kAdd);
      r = Bin(b, OpCode::kPower, s, ScalarAs(l, 1.0 / ord, compute, s));
    }
  }
  OutputReduced(l, r, out);
  l.Run();
}

at::Tensor& linalg_vector_norm_out(const at::Tensor& self, const at::Scalar& ord, at::OptionalIntArrayRef dim,
                                   bool keepdim, std::optional<at::ScalarType> dtype, at::Tensor& out) {
  StructuredOutputs<at::meta::structured_linalg_vector_norm> s({&out});
  s.meta(self, ord, dim, keepdim, dtype);
  LowerVectorNorm(self, ord, ReduceAxes(self, dim), out);
  return out;
}
at::Tensor linalg_vector_norm(const at::Tensor& self, const at::Scalar& ord, at::OptionalIntArrayRef dim,
                              bool keepdim, std::optional<at::ScalarType> dtype) {
  StructuredOutputs<at::meta::structured_linalg_vector_norm> s;
  s.meta(self, ord, dim, keepdim, dtype);
  LowerVectorNorm(self, ord, ReduceAxes(self, dim), s.out(0));
  return s.out(0);
}

// norm.ScalarOpt_dim*: ATen checks its own arguments, then computes linalg_vector_norm into the
// result (p defaults to 2).
at::OptionalScalarRef Ref(const std::optional<at::Scalar>& p) {
  return p.has_value() ? at::OptionalScalarRef(*p) : at::OptionalScalarRef();
}
at::Tensor norm_dim(const at::Tensor& self, const std::optional<at::Scalar>& p, at::IntArrayRef dim, bool keepdim) {
  StructuredOutputs<at::meta::structured_norm_ScalarOpt_dim> s;
  s.meta(self, Ref(p), dim, keepdim);
  at::Tensor out = s.out(0);
  at::linalg_vector_norm_out(out, self, p.value_or(2.0), dim, keepdim, std::nullopt);
  return out;
}
at::Tensor& norm_dim_out(const at::Tensor& self, const std::optional<at::Scalar>& p, at::IntArrayRef dim,
                         bool keepdim, at::Tensor& out) {
  StructuredOutputs<at::meta::structured_norm_ScalarOpt_dim> s({&out});
  s.meta(self, Ref(p), dim, keepdim);
  at::linalg_vector_norm_out(out, self, p.value_or(2.0), dim, keepdim, std::nullopt);
  return out;
}
at::Tensor norm_dim_dtype(const at::Tensor& self, const std::optional<at::Scalar>& p, at::IntArrayRef dim,
                          bool keepdim, at::ScalarType dtype) {
  StructuredOutputs<at::meta::structured_norm_ScalarOpt_dim_dtype> s;
  s.meta(self, Ref(p), dim, keepdim, dtype);
  at::Tensor out = s.out(0);
  at::linalg_vector_norm_out(out, self, p.value_or(2.0), dim, keepdim, dtype);
  return out;
}
at::Tensor& norm_dim_dtype_out(const at::Tensor& self, const std::optional<at::Scalar>& p, at::IntArrayRef dim,
                               bool keepdim, at::ScalarType dtype, at::Tensor& out) {
  StructuredOutputs<at::meta::structured_norm_ScalarOpt_dim_dtype> s({&out});
  s.meta(self, Ref(p), dim, keepdim, dtype);
  at::linalg_vector_norm_out(out, self, p.value_or(2.0), dim, keepdim, dtype);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("var.correction", var);
  m.impl("var.correction_out", var_out);
  m.impl("std.correction", std_);
  m.impl("std.correction_out", std_out);
  m.impl("var_mean.correction", var_mean);
  m.impl("std_mean.correction", std_mean);
  m.impl("logsumexp", logsumexp);
  m.impl("logsumexp.out", logsumexp_out);
  m.impl("linalg_vector_norm", linalg_vector_norm);
  m.impl("linalg_vector_norm.out", linalg_vector_norm_out);
  m.impl("norm.ScalarOpt_dim", norm_dim);
  m.impl("norm.out", norm_dim_out);
  m.impl("norm.ScalarOpt_dim_dtype", norm_dim_dtype);
  m.impl("norm.dtype_out", norm_dim_dtype_out);
}

}  // namespace tpu::torch_bridge
