// Complex tensors (Note [Complex tensors] in complex_util.h): inputs and outputs through float
// views, the elementwise formulas over (real, imag) pairs, copies and fills.
#include "torch/lower/complex_util.h"

#include <ATen/native/TypeProperties.h>

#include <cmath>
#include <cstring>

#include "torch/lower/pointwise_expr.h"

namespace tpu::torch_bridge {
namespace {

Dims WithPair(at::IntArrayRef sizes) {
  Dims d(sizes.begin(), sizes.end());
  d.push_back(2);
  return d;
}

// The storage's values of `t` (its conj bit cleared; the bit is applied by the caller).
at::Tensor Physical(const at::Tensor& t) { return t.is_conj() ? t.conj() : t; }

DType RealDType(at::ScalarType complex) { return ToDType(c10::toRealValueType(complex)); }

}  // namespace

int ComplexInputRaw(Lowering& l, const at::Tensor& t) { return l.Input(at::view_as_real(Physical(t))); }

CValue ComplexInput(Lowering& l, const at::Tensor& t, DType real, const Dims& dims) {
  Builder& b = l.b();
  CValue v;
  if (IsCpuScalar(t)) {
    c10::complex<double> z = t.item().toComplexDouble();
    v.re = l.Scalar(z.real(), ToScalarType(real));
    v.im = l.Scalar(z.imag(), ToScalarType(real));
  } else if (!IsComplex(t.scalar_type())) {
    v.re = l.Input(t, ToScalarType(real));
    if (t.is_neg()) v.re = b.Unary(OpCode::kNegate, v.re);
    v.im = b.ScalarLike(0, v.re);
  } else {
    int pairs = ComplexInputRaw(l, t);
    Dims own(t.sizes().begin(), t.sizes().end());
    Dims start(own.size() + 1, 0), limit = WithPair(t.sizes()), step(own.size() + 1, 1);
    limit.back() = 1;
    v.re = b.Reshape(b.Slice(pairs, start, limit, step), own);
    start.back() = 1;
    limit.back() = 2;
    v.im = b.Reshape(b.Slice(pairs, start, limit, step), own);
    v.re = b.ConvertIfNeeded(v.re, real);
    v.im = b.ConvertIfNeeded(v.im, real);
    if (t.is_conj()) v.im = b.Unary(OpCode::kNegate, v.im);
    if (t.is_neg()) {
      v.re = b.Unary(OpCode::kNegate, v.re);
      v.im = b.Unary(OpCode::kNegate, v.im);
    }
  }
  v.re = b.BroadcastTo(v.re, dims);
  v.im = b.BroadcastTo(v.im, dims);
  return v;
}

int JoinComplex(Builder& b, CValue v) {
  Dims dims = b.TypeOf(v.re).dims;
  Dims one = dims;
  one.push_back(1);
  return b.Concatenate({b.Reshape(v.re, one), b.Reshape(v.im, one)}, static_cast<int64_t>(dims.size()));
}

void ComplexOutput(Lowering& l, CValue v, const at::Tensor& out) {
  Builder& b = l.b();
  TORCH_INTERNAL_ASSERT(IsComplex(out.scalar_type()));
  if (out.is_conj()) v.im = b.Unary(OpCode::kNegate, v.im);  // stored conjugated
  if (out.is_neg()) {
    v.re = b.Unary(OpCode::kNegate, v.re);
    v.im = b.Unary(OpCode::kNegate, v.im);
  }
  l.Output(JoinComplex(b, v), at::view_as_real(Physical(out)));
}

// ---- formulas -----------------------------------------------------------------------------------
namespace {

CValue Add(Expr& e, CValue a, CValue b) { return {e.Add(a.re, b.re), e.Add(a.im, b.im)}; }
CValue Sub(Expr& e, CValue a, CValue b) { return {e.Sub(a.re, b.re), e.Sub(a.im, b.im)}; }
CValue Mul(Expr& e, CValue a, CValue b) {
  return {e.Sub(e.Mul(a.re, b.re), e.Mul(a.im, b.im)), e.Add(e.Mul(a.re, b.im), e.Mul(a.im, b.re))};
}
// Smith's algorithm (the one c10::complex uses): scaled by the larger part of the divisor, so
// neither |b|^2 nor the products overflow early; 0/0 gives the same inf/nan pattern as the CPU.
CValue Div(Expr& e, CValue a, CValue b) {
  int abs_c = e.Abs(b.re), abs_d = e.Abs(b.im);
  int first = e.Ge(abs_c, abs_d);
  int rat1 = e.Div(b.im, b.re);
  int scl1 = e.Div(e.K(1), e.Add(b.re, e.Mul(b.im, rat1)));
  int re1 = e.Mul(e.Add(a.re, e.Mul(a.im, rat1)), scl1);
  int im1 = e.Mul(e.Sub(a.im, e.Mul(a.re, rat1)), scl1);
  int zero = e.And(e.Eq(abs_c, e.K(0)), e.Eq(abs_d, e.K(0)));
  re1 = e.Select(zero, e.Div(a.re, abs_c), re1);
  im1 = e.Select(zero, e.Div(a.im, abs_d), im1);
  int rat2 = e.Div(b.re, b.im);
  int scl2 = e.Div(e.K(1), e.Add(b.im, e.Mul(b.re, rat2)));
  int re2 = e.Mul(e.Add(e.Mul(a.re, rat2), a.im), scl2);
  int im2 = e.Mul(e.Sub(e.Mul(a.im, rat2), a.re), scl2);
  return {e.Select(first, re1, re2), e.Select(first, im1, im2)};
}
// |z| = m * sqrt(1 + (n/m)^2) with m = max(|re|, |im|), n = min: no overflow of re^2 + im^2;
// inf wherever a part is infinite (even with a nan in the other), as hypot.
int Abs(Expr& e, CValue z) {
  int ar = e.Abs(z.re), ai = e.Abs(z.im);
  int m = e.Max(ar, ai), n = e.Min(ar, ai);
  int q = e.Div(n, m);
  int r = e.Mul(m, e.b().Unary(OpCode::kSqrt, e.Add(e.K(1), e.Mul(q, q))));
  r = e.Select(e.Eq(m, e.K(0)), e.K(0), r);
  int inf = e.Or(e.Eq(ar, e.K(INFINITY)), e.Eq(ai, e.K(INFINITY)));
  return e.Select(inf, e.K(INFINITY), r);
}
int Angle(Expr& e, CValue z) { return e.b().Binary(OpCode::kAtan2, z.im, z.re); }
CValue Exp(Expr& e, CValue z) {
  int m = e.Exp(z.re);
  return {e.Mul(m, e.b().Unary(OpCode::kCosine, z.im)), e.Mul(m, e.b().Unary(OpCode::kSine, z.im))};
}
CValue Log(Expr& e, CValue z) { return {e.Log(Abs(e, z)), Angle(e, z)}; }
// The principal root: t = sqrt((|z| + |re|) / 2); re >= 0: (t, im / 2t), else (|im| / 2t, ±t)
// with the sign of im; sqrt(0 + bi) for b = ±0 is (0, b).
CValue Sqrt(Expr& e, CValue z) {
  Builder& b = e.b();
  int t = b.Unary(OpCode::kSqrt, e.Mul(e.Add(Abs(e, z), e.Abs(z.re)), e.K(0.5)));
  int half = e.Div(z.im, e.Mul(t, e.K(2)));
  int pos = e.Ge(z.re, e.K(0));
  int neg_im = e.Or(e.Lt(z.im, e.K(0)), e.And(e.Eq(z.im, e.K(0)), e.Lt(e.Div(e.K(1), z.im), e.K(0))));
  CValue r{e.Select(pos, t, e.Abs(half)), e.Select(pos, half, e.Select(neg_im, e.Neg(t), t))};
  int zero = e.Eq(t, e.K(0));
  return {e.Select(zero, e.K(0), r.re), e.Select(zero, z.im, r.im)};
}

struct Result {
  CValue c;      // a complex result, or
  int real = -1;  // a real (or bool) one
};
using CList = c10::SmallVector<CValue, 2>;

enum class Out : uint8_t { kComplex, kReal, kBool };
struct Rule {
  const char* op;
  Out out;
  Result (*fn)(Expr& e, const CList& v, const CValue* alpha);
};

CValue Scaled(Expr& e, CValue x, const CValue* alpha) { return alpha ? Mul(e, x, *alpha) : x; }

const Rule kRules[] = {
    {"aten::add", Out::kComplex, [](Expr& e, const CList& v, const CValue* a) { return Result{Add(e, v[0], Scaled(e, v[1], a))}; }},
    {"aten::sub", Out::kComplex, [](Expr& e, const CList& v, const CValue* a) { return Result{Sub(e, v[0], Scaled(e, v[1], a))}; }},
    {"aten::mul", Out::kComplex, [](Expr& e, const CList& v, const CValue*) { return Result{Mul(e, v[0], v[1])}; }},
    {"aten::div", Out::kComplex, [](Expr& e, const CList& v, const CValue*) { return Result{Div(e, v[0], v[1])}; }},
    {"aten::reciprocal", Out::kComplex,
     [](Expr& e, const CList& v, const CValue*) { return Result{Div(e, CValue{e.K(1), e.K(0)}, v[0])}; }},
    {"aten::neg", Out::kComplex, [](Expr& e, const CList& v, const CValue*) { return Result{{e.Neg(v[0].re), e.Neg(v[0].im)}}; }},
    {"aten::conj_physical", Out::kComplex, [](Expr& e, const CList& v, const CValue*) { return Result{{v[0].re, e.Neg(v[0].im)}}; }},
    {"aten::exp", Out::kComplex, [](Expr& e, const CList& v, const CValue*) { return Result{Exp(e, v[0])}; }},
    {"aten::log", Out::kComplex, [](Expr& e, const CList& v, const CValue*) { return Result{Log(e, v[0])}; }},
    {"aten::sqrt", Out::kComplex, [](Expr& e, const CList& v, const CValue*) { return Result{Sqrt(e, v[0])}; }},
    {"aten::sgn", Out::kComplex,
     [](Expr& e, const CList& v, const CValue*) {
       int r = Abs(e, v[0]);
       int zero = e.Eq(r, e.K(0));
       return Result{{e.Select(zero, e.K(0), e.Div(v[0].re, r)), e.Select(zero, e.K(0), e.Div(v[0].im, r))}};
     }},
    {"aten::abs", Out::kReal, [](Expr& e, const CList& v, const CValue*) { return Result{{}, Abs(e, v[0])}; }},
    {"aten::angle", Out::kReal, [](Expr& e, const CList& v, const CValue*) { return Result{{}, Angle(e, v[0])}; }},
    {"aten::eq", Out::kBool,
     [](Expr& e, const CList& v, const CValue*) { return Result{{}, e.And(e.Eq(v[0].re, v[1].re), e.Eq(v[0].im, v[1].im))}; }},
    {"aten::ne", Out::kBool,
     [](Expr& e, const CList& v, const CValue*) { return Result{{}, e.Or(e.Ne(v[0].re, v[1].re), e.Ne(v[0].im, v[1].im))}; }},
};

const Rule* FindRule(const char* op) {
  for (const Rule& r : kRules)
    if (std::strcmp(r.op, op) == 0) return &r;
  return nullptr;
}

}  // namespace

LoweredResult LowerComplexElementwise(const char* op, std::initializer_list<TensorArg> inputs, OutArg out,
                                      const at::Scalar* alpha) {
  const Rule* rule = FindRule(op);
  TORCH_CHECK_NOT_IMPLEMENTED(rule, op, " does not support complex tensors on the tpu device; move them to the "
                              "CPU for it (tensor.cpu()). Complex ops the device runs: copies, views, add, sub, "
                              "mul, div, neg, conj_physical, reciprocal, exp, log, sqrt, abs, angle, sgn, eq, ne, "
                              "polar, complex, sum, mean");
  const at::Tensor* device_like = out.t;
  at::native::ResultTypeState state = {};
  at::DimVector shape;
  bool first = true;
  for (const TensorArg& a : inputs) {
    const at::Tensor& t = a.get();
    TORCH_CHECK(t.defined(), op, ": got an undefined tensor argument");
    if (t.device().type() == c10::DeviceType::PrivateUse1 && (!device_like || device_like == out.t)) device_like = &t;
    state = at::native::update_result_type_state(t, state);
    shape = first ? at::DimVector(t.sizes()) : at::infer_size_dimvector(shape, t.sizes());
    first = false;
  }
  TORCH_CHECK(device_like, op, ": no tensor argument is on the tpu device");
  at::ScalarType common = at::native::result_type(state);
  TORCH_CHECK_NOT_IMPLEMENTED(common == at::kComplexFloat || common == at::kComplexDouble, op, ": dtype ", common,
                              " is not supported on the tpu device (complex64 and complex128 are)");
  at::ScalarType result = rule->out == Out::kComplex ? common
                          : rule->out == Out::kReal  ? c10::toRealValueType(common)
                                                     : at::kBool;
  c10::MaybeOwned<at::Tensor> result_t = PrepareOut(op, out, shape, result, *device_like);
  if (result_t->numel() == 0) return LoweredResult(std::move(result_t));
  if (out.t) CheckOutOverlap(*result_t, inputs);
  DType real = RealDType(common);
  Dims dims(shape.begin(), shape.end());
  Lowering l(op);
  CList vals;
  for (const TensorArg& a : inputs) vals.push_back(ComplexInput(l, a.get(), real, dims));
  CValue alpha_v;
  bool scaled = alpha && !alpha->equal(1);
  if (scaled) {
    c10::complex<double> z = alpha->toComplexDouble();
    alpha_v.re = l.b().BroadcastTo(l.Scalar(z.real(), ToScalarType(real)), dims);
    alpha_v.im = l.b().BroadcastTo(l.Scalar(z.imag(), ToScalarType(real)), dims);
  }
  Expr e(l, vals[0].re);
  Result r = rule->fn(e, vals, scaled ? &alpha_v : nullptr);
  if (rule->out == Out::kComplex) {
    ComplexOutput(l, r.c, *result_t);  // (PrepareOut refused an out= of a real dtype, as can_cast does)
  } else {
    l.OutputBorrowed(r.real, *result_t);
  }
  l.Run();
  return LoweredResult(std::move(result_t));
}

void ComplexDeviceCopy(const at::Tensor& src, const at::Tensor& dst) {
  Lowering l("aten::copy_");
  Dims dims(dst.sizes().begin(), dst.sizes().end());
  if (IsComplex(dst.scalar_type())) {
    ComplexOutput(l, ComplexInput(l, src, RealDType(dst.scalar_type()), dims), dst);
  } else {
    TORCH_WARN_ONCE("Casting complex values to real discards the imaginary part");
    at::ScalarType compute = OpMath(dst.scalar_type());
    DType real = at::isFloatingType(compute) ? ToDType(compute) : RealDType(src.scalar_type());
    l.Output(ComplexInput(l, src, real, dims).re, dst);
  }
  l.Run();
}

void ComplexFill(const at::Tensor& self, const at::Scalar& value) {
  if (self.numel() == 0) return;
  Lowering l("aten::fill_");
  c10::complex<double> z = value.toComplexDouble();
  DType real = RealDType(self.scalar_type());
  Dims dims(self.sizes().begin(), self.sizes().end());
  CValue v{l.b().BroadcastTo(l.Scalar(z.real(), ToScalarType(real)), dims),
           l.b().BroadcastTo(l.Scalar(z.imag(), ToScalarType(real)), dims)};
  ComplexOutput(l, v, self);
  l.Run();
}

}  // namespace tpu::torch_bridge
