// Elementwise arithmetic, comparisons, logical ops and where: ATen -> IR.
// Every op has its functional, in-place and out= forms registered from one definition.
#include <ATen/native/BinaryOps.h>
#include <torch/library.h>

#include <cstring>

#include "torch/lower/elementwise_util.h"

namespace tpu::torch_bridge {
namespace {

using V = ValueList;

// ---- helpers over IR values --------------------------------------------------------------------
int Add(Builder& b, int x, int y) { return b.Binary(OpCode::kAdd, x, y); }
int Mul(Builder& b, int x, int y) { return b.Binary(OpCode::kMultiply, x, y); }

// y * alpha, with alpha as a runtime scalar (skipped when alpha == 1).
int ScaleByAlpha(Lowering& l, int y, const at::Scalar& alpha, DType compute) {
  if (alpha.equal(1)) return y;
  int a = l.b().BroadcastTo(l.Scalar(alpha, ToScalarType(compute)), l.b().TypeOf(y).dims);
  return Mul(l.b(), y, a);
}

// Python-style remainder: the result takes the divisor's sign.
int PyRemainder(Builder& b, int x, int y) {
  int r = b.Binary(OpCode::kRemainder, x, y);
  int zero = b.ScalarLike(0, r);
  int r_nonzero = b.Compare(CompareDirection::kNE, r, zero);
  int r_neg = b.Compare(CompareDirection::kLT, r, zero);
  int y_neg = b.Compare(CompareDirection::kLT, y, zero);
  int differ = b.Binary(OpCode::kXor, r_neg, y_neg);
  int fix = b.Binary(OpCode::kAnd, r_nonzero, differ);
  return b.Select(fix, Add(b, r, y), r);
}

int FloorDivide(Builder& b, int x, int y, DType t) {
  if (IsFloat(t)) {
    // floor(x / y) computed as PyTorch does: (x - fmod(x, y)) / y, corrected toward -inf.
    int mod = b.Binary(OpCode::kRemainder, x, y);
    int div = b.Binary(OpCode::kDivide, b.Binary(OpCode::kSubtract, x, mod), y);
    int zero = b.ScalarLike(0, mod);
    int mod_nz = b.Compare(CompareDirection::kNE, mod, zero);
    int sign_differ = b.Compare(CompareDirection::kNE, b.Compare(CompareDirection::kLT, y, zero),
                                b.Compare(CompareDirection::kLT, mod, zero));
    int adjust = b.Binary(OpCode::kAnd, mod_nz, sign_differ);
    div = b.Select(adjust, b.Binary(OpCode::kSubtract, div, b.ScalarLike(1, div)), div);
    // Exact integer results; division by zero keeps x / y (inf/nan) like PyTorch.
    int floor_div = b.Unary(OpCode::kFloor, div);
    int diff = b.Binary(OpCode::kSubtract, div, floor_div);
    floor_div = b.Select(b.Compare(CompareDirection::kGT, diff, b.ScalarLike(0.5, diff)),
                         b.Binary(OpCode::kAdd, floor_div, b.ScalarLike(1, div)), floor_div);
    int plain = b.Binary(OpCode::kDivide, x, y);
    int y_zero = b.Compare(CompareDirection::kEQ, y, b.ScalarLike(0, y));
    return b.Select(y_zero, plain, b.Select(b.Compare(CompareDirection::kEQ, div, zero),
                                            b.Binary(OpCode::kMultiply, zero, plain), floor_div));
  }
  int q = b.Binary(OpCode::kDivide, x, y);
  int r = b.Binary(OpCode::kRemainder, x, y);
  int zero = b.ScalarLike(0, r);
  int adjust = b.Binary(OpCode::kAnd, b.Compare(CompareDirection::kNE, r, zero),
                        b.Compare(CompareDirection::kNE, b.Compare(CompareDirection::kLT, r, zero),
                                  b.Compare(CompareDirection::kLT, y, zero)));
  return b.Select(adjust, b.Binary(OpCode::kSubtract, q, b.ScalarLike(1, q)), q);
}

// Note [Check op]: an integer division by a device tensor fails, as on CPU, when the divisor
// holds a zero (a host number was checked when the op was called).
int CheckDivisor(Lowering& l, int result, int divisor, DType t) {
  if (IsFloat(t) || l.IsHostScalar(divisor)) return result;
  Builder& b = l.b();
  return l.Checked(result, b.Compare(CompareDirection::kNE, divisor, b.ScalarLike(0, divisor)),
                 CheckKind::kIntegerDivisionByZero);
}

LoweredResult DivImpl(const at::Tensor& self, const at::Tensor& other, std::optional<c10::string_view> mode, OutArg out) {
  if (!mode.has_value()) {
    return LowerElementwise("aten::div", {self, other}, out, ResultKind::kFloat,
                            [](Lowering& l, const V& v, DType) { return l.b().Binary(OpCode::kDivide, v[0], v[1]); });
  }
  if (*mode == "trunc") {
    return LowerElementwise("aten::div", {self, other}, out, ResultKind::kCommon, [](Lowering& l, const V& v, DType t) {
      int q = l.b().Binary(OpCode::kDivide, v[0], v[1]);
      if (!IsFloat(t)) return CheckDivisor(l, q, v[1], t);
      // trunc(q) = sign(q) * floor(|q|)
      return l.b().Binary(OpCode::kMultiply, l.b().Unary(OpCode::kSign, q),
                          l.b().Unary(OpCode::kFloor, l.b().Unary(OpCode::kAbs, q)));
    });
  }
  TORCH_CHECK_NOT_IMPLEMENTED(!at::isComplexType(at::result_type(self, other)), "\"div_", *mode,
                              "_tpu\" not implemented for '", at::result_type(self, other), "'");
  TORCH_CHECK(*mode == "floor", "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '", *mode, "'");
  return LowerElementwise("aten::div", {self, other}, out, ResultKind::kCommon,
                          [](Lowering& l, const V& v, DType t) {
                            return CheckDivisor(l, FloorDivide(l.b(), v[0], v[1], t), v[1], t);
                          });
}

// PyTorch raises on integer division by zero: a host scalar divisor is checked here, at the
// call; a device tensor's zeros by the program (CheckDivisor).
// Integer means the promoted type: a float tensor divided by an int 0 gives inf, as on CPU.
void CheckIntegerDivisor(const at::Tensor& self, const at::Tensor& other) {
  if (IsCpuScalar(other) && at::isIntegralType(at::result_type(self, other), /*includeBool=*/true))
    TORCH_CHECK(other.item().toLong() != 0, "ZeroDivisionError");
}

void CheckIntegerDivision(const at::Tensor& self, const at::Tensor& other, std::optional<c10::string_view> mode) {
  if (mode.has_value()) CheckIntegerDivisor(self, other);
}

// remainder and fmod share the binary macro below; only they check the divisor.
void BinaryPreCheck(const char* op, const at::Tensor& self, const at::Tensor& other) {
  if (IsCpuScalar(other) && (std::strcmp(op, "aten::remainder") == 0 || std::strcmp(op, "aten::fmod") == 0))
    CheckIntegerDivisor(self, other);
}

// ---- binary ops ------------------------------------------------------------------------------
#define TPU_BINARY(fname, opname, kind, BODY)                                                          \
  at::Tensor fname(const at::Tensor& self, const at::Tensor& other) {                                   \
    BinaryPreCheck(opname, self, other);                                                                \
    return LowerElementwise(opname, {self, other}, Functional(), kind,                                  \
                            [](Lowering& l, const V& v, DType t) { auto& b = l.b(); (void)b; BODY });   \
  }                                                                                                     \
  at::Tensor& fname##_(at::Tensor& self, const at::Tensor& other) {                                     \
    BinaryPreCheck(opname, self, other);                                                                \
    LowerElementwise(opname, {self, other}, Inplace(self), kind,                                        \
                     [](Lowering& l, const V& v, DType t) { auto& b = l.b(); (void)b; BODY });          \
    return self;                                                                                        \
  }                                                                                                     \
  at::Tensor& fname##_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {          \
    BinaryPreCheck(opname, self, other);                                                                \
    LowerElementwise(opname, {self, other}, Out(out), kind,                                             \
                     [](Lowering& l, const V& v, DType t) { auto& b = l.b(); (void)b; BODY });          \
    return out;                                                                                         \
  }                                                                                                     \
  at::Tensor fname##_s(const at::Tensor& self, const at::Scalar& other) { return ::tpu::torch_bridge::fname(self, WrapScalar(other)); } \
  at::Tensor& fname##_s_(at::Tensor& self, const at::Scalar& other) { return ::tpu::torch_bridge::fname##_(self, WrapScalar(other)); } \
  at::Tensor& fname##_s_out(const at::Tensor& self, const at::Scalar& other, at::Tensor& out) {        \
    return ::tpu::torch_bridge::fname##_out(self, WrapScalar(other), out);                                                   \
  }

TPU_BINARY(mul, "aten::mul", ResultKind::kCommon, {
  if (t == DType::kBool) return b.Binary(OpCode::kAnd, v[0], v[1]);
  return b.Binary(OpCode::kMultiply, v[0], v[1]);
})
TPU_BINARY(maximum, "aten::maximum", ResultKind::kCommon, { return b.Binary(OpCode::kMaximum, v[0], v[1]); })
TPU_BINARY(minimum, "aten::minimum", ResultKind::kCommon, { return b.Binary(OpCode::kMinimum, v[0], v[1]); })
TPU_BINARY(atan2, "aten::atan2", ResultKind::kFloat, { return b.Binary(OpCode::kAtan2, v[0], v[1]); })
TPU_BINARY(remainder, "aten::remainder", ResultKind::kCommon,
           { return CheckDivisor(l, PyRemainder(b, v[0], v[1]), v[1], t); })
TPU_BINARY(fmod, "aten::fmod", ResultKind::kCommon,
           { return CheckDivisor(l, b.Binary(OpCode::kRemainder, v[0], v[1]), v[1], t); })
TPU_BINARY(eq, "aten::eq", ResultKind::kBool, { return b.Compare(CompareDirection::kEQ, v[0], v[1]); })
TPU_BINARY(ne, "aten::ne", ResultKind::kBool, { return b.Compare(CompareDirection::kNE, v[0], v[1]); })
TPU_BINARY(lt, "aten::lt", ResultKind::kBool, { return b.Compare(CompareDirection::kLT, v[0], v[1]); })
TPU_BINARY(le, "aten::le", ResultKind::kBool, { return b.Compare(CompareDirection::kLE, v[0], v[1]); })
TPU_BINARY(gt, "aten::gt", ResultKind::kBool, { return b.Compare(CompareDirection::kGT, v[0], v[1]); })
TPU_BINARY(ge, "aten::ge", ResultKind::kBool, { return b.Compare(CompareDirection::kGE, v[0], v[1]); })
TPU_BINARY(bitwise_and, "aten::bitwise_and", ResultKind::kCommon, { return b.Binary(OpCode::kAnd, v[0], v[1]); })
TPU_BINARY(bitwise_or, "aten::bitwise_or", ResultKind::kCommon, { return b.Binary(OpCode::kOr, v[0], v[1]); })
TPU_BINARY(bitwise_xor, "aten::bitwise_xor", ResultKind::kCommon, { return b.Binary(OpCode::kXor, v[0], v[1]); })

#define TPU_LOGICAL(fname, opname, IROP)                                                               \
  at::Tensor& fname##_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {          \
    LowerElementwise(opname, {self, other}, Out(out), ResultKind::kBool,                                 \
                     [](Lowering& l, const V& v, DType t) {                                            \
                       auto& b = l.b();                                                                \
                       int x = b.Compare(CompareDirection::kNE, v[0], b.ScalarLike(0, v[0]));          \
                       int y = b.Compare(CompareDirection::kNE, v[1], b.ScalarLike(0, v[1]));          \
                       return b.Binary(IROP, x, y);                                                    \
                     });                                                                               \
    return out;                                                                                         \
  }
TPU_LOGICAL(logical_and, "aten::logical_and", OpCode::kAnd)
TPU_LOGICAL(logical_or, "aten::logical_or", OpCode::kOr)
TPU_LOGICAL(logical_xor, "aten::logical_xor", OpCode::kXor)

at::Tensor& logical_not_out(const at::Tensor& self, at::Tensor& out) {
  LowerElementwise("aten::logical_not", {self}, Out(out), ResultKind::kBool, [](Lowering& l, const V& v, DType) {
    return l.b().Compare(CompareDirection::kEQ, v[0], l.b().ScalarLike(0, v[0]));
  });
  return out;
}

at::Tensor& bitwise_not_out(const at::Tensor& self, at::Tensor& out) {
  LowerElementwise("aten::bitwise_not", {self}, Out(out), ResultKind::kCommon,
                   [](Lowering& l, const V& v, DType) { return l.b().Unary(OpCode::kNot, v[0]); });
  return out;
}

// add / sub with alpha
LoweredResult AddSub(const char* op, bool sub, const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha,
                  OutArg out) {
  if (sub) {
    TORCH_CHECK(self.scalar_type() != at::kBool || other.scalar_type() != at::kBool,
                "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
                "`logical_xor()` operator instead.");
  }
  // An integral alpha (the default 1) passes alpha_check for every dtype: skip the promotion.
  if (!alpha.isIntegral(/*includeBool=*/false)) at::native::alpha_check(at::result_type(self, other), alpha);
  if (C10_UNLIKELY(self.is_complex() || other.is_complex()))  // Note [Complex tensors]
    return LowerComplexElementwise(op, {self, other}, out, &alpha);
  return LowerElementwise(op, {self, other}, out, ResultKind::kCommon, [&](Lowering& l, const V& v, DType t) {
    // bool: self || (alpha && other); alpha is a structural true/false here.
    if (t == DType::kBool) return alpha.toBool() ? l.b().Binary(OpCode::kOr, v[0], v[1]) : v[0];
    int y = ScaleByAlpha(l, v[1], alpha, t);
    return l.b().Binary(sub ? OpCode::kSubtract : OpCode::kAdd, v[0], y);
  });
}
at::Tensor add(const at::Tensor& s, const at::Tensor& o, const at::Scalar& a) { return AddSub("aten::add", false, s, o, a, Functional()); }
at::Tensor& add_(at::Tensor& s, const at::Tensor& o, const at::Scalar& a) { AddSub("aten::add", false, s, o, a, Inplace(s)); return s; }
at::Tensor& add_out(const at::Tensor& s, const at::Tensor& o, const at::Scalar& a, at::Tensor& out) { AddSub("aten::add", false, s, o, a, Out(out)); return out; }
at::Tensor add_s(const at::Tensor& s, const at::Scalar& o, const at::Scalar& a) { return ::tpu::torch_bridge::add(s, WrapScalar(o), a); }
at::Tensor& add_s_(at::Tensor& s, const at::Scalar& o, const at::Scalar& a) { return ::tpu::torch_bridge::add_(s, WrapScalar(o), a); }
at::Tensor sub(const at::Tensor& s, const at::Tensor& o, const at::Scalar& a) { return AddSub("aten::sub", true, s, o, a, Functional()); }
at::Tensor& sub_(at::Tensor& s, const at::Tensor& o, const at::Scalar& a) { AddSub("aten::sub", true, s, o, a, Inplace(s)); return s; }
at::Tensor& sub_out(const at::Tensor& s, const at::Tensor& o, const at::Scalar& a, at::Tensor& out) { AddSub("aten::sub", true, s, o, a, Out(out)); return out; }
at::Tensor sub_s(const at::Tensor& s, const at::Scalar& o, const at::Scalar& a) { return ::tpu::torch_bridge::sub(s, WrapScalar(o), a); }
at::Tensor& sub_s_(at::Tensor& s, const at::Scalar& o, const at::Scalar& a) { return ::tpu::torch_bridge::sub_(s, WrapScalar(o), a); }
at::Tensor rsub(const at::Tensor& s, const at::Tensor& o, const at::Scalar& a) { return AddSub("aten::rsub", true, o, s, a, Functional()); }
at::Tensor rsub_s(const at::Tensor& s, const at::Scalar& o, const at::Scalar& a) { return ::tpu::torch_bridge::rsub(s, WrapScalar(o), a); }

at::Tensor div(const at::Tensor& s, const at::Tensor& o) { return DivImpl(s, o, std::nullopt, Functional()); }
at::Tensor& div_(at::Tensor& s, const at::Tensor& o) { DivImpl(s, o, std::nullopt, Inplace(s)); return s; }
at::Tensor& div_out(const at::Tensor& s, const at::Tensor& o, at::Tensor& out) { DivImpl(s, o, std::nullopt, Out(out)); return out; }
at::Tensor div_s(const at::Tensor& s, const at::Scalar& o) { return ::tpu::torch_bridge::div(s, WrapScalar(o)); }
at::Tensor& div_s_(at::Tensor& s, const at::Scalar& o) { return ::tpu::torch_bridge::div_(s, WrapScalar(o)); }
at::Tensor div_mode(const at::Tensor& s, const at::Tensor& o, std::optional<c10::string_view> m) { CheckIntegerDivision(s, o, m); return DivImpl(s, o, m, Functional()); }
at::Tensor& div_mode_(at::Tensor& s, const at::Tensor& o, std::optional<c10::string_view> m) { CheckIntegerDivision(s, o, m); DivImpl(s, o, m, Inplace(s)); return s; }
at::Tensor& div_mode_out(const at::Tensor& s, const at::Tensor& o, std::optional<c10::string_view> m, at::Tensor& out) { CheckIntegerDivision(s, o, m); DivImpl(s, o, m, Out(out)); return out; }
at::Tensor div_s_mode(const at::Tensor& s, const at::Scalar& o, std::optional<c10::string_view> m) { return ::tpu::torch_bridge::div_mode(s, WrapScalar(o), m); }
at::Tensor& div_s_mode_(at::Tensor& s, const at::Scalar& o, std::optional<c10::string_view> m) { return ::tpu::torch_bridge::div_mode_(s, WrapScalar(o), m); }
at::Tensor floor_divide(const at::Tensor& s, const at::Tensor& o) { return ::tpu::torch_bridge::div_mode(s, o, "floor"); }
at::Tensor& floor_divide_(at::Tensor& s, const at::Tensor& o) { return ::tpu::torch_bridge::div_mode_(s, o, "floor"); }
at::Tensor& floor_divide_out(const at::Tensor& s, const at::Tensor& o, at::Tensor& out) { return ::tpu::torch_bridge::div_mode_out(s, o, "floor", out); }
at::Tensor floor_divide_s(const at::Tensor& s, const at::Scalar& o) { return ::tpu::torch_bridge::floor_divide(s, WrapScalar(o)); }

// pow
LoweredResult PowImpl(const at::Tensor& self, const at::Tensor& exponent, OutArg out) {
  return LowerElementwise("aten::pow", {self, exponent}, out, ResultKind::kCommon, [](Lowering& l, const V& v, DType t) {
    return l.b().Binary(OpCode::kPower, v[0], v[1]);
  });
}
at::Tensor pow_tt(const at::Tensor& s, const at::Tensor& e) { return PowImpl(s, e, Functional()); }
at::Tensor& pow_tt_(at::Tensor& s, const at::Tensor& e) { PowImpl(s, e, Inplace(s)); return s; }
at::Tensor& pow_tt_out(const at::Tensor& s, const at::Tensor& e, at::Tensor& out) { PowImpl(s, e, Out(out)); return out; }
// pow(tensor, scalar) with the exponents PyTorch's CPU kernel computes without pow (its
// pow_tensor_scalar fast path: 1 copies; 2 and 3 multiply; -0.5, -1 and -2 take a reciprocal,
// of a square root or a square), by the same formulas, so the results are the CPU's bits
// (test_pow_scalar_fast_exponents_match_cpu_bits). 1 and 2 are exact in every float dtype; the
// others are taken for float32 / float64 only (in bf16 the CPU rounds between the steps).
// Autograd's pow backward runs x.pow(e - 1): pow(x, 2) in a norm costs a pow(x, 1) in its
// backward, now a copy rather than a pow kernel.
LoweredResult PowScalarImpl(const at::Tensor& s, const at::Scalar& e, OutArg out) {
  const at::ScalarType st = s.scalar_type();
  if (!at::isFloatingType(st) || e.isComplex()) return PowImpl(s, WrapScalar(e), out);
  auto fast = [&](auto&& f) { return LowerElementwise("aten::pow", {s}, out, ResultKind::kCommon, f); };
  auto recip = [](Lowering& l, int v) { return l.b().Binary(OpCode::kDivide, l.b().ScalarLike(1.0, v), v); };
  auto square = [](Lowering& l, int v) { return l.b().Binary(OpCode::kMultiply, v, v); };
  if (e.equal(1)) return fast([](Lowering&, const V& v, DType) { return v[0]; });
  if (e.equal(2)) return fast([&](Lowering& l, const V& v, DType) { return square(l, v[0]); });
  if (st == at::kFloat || st == at::kDouble) {
    if (e.equal(3))
      return fast([&](Lowering& l, const V& v, DType) { return l.b().Binary(OpCode::kMultiply, square(l, v[0]), v[0]); });
    if (e.equal(-0.5))
      return fast([&](Lowering& l, const V& v, DType) { return recip(l, l.b().Unary(OpCode::kSqrt, v[0])); });
    if (e.equal(-1)) return fast([&](Lowering& l, const V& v, DType) { return recip(l, v[0]); });
    if (e.equal(-2)) return fast([&](Lowering& l, const V& v, DType) { return recip(l, square(l, v[0])); });
  }
  return PowImpl(s, WrapScalar(e), out);
}
at::Tensor pow_ts(const at::Tensor& s, const at::Scalar& e) { return PowScalarImpl(s, e, Functional()); }
at::Tensor& pow_ts_(at::Tensor& s, const at::Scalar& e) { PowScalarImpl(s, e, Inplace(s)); return s; }
at::Tensor& pow_ts_out(const at::Tensor& s, const at::Scalar& e, at::Tensor& out) { PowScalarImpl(s, e, Out(out)); return out; }
at::Tensor pow_st(const at::Scalar& s, const at::Tensor& e) { return PowImpl(WrapScalar(s), e, Functional()); }

// where
at::Tensor WhereImpl(const at::Tensor& cond, const at::Tensor& self, const at::Tensor& other, OutArg out) {
  TORCH_CHECK(cond.scalar_type() == at::kBool || cond.scalar_type() == at::kByte,
              "where expected condition to be a boolean tensor, but got a tensor with dtype ", cond.scalar_type());
  at::ScalarType common = at::result_type(self, other);
  at::DimVector shape = at::infer_size_dimvector(at::infer_size_dimvector(cond.sizes(), self.sizes()), other.sizes());
  const at::Tensor& like = cond.device().type() == c10::DeviceType::PrivateUse1 ? cond
                         : self.device().type() == c10::DeviceType::PrivateUse1 ? self : other;
  at::Tensor result =
      *PrepareOut("aten::where", out, shape, common, like, out.t ? std::nullopt : ResultFormat({cond, self, other}, shape));
  if (result.numel() == 0) return result;
  if (out.t) CheckOutOverlap(result, {cond, self, other});
  Lowering l("aten::where");
  Dims dims = ToDims(shape);
  auto in = [&](const at::Tensor& t, at::ScalarType dt) {
    return l.b().BroadcastTo(IsCpuScalar(t) ? l.Scalar(t.item(), dt) : l.Input(t, dt), dims);
  };
  int c = in(cond, at::kBool);
  int a = in(self, common), b = in(other, common);
  l.Output(l.b().Select(c, a, b), result);
  l.Run();
  return result;
}
at::Tensor where_self(const at::Tensor& c, const at::Tensor& s, const at::Tensor& o) { return WhereImpl(c, s, o, Functional()); }
at::Tensor& where_self_out(const at::Tensor& c, const at::Tensor& s, const at::Tensor& o, at::Tensor& out) { WhereImpl(c, s, o, Out(out)); return out; }

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
// `out`: the overload name of the Tensor out= form (mul.out, but eq.Tensor_out: a registration
// under a name with no schema is accepted silently and never called -- test_registrations.py).
#define TPU_REG_BINARY(name, fname, out)               \
  m.impl(#name ".Tensor", fname);                      \
  m.impl(#name "_.Tensor", fname##_);                  \
  m.impl(#name "." #out, fname##_out);                 \
  m.impl(#name ".Scalar", fname##_s);                  \
  m.impl(#name "_.Scalar", fname##_s_);
  TPU_REG_BINARY(mul, mul, out)
  TPU_REG_BINARY(eq, eq, Tensor_out)
  TPU_REG_BINARY(ne, ne, Tensor_out)
  TPU_REG_BINARY(lt, lt, Tensor_out)
  TPU_REG_BINARY(le, le, Tensor_out)
  TPU_REG_BINARY(gt, gt, Tensor_out)
  TPU_REG_BINARY(ge, ge, Tensor_out)
  TPU_REG_BINARY(remainder, remainder, Tensor_out)
  TPU_REG_BINARY(fmod, fmod, Tensor_out)
  TPU_REG_BINARY(bitwise_and, bitwise_and, Tensor_out)
  TPU_REG_BINARY(bitwise_or, bitwise_or, Tensor_out)
  TPU_REG_BINARY(bitwise_xor, bitwise_xor, Tensor_out)
  m.impl("eq.Scalar_out", eq_s_out);
  m.impl("ne.Scalar_out", ne_s_out);
  m.impl("lt.Scalar_out", lt_s_out);
  m.impl("le.Scalar_out", le_s_out);
  m.impl("gt.Scalar_out", gt_s_out);
  m.impl("ge.Scalar_out", ge_s_out);
  m.impl("maximum", maximum);
  m.impl("maximum.out", maximum_out);
  m.impl("minimum", minimum);
  m.impl("minimum.out", minimum_out);
  m.impl("atan2", atan2);
  m.impl("atan2_", atan2_);
  m.impl("atan2.out", atan2_out);
  m.impl("logical_and.out", logical_and_out);
  m.impl("logical_or.out", logical_or_out);
  m.impl("logical_xor.out", logical_xor_out);
  m.impl("logical_not.out", logical_not_out);
  m.impl("bitwise_not.out", bitwise_not_out);
  m.impl("add.Tensor", add);
  m.impl("add_.Tensor", add_);
  m.impl("add.out", add_out);
  m.impl("add.Scalar", add_s);
  m.impl("add_.Scalar", add_s_);
  m.impl("sub.Tensor", sub);
  m.impl("sub_.Tensor", sub_);
  m.impl("sub.out", sub_out);
  m.impl("sub.Scalar", sub_s);
  m.impl("sub_.Scalar", sub_s_);
  m.impl("rsub.Tensor", rsub);
  m.impl("rsub.Scalar", rsub_s);
  m.impl("div.Tensor", div);
  m.impl("div_.Tensor", div_);
  m.impl("div.out", div_out);
  m.impl("div.Scalar", div_s);
  m.impl("div_.Scalar", div_s_);
  m.impl("div.Tensor_mode", div_mode);
  m.impl("div_.Tensor_mode", div_mode_);
  m.impl("div.out_mode", div_mode_out);
  m.impl("div.Scalar_mode", div_s_mode);
  m.impl("div_.Scalar_mode", div_s_mode_);
  m.impl("floor_divide", floor_divide);
  m.impl("floor_divide_.Tensor", floor_divide_);
  m.impl("floor_divide.out", floor_divide_out);
  m.impl("floor_divide.Scalar", floor_divide_s);
  m.impl("pow.Tensor_Tensor", pow_tt);
  m.impl("pow_.Tensor", pow_tt_);
  m.impl("pow.Tensor_Tensor_out", pow_tt_out);
  m.impl("pow.Tensor_Scalar", pow_ts);
  m.impl("pow_.Scalar", pow_ts_);
  m.impl("pow.Tensor_Scalar_out", pow_ts_out);
  m.impl("pow.Scalar", pow_st);
  m.impl("where.self", where_self);
  m.impl("where.self_out", where_self_out);
}

}  // namespace tpu::torch_bridge
