// Binary math ops composed from StableHLO's: hypot, logaddexp / logaddexp2, fmax / fmin,
// heaviside, special.xlog1py. Each follows its ATen CPU kernel's formula and special cases.
//
// Float32 (and bfloat16/float16, whose opmath is float32) evaluate the transcendental formulas in
// float64 and round once: the compositions would otherwise add a few float32 roundings that
// the CPU's dedicated kernels do not make. Float64 evaluates in float64.
#include <torch/library.h>

#include <cmath>

#include "torch/lower/pointwise_expr.h"

namespace tpu::torch_bridge {
namespace {

using V = ValueList;

// x and y widened to float64 (when the compute dtype is a float below it).
struct Wide {
  Wide(Lowering& l, const V& v, DType t) : x(l.b().ConvertIfNeeded(v[0], DType::kF64)),
                                          y(l.b().ConvertIfNeeded(v[1], DType::kF64)), e(l, x) {
    (void)t;
  }
  int x, y;
  Expr e;
};

int Hypot(Lowering& l, const V& v, DType t) {
  Wide w(l, v, t);
  Expr& e = w.e;
  int ax = e.Abs(w.x), ay = e.Abs(w.y);
  int m = e.Max(ax, ay), n = e.Min(ax, ay);
  int q = e.Div(n, m);
  int r = e.Mul(m, e.b().Unary(OpCode::kSqrt, e.Add(e.K(1), e.Mul(q, q))));
  r = e.Select(e.Eq(m, e.K(0)), e.K(0), r);
  // hypot(inf, nan) is inf.
  return e.Select(e.Or(e.Eq(ax, e.K(INFINITY)), e.Eq(ay, e.K(INFINITY))), e.K(INFINITY), r);
}

// ATen: a if a and b are the same infinity, else max + log1p(exp(-|a - b|)) (base 2 for
// logaddexp2: max + log1p(2^-|a - b|) / ln 2).
int LogAddExp(Lowering& l, const V& v, DType t, bool base2) {
  Wide w(l, v, t);
  Expr& e = w.e;
  int m = e.Max(w.x, w.y);
  int d = e.Neg(e.Abs(e.Sub(w.x, w.y)));
  int p = base2 ? e.Pow(e.K(2), d) : e.Exp(d);
  int r = e.Log1p(p);
  if (base2) r = e.Mul(r, e.K(1.0 / M_LN2));
  r = e.Add(m, r);
  int same_inf = e.And(e.Eq(e.Abs(w.x), e.K(INFINITY)), e.Eq(w.x, w.y));
  return e.Select(same_inf, w.x, r);
}

// fmax / fmin: a NaN loses to a number (both NaN: NaN).
int FMaxMin(Lowering& l, const V& v, DType t, bool max) {
  Expr e(l, v[0]);
  int r = max ? e.Max(v[0], v[1]) : e.Min(v[0], v[1]);
  if (!IsFloat(t)) return r;
  return e.Select(e.IsNan(v[0]), v[1], e.Select(e.IsNan(v[1]), v[0], r));
}

// ATen: a == 0 ? b : (a > 0) -- NaN gives 0.
int Heaviside(Lowering& l, const V& v, DType t) {
  Expr e(l, v[0]);
  int one = e.K(1), zero = e.K(0);
  if (t == DType::kBool) return e.Select(e.Eq(v[0], zero), v[1], e.Gt(v[0], zero));
  return e.Select(e.Eq(v[0], zero), v[1], e.Select(e.Gt(v[0], zero), one, zero));
}

// ATen: nan if y is nan, else 0 where x == 0, else x * log1p(y).
int XLog1py(Lowering& l, const V& v, DType t) {
  Wide w(l, v, t);
  Expr& e = w.e;
  int r = e.Select(e.Eq(w.x, e.K(0)), e.K(0), e.Mul(w.x, e.Log1p(w.y)));
  return e.Select(e.IsNan(w.y), w.y, r);
}

LoweredResult Binary(const char* op, ResultKind kind, const at::Tensor& a, const at::Tensor& b, OutArg out,
                     int (*fn)(Lowering&, const V&, DType)) {
  return LowerElementwise(op, {a, b}, out, kind, [fn](Lowering& l, const V& v, DType t) { return fn(l, v, t); });
}

int LogAddExpE(Lowering& l, const V& v, DType t) { return LogAddExp(l, v, t, false); }
int LogAddExp2(Lowering& l, const V& v, DType t) { return LogAddExp(l, v, t, true); }
int FMax(Lowering& l, const V& v, DType t) { return FMaxMin(l, v, t, true); }
int FMin(Lowering& l, const V& v, DType t) { return FMaxMin(l, v, t, false); }

void CheckFloatOnly(const char* kernel, const at::Tensor& a, const at::Tensor& b) {
  at::ScalarType t = at::result_type(a, b);
  CheckKernelDType(!at::isIntegralType(t, /*includeBool=*/true), kernel, t);
}

void CheckHeaviside(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(!a.is_complex() && !b.is_complex(), "heaviside is not yet implemented for complex tensors.");
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "heaviside is not yet implemented for tensors with different dtypes.");
}

// functional, in-place and out= forms of `fname` from one checked definition
#define TPU_MATH_BINARY(fname, opname, kind, FN, CHECK)                                          \
  at::Tensor fname(const at::Tensor& a, const at::Tensor& b) {                                    \
    CHECK;                                                                                        \
    return Binary(opname, kind, a, b, Functional(), FN);                                          \
  }                                                                                               \
  [[maybe_unused]] at::Tensor& fname##_(at::Tensor& a, const at::Tensor& b) {                     \
    CHECK;                                                                                        \
    Binary(opname, kind, a, b, Inplace(a), FN);                                                   \
    return a;                                                                                     \
  }                                                                                               \
  at::Tensor& fname##_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {            \
    CHECK;                                                                                        \
    Binary(opname, kind, a, b, Out(out), FN);                                                     \
    return out;                                                                                   \
  }

TPU_MATH_BINARY(hypot, "aten::hypot", ResultKind::kFloat, Hypot, CheckFloatOnly("hypot_tpu", a, b))
TPU_MATH_BINARY(logaddexp, "aten::logaddexp", ResultKind::kFloat, LogAddExpE, CheckFloatOnly("logaddexp_tpu", a, b))
TPU_MATH_BINARY(logaddexp2, "aten::logaddexp2", ResultKind::kFloat, LogAddExp2,
                CheckFloatOnly("logaddexp2_tpu", a, b))
TPU_MATH_BINARY(fmax, "aten::fmax", ResultKind::kCommon, FMax, (void)0)
TPU_MATH_BINARY(fmin, "aten::fmin", ResultKind::kCommon, FMin, (void)0)
TPU_MATH_BINARY(heaviside, "aten::heaviside", ResultKind::kCommon, Heaviside, CheckHeaviside(a, b))
TPU_MATH_BINARY(xlog1py, "aten::special_xlog1py", ResultKind::kFloat, XLog1py, (void)0)
#undef TPU_MATH_BINARY

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("hypot", hypot);
  m.impl("hypot_", hypot_);
  m.impl("hypot.out", hypot_out);
  m.impl("logaddexp", logaddexp);
  m.impl("logaddexp.out", logaddexp_out);
  m.impl("logaddexp2", logaddexp2);
  m.impl("logaddexp2.out", logaddexp2_out);
  m.impl("fmax", fmax);
  m.impl("fmax.out", fmax_out);
  m.impl("fmin", fmin);
  m.impl("fmin.out", fmin_out);
  m.impl("heaviside", heaviside);
  m.impl("heaviside_", heaviside_);
  m.impl("heaviside.out", heaviside_out);
  m.impl("special_xlog1py", xlog1py);
  m.impl("special_xlog1py.out", xlog1py_out);
}

}  // namespace tpu::torch_bridge
