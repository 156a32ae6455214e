// Unary math without a StableHLO op of its own, composed from those that exist: the inverse
// trigonometric and the hyperbolic functions, sinc, special.entr.
//
// Float32 (and bfloat16/float16) evaluate the formulas in float64 and round once, so the
// composition's intermediate roundings (1 - x^2 near |x| = 1, exp(x) - exp(-x) near 0) do not
// show in the result: the results are within an ulp of the CPU's dedicated kernels. Float64
// evaluates them in float64 with the cancellation-free forms below.
#include <torch/library.h>

#include <cmath>

#include "torch/lower/pointwise_expr.h"

namespace tpu::torch_bridge {
namespace {

using V = ValueList;

LoweredResult RunWide(const char* op, const at::Tensor& self, OutArg out, int (*fn)(Expr&, int)) {
  return LowerElementwise(op, {self}, out, ResultKind::kFloat, [fn](Lowering& l, const V& v, DType) {
    int x = l.b().ConvertIfNeeded(v[0], DType::kF64);
    Expr e(l, x);
    return fn(e, x);
  });
}

int Sqrt(Expr& e, int x) { return e.b().Unary(OpCode::kSqrt, x); }
int Atan2(Expr& e, int y, int x) { return e.b().Binary(OpCode::kAtan2, y, x); }
// sqrt(1 - x^2) as sqrt((1 - x)(1 + x)): no cancellation near |x| = 1 (NaN past it).
int Cofactor(Expr& e, int x) { return Sqrt(e, e.Mul(e.Sub(e.K(1), x), e.Add(e.K(1), x))); }
int CopySignOf(Expr& e, int magnitude, int x) { return e.Select(e.Lt(x, e.K(0)), e.Neg(magnitude), magnitude); }

int Asin(Expr& e, int x) { return Atan2(e, x, Cofactor(e, x)); }
int Acos(Expr& e, int x) { return Atan2(e, Cofactor(e, x), x); }
// Note [atan on XLA's CPU plugin]: atan x = atan2(x, 1), with the 1 passed as a number (a program
// argument), not a constant: XLA's CPU plugin (lammps-jax-pjrt-cpu 0.11.2) computes
// atan2(x, constant 1) in float64 wrongly for tensors of more than a few elements (errors up to
// 19 on a 20x20 input; atan2 against a tensor of ones is right), which the constant invites it
// to rewrite.
int Atan(Expr& e, int x) { return Atan2(e, x, e.P(1.0)); }
// sinh |x| = (t + t / (t + 1)) / 2 with t = expm1 |x|: exact near 0; past ~710 t is inf, and
// sinh overflows too (exp(|x| - ln 2) there keeps the threshold right).
int Sinh(Expr& e, int x) {
  int ax = e.Abs(x);
  int t = e.b().Unary(OpCode::kExpm1, ax);
  int small = e.Mul(e.Add(t, e.Div(t, e.Add(t, e.K(1)))), e.K(0.5));
  int large = e.Exp(e.Sub(ax, e.K(M_LN2)));
  int r = e.Select(e.Lt(ax, e.K(20)), small, large);
  return e.Select(e.IsNan(x), x, CopySignOf(e, r, x));
}
int Cosh(Expr& e, int x) {
  int ax = e.Abs(x);
  int ex = e.Exp(ax);
  int small = e.Mul(e.Add(ex, e.Div(e.K(1), ex)), e.K(0.5));
  return e.Select(e.Lt(ax, e.K(20)), small, e.Exp(e.Sub(ax, e.K(M_LN2))));
}
// asinh |x| = log1p(|x| + x^2 / (1 + sqrt(1 + x^2))); log(2|x|) where x^2 would overflow.
int Asinh(Expr& e, int x) {
  int ax = e.Abs(x);
  int x2 = e.Mul(ax, ax);
  int r = e.Log1p(e.Add(ax, e.Div(x2, e.Add(e.K(1), Sqrt(e, e.Add(e.K(1), x2))))));
  r = e.Select(e.Gt(ax, e.K(1e150)), e.Add(e.Log(ax), e.K(M_LN2)), r);
  return e.Select(e.IsNan(x), x, CopySignOf(e, r, x));
}
// acosh x = log1p(t + sqrt(2t + t^2)) with t = x - 1; NaN below 1 (where 2t + t^2 is positive
// again for x < -1, so the domain is checked, not left to the square root).
int Acosh(Expr& e, int x) {
  int t = e.Sub(x, e.K(1));
  int r = e.Log1p(e.Add(t, Sqrt(e, e.Add(e.Mul(t, e.K(2)), e.Mul(t, t)))));
  r = e.Select(e.Gt(x, e.K(1e150)), e.Add(e.Log(x), e.K(M_LN2)), r);
  return e.Select(e.Lt(x, e.K(1)), e.K(NAN), r);
}
// atanh x = log1p(2x / (1 - x)) / 2: +-inf at +-1, NaN past them.
int Atanh(Expr& e, int x) { return e.Mul(e.Log1p(e.Div(e.Mul(x, e.K(2)), e.Sub(e.K(1), x))), e.K(0.5)); }
// ATen: 1 at 0, else sin(pi x) / (pi x).
int Sinc(Expr& e, int x) {
  int p = e.Mul(x, e.K(M_PI));
  return e.Select(e.Eq(x, e.K(0)), e.K(1), e.Div(e.b().Unary(OpCode::kSine, p), p));
}
// ATen: NaN kept; -x log x for x > 0, 0 at 0, -inf below.
int Entr(Expr& e, int x) {
  int r = e.Select(e.Gt(x, e.K(0)), e.Neg(e.Mul(x, e.Log(x))),
                   e.Select(e.Eq(x, e.K(0)), e.K(0), e.K(-INFINITY)));
  return e.Select(e.IsNan(x), x, r);
}

#define TPU_WIDE_UNARY(fname, opname, FN)                                              \
  at::Tensor fname(const at::Tensor& s) { return RunWide(opname, s, Functional(), FN); } \
  [[maybe_unused]] at::Tensor& fname##_(at::Tensor& s) {                               \
    RunWide(opname, s, Inplace(s), FN);                                                \
    return s;                                                                          \
  }                                                                                    \
  at::Tensor& fname##_out(const at::Tensor& s, at::Tensor& out) {                      \
    RunWide(opname, s, Out(out), FN);                                                  \
    return out;                                                                        \
  }
TPU_WIDE_UNARY(asin, "aten::asin", Asin)
TPU_WIDE_UNARY(acos, "aten::acos", Acos)
TPU_WIDE_UNARY(atan, "aten::atan", Atan)
TPU_WIDE_UNARY(sinh, "aten::sinh", Sinh)
TPU_WIDE_UNARY(cosh, "aten::cosh", Cosh)
TPU_WIDE_UNARY(asinh, "aten::asinh", Asinh)
TPU_WIDE_UNARY(acosh, "aten::acosh", Acosh)
TPU_WIDE_UNARY(atanh, "aten::atanh", Atanh)
TPU_WIDE_UNARY(sinc, "aten::sinc", Sinc)
TPU_WIDE_UNARY(entr, "aten::special_entr", Entr)
#undef TPU_WIDE_UNARY

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
#define TPU_REG(name, fname)              \
  m.impl(#name, fname);                   \
  m.impl(#name "_", fname##_);            \
  m.impl(#name ".out", fname##_out);
  TPU_REG(asin, asin)
  TPU_REG(acos, acos)
  TPU_REG(atan, atan)
  TPU_REG(sinh, sinh)
  TPU_REG(cosh, cosh)
  TPU_REG(asinh, asinh)
  TPU_REG(acosh, acosh)
  TPU_REG(atanh, atanh)
  TPU_REG(sinc, sinc)
#undef TPU_REG
  m.impl("special_entr", entr);
  m.impl("special_entr.out", entr_out);
}

}  // namespace tpu::torch_bridge
