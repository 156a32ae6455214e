// Unary elementwise ops: math functions, rounding, sign, NaN/Inf predicates and nan_to_num.
// Each op is one table entry (its integer/bool rule and its formula); the functional, in-place
// and out= kernels are generated from it. Clamp, lerp, addcmul/addcdiv and masked_fill_ live in
// pointwise.cc.
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <string_view>

#include "torch/lower/pointwise_expr.h"

namespace tpu::torch_bridge {
namespace {

using V = ValueList;

// How a unary op treats integer and bool inputs, following PyTorch.
enum class Ints : uint8_t {
  kToFloat,     // computed in the default float dtype (exp, sqrt, sin, ...)
  kKeep,        // computed in the input's dtype, bool included (sign)
  kKeepNoBool,  // computed in the input's dtype; bool is not implemented (abs, neg)
  kIdentity,    // integers come back unchanged; bool is not implemented (floor, round, ...)
  kFloatOnly,   // integers and bool are not implemented (frac)
};

struct UnaryOp {
  const char* op;
  const char* kernel;  // named in "not implemented for" errors
  Ints ints;
  int (*fn)(Expr& e, int x);         // x is in the compute dtype
  const char* bool_error = nullptr;  // PyTorch's own message for bool inputs, if it has one
};

LoweredResult RunUnary(const UnaryOp& u, const at::Tensor& self, OutArg out) {
  at::ScalarType st = self.scalar_type();
  if (C10_UNLIKELY(at::isComplexType(st))) {  // Note [Complex tensors]
    TORCH_CHECK(std::string_view(u.op) != "aten::sign", "Unlike NumPy, torch.sign is not intended to support complex numbers. Please use "
                "torch.sgn instead.");
    return LowerComplexElementwise(u.op, {self}, out, nullptr);
  }
  if (u.bool_error) TORCH_CHECK(st != at::kBool, u.bool_error);
  if (u.ints == Ints::kFloatOnly)
    CheckKernelDType(!at::isIntegralType(st, /*includeBool=*/true), u.kernel, st);
  if (u.ints == Ints::kKeepNoBool || u.ints == Ints::kIdentity)
    CheckKernelDType(st != at::kBool, u.kernel, st);
  ResultKind kind = u.ints == Ints::kToFloat ? ResultKind::kFloat : ResultKind::kCommon;
  if (kind == ResultKind::kCommon) CheckOutDType(out, st);  // float ops may cast to out's dtype
  return LowerElementwise(u.op, {self}, out, kind, [&](Lowering& l, const V& v, DType t) {
    if (u.ints == Ints::kIdentity && !IsFloat(t)) return v[0];
    Expr e(l, v[0]);
    return u.fn(e, v[0]);
  });
}

template <const UnaryOp& U>
at::Tensor UnaryFunctional(const at::Tensor& self) {
  return RunUnary(U, self, Functional());
}
template <const UnaryOp& U>
at::Tensor& UnaryInplace(at::Tensor& self) {
  RunUnary(U, self, Inplace(self));
  return self;
}
template <const UnaryOp& U>
at::Tensor& UnaryOut(const at::Tensor& self, at::Tensor& out) {
  RunUnary(U, self, Out(out));
  return out;
}

// ---- formulas ---------------------------------------------------------------------------------
int Sign(Expr& e, int x) {
  if (e.dtype() == DType::kBool) return x;
  // StableHLO's sign takes signed or float operands only.
  if (!e.is_float() && !IsSignedInt(e.dtype())) return e.Select(e.Ne(x, e.K(0)), e.K(1), e.K(0));
  int s = e.b().Unary(OpCode::kSign, x);
  return e.is_float() ? e.Select(e.IsNan(x), e.K(0), s) : s;  // PyTorch: sign(nan) = 0
}
int Abs(Expr& e, int x) { return !e.is_float() && !IsSignedInt(e.dtype()) ? x : e.Abs(x); }
int Neg(Expr& e, int x) { return e.Neg(x); }
int Exp(Expr& e, int x) { return e.Exp(x); }
// pow(2, x) rather than exp(x * ln 2): the product's rounding error grows with |x|.
int Exp2(Expr& e, int x) { return e.Pow(e.K(2), x); }
int Expm1(Expr& e, int x) { return e.b().Unary(OpCode::kExpm1, x); }
int Log(Expr& e, int x) { return e.Log(x); }
// log2/log10 have no StableHLO op: log(x) scaled, within 2 ulp of the correctly rounded result.
int Log2(Expr& e, int x) { return e.Mul(e.Log(x), e.K(1.0 / M_LN2)); }
int Log10(Expr& e, int x) { return e.Mul(e.Log(x), e.K(1.0 / M_LN10)); }
int Log1p(Expr& e, int x) { return e.Log1p(x); }
int Sqrt(Expr& e, int x) { return e.b().Unary(OpCode::kSqrt, x); }
int Rsqrt(Expr& e, int x) { return e.b().Unary(OpCode::kRsqrt, x); }
int Reciprocal(Expr& e, int x) { return e.Div(e.K(1), x); }
int Sin(Expr& e, int x) { return e.b().Unary(OpCode::kSine, x); }
int Cos(Expr& e, int x) { return e.b().Unary(OpCode::kCosine, x); }
// No tan in the op table: sin/cos is within 3 ulp, also near the poles (cos keeps its relative
// accuracy there).
int Tan(Expr& e, int x) { return e.Div(Sin(e, x), Cos(e, x)); }
int Tanh(Expr& e, int x) { return e.Tanh(x); }
int Sigmoid(Expr& e, int x) { return e.b().Unary(OpCode::kLogistic, x); }
int Erf(Expr& e, int x) { return e.Erf(x); }
int Floor(Expr& e, int x) { return e.Floor(x); }
int Ceil(Expr& e, int x) { return e.Ceil(x); }
int Round(Expr& e, int x) { return e.b().Unary(OpCode::kRoundNearestEven, x); }  // nearbyint
// ceil for negatives keeps -0.0 where sign(x) * floor(|x|) would not.
int Trunc(Expr& e, int x) { return e.Select(e.Lt(x, e.K(0)), e.Ceil(x), e.Floor(x)); }
int Frac(Expr& e, int x) { return e.Sub(x, Trunc(e, x)); }

constexpr char kNegBool[] =
    "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a "
    "mask, use the `~` or `logical_not()` operator instead.";

constexpr UnaryOp kNegOp{"aten::neg", "neg_tpu", Ints::kKeepNoBool, Neg, kNegBool};
constexpr UnaryOp kAbsOp{"aten::abs", "abs_tpu", Ints::kKeepNoBool, Abs};
constexpr UnaryOp kSignOp{"aten::sign", "sign_tpu", Ints::kKeep, Sign};
constexpr UnaryOp kSgnOp{"aten::sgn", "sgn_tpu", Ints::kKeep, Sign};
constexpr UnaryOp kExpOp{"aten::exp", "exp_tpu", Ints::kToFloat, Exp};
constexpr UnaryOp kExp2Op{"aten::exp2", "exp2_tpu", Ints::kToFloat, Exp2};
constexpr UnaryOp kExpm1Op{"aten::expm1", "expm1_tpu", Ints::kToFloat, Expm1};
constexpr UnaryOp kLogOp{"aten::log", "log_tpu", Ints::kToFloat, Log};
constexpr UnaryOp kLog2Op{"aten::log2", "log2_tpu", Ints::kToFloat, Log2};
constexpr UnaryOp kLog10Op{"aten::log10", "log10_tpu", Ints::kToFloat, Log10};
constexpr UnaryOp kLog1pOp{"aten::log1p", "log1p_tpu", Ints::kToFloat, Log1p};
constexpr UnaryOp kSqrtOp{"aten::sqrt", "sqrt_tpu", Ints::kToFloat, Sqrt};
constexpr UnaryOp kRsqrtOp{"aten::rsqrt", "rsqrt_tpu", Ints::kToFloat, Rsqrt};
constexpr UnaryOp kReciprocalOp{"aten::reciprocal", "reciprocal_tpu", Ints::kToFloat, Reciprocal};
constexpr UnaryOp kSinOp{"aten::sin", "sin_tpu", Ints::kToFloat, Sin};
constexpr UnaryOp kCosOp{"aten::cos", "cos_tpu", Ints::kToFloat, Cos};
constexpr UnaryOp kTanOp{"aten::tan", "tan_tpu", Ints::kToFloat, Tan};
constexpr UnaryOp kTanhOp{"aten::tanh", "tanh_tpu", Ints::kToFloat, Tanh};
constexpr UnaryOp kSigmoidOp{"aten::sigmoid", "sigmoid_tpu", Ints::kToFloat, Sigmoid};
constexpr UnaryOp kErfOp{"aten::erf", "erf_tpu", Ints::kToFloat, Erf};
constexpr UnaryOp kFloorOp{"aten::floor", "floor_tpu", Ints::kIdentity, Floor};
constexpr UnaryOp kCeilOp{"aten::ceil", "ceil_tpu", Ints::kIdentity, Ceil};
constexpr UnaryOp kRoundOp{"aten::round", "round_tpu", Ints::kIdentity, Round};
constexpr UnaryOp kTruncOp{"aten::trunc", "trunc_tpu", Ints::kIdentity, Trunc};
constexpr UnaryOp kFracOp{"aten::frac", "frac_tpu", Ints::kFloatOnly, Frac};

// A value PyTorch casts to the op-math type with static_cast (overflow gives inf, not an error).
at::Scalar OpMathValue(double v, DType t) {
  return t == DType::kF64 ? at::Scalar(v) : at::Scalar(static_cast<double>(static_cast<float>(v)));
}

// round(x, decimals): scaled, rounded half to even, scaled back, as ATen's CPU kernel does.
LoweredResult RoundDecimals(const at::Tensor& self, int64_t decimals, OutArg out) {
  CheckKernelDType(at::isFloatingType(self.scalar_type()), "round_tpu", self.scalar_type());
  if (decimals == 0) return RunUnary(kRoundOp, self, out);
  CheckOutDType(out, self.scalar_type());
  bool negative = decimals < 0;
  double scale = std::pow(10.0, static_cast<double>(negative ? -decimals : decimals));
  return LowerElementwise(
      "aten::round", {self}, out, ResultKind::kCommon, [&](Lowering& l, const V& v, DType t) {
        Expr e(l, v[0]);
        int p = e.P(OpMathValue(scale, t));
        return negative ? e.Mul(Round(e, e.Div(v[0], p)), p) : e.Div(Round(e, e.Mul(v[0], p)), p);
      });
}
at::Tensor round_decimals(const at::Tensor& s, int64_t d) {
  return RoundDecimals(s, d, Functional());
}
at::Tensor& round_decimals_(at::Tensor& s, int64_t d) {
  RoundDecimals(s, d, Inplace(s));
  return s;
}
at::Tensor& round_decimals_out(const at::Tensor& s, int64_t d, at::Tensor& out) {
  RoundDecimals(s, d, Out(out));
  return out;
}

// ---- predicates ------------------------------------------------------------------------------
LoweredResult Predicate(const char* op, const at::Tensor& self, OutArg out, int (*fn)(Expr&, int)) {
  if (out.t && out.t->defined() && out.t->scalar_type() != at::kBool) {
    bool inf_sign =
        op == std::string_view("aten::isposinf") || op == std::string_view("aten::isneginf");
    TORCH_CHECK(!inf_sign, op + 6, " does not support non-boolean outputs.");
    TORCH_CHECK(false, "Expected out tensor to have dtype bool, but got ", out.t->dtype(),
                " instead");
  }
  return LowerElementwise(op, {self}, out, ResultKind::kBool, [&](Lowering& l, const V& v, DType) {
    Expr e(l, v[0]);
    return fn(e, v[0]);
  });
}
// Integers are never NaN or infinite: x != x is an all-false mask of the right shape.
int IsNan(Expr& e, int x) { return e.IsNan(x); }
int IsInf(Expr& e, int x) { return e.is_float() ? e.Eq(e.Abs(x), e.K(INFINITY)) : e.Ne(x, x); }
int IsPosInf(Expr& e, int x) { return e.is_float() ? e.Eq(x, e.K(INFINITY)) : e.Ne(x, x); }
int IsNegInf(Expr& e, int x) { return e.is_float() ? e.Eq(x, e.K(-INFINITY)) : e.Ne(x, x); }

#define TPU_PREDICATE(name, FN)                                                                   \
  at::Tensor name(const at::Tensor& s) { return Predicate("aten::" #name, s, Functional(), FN); } \
  at::Tensor& name##_out(const at::Tensor& s, at::Tensor& out) {                                  \
    Predicate("aten::" #name, s, Out(out), FN);                                                   \
    return out;                                                                                   \
  }
TPU_PREDICATE(isnan, IsNan)
TPU_PREDICATE(isinf, IsInf)
TPU_PREDICATE(isposinf, IsPosInf)
TPU_PREDICATE(isneginf, IsNegInf)
#undef TPU_PREDICATE

// ---- nan_to_num ------------------------------------------------------------------------------
at::Tensor NanToNum(const at::Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                    std::optional<double> neginf, OutArg out) {
  at::ScalarType st = self.scalar_type();
  if (out.t && out.t->defined())
    TORCH_CHECK(out.t->scalar_type() == st, "nan_to_num: dtype of out: ", out.t->scalar_type(),
                " should be same as input: ", st);
  double hi = 0, lo = 0;
  if (at::isFloatingType(st)) {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, st, "nan_to_num", [&] {
      hi = static_cast<double>(std::numeric_limits<scalar_t>::max());
      lo = static_cast<double>(std::numeric_limits<scalar_t>::lowest());
    });
  }
  return LowerElementwise(
      "aten::nan_to_num", {self}, out, ResultKind::kCommon, [&](Lowering& l, const V& v, DType t) {
        if (!IsFloat(t)) return v[0];  // integers have nothing to replace
        Expr e(l, v[0]);
        int x = v[0];
        int r = e.Select(e.Eq(x, e.K(-INFINITY)), e.P(OpMathValue(neginf.value_or(lo), t)), x);
        r = e.Select(e.Eq(x, e.K(INFINITY)), e.P(OpMathValue(posinf.value_or(hi), t)), r);
        return e.Select(e.IsNan(x), e.P(OpMathValue(nan.value_or(0.0), t)), r);
      });
}
at::Tensor nan_to_num(const at::Tensor& s, std::optional<double> n, std::optional<double> p,
                      std::optional<double> m) {
  return NanToNum(s, n, p, m, Functional());
}
at::Tensor& nan_to_num_(at::Tensor& s, std::optional<double> n, std::optional<double> p,
                        std::optional<double> m) {
  NanToNum(s, n, p, m, Inplace(s));
  return s;
}
at::Tensor& nan_to_num_out(const at::Tensor& s, std::optional<double> n, std::optional<double> p,
                           std::optional<double> m, at::Tensor& out) {
  NanToNum(s, n, p, m, Out(out));
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
#define TPU_REG_UNARY(name, spec)        \
  m.impl(#name, UnaryFunctional<spec>);  \
  m.impl(#name "_", UnaryInplace<spec>); \
  m.impl(#name ".out", UnaryOut<spec>);
  TPU_REG_UNARY(neg, kNegOp)
  TPU_REG_UNARY(abs, kAbsOp)
  TPU_REG_UNARY(sign, kSignOp)
  TPU_REG_UNARY(sgn, kSgnOp)
  TPU_REG_UNARY(exp, kExpOp)
  TPU_REG_UNARY(exp2, kExp2Op)
  TPU_REG_UNARY(expm1, kExpm1Op)
  TPU_REG_UNARY(log, kLogOp)
  TPU_REG_UNARY(log2, kLog2Op)
  TPU_REG_UNARY(log10, kLog10Op)
  TPU_REG_UNARY(log1p, kLog1pOp)
  TPU_REG_UNARY(sqrt, kSqrtOp)
  TPU_REG_UNARY(rsqrt, kRsqrtOp)
  TPU_REG_UNARY(reciprocal, kReciprocalOp)
  TPU_REG_UNARY(sin, kSinOp)
  TPU_REG_UNARY(cos, kCosOp)
  TPU_REG_UNARY(tan, kTanOp)
  TPU_REG_UNARY(tanh, kTanhOp)
  TPU_REG_UNARY(sigmoid, kSigmoidOp)
  TPU_REG_UNARY(erf, kErfOp)
  TPU_REG_UNARY(floor, kFloorOp)
  TPU_REG_UNARY(ceil, kCeilOp)
  TPU_REG_UNARY(round, kRoundOp)
  TPU_REG_UNARY(trunc, kTruncOp)
  TPU_REG_UNARY(frac, kFracOp)
#undef TPU_REG_UNARY
  m.impl("round.decimals", round_decimals);
  m.impl("round_.decimals", round_decimals_);
  m.impl("round.decimals_out", round_decimals_out);
  m.impl("isnan", isnan);
  m.impl("isnan.out", isnan_out);
  m.impl("isinf", isinf);
  m.impl("isinf.out", isinf_out);
  m.impl("isposinf", isposinf);
  m.impl("isposinf.out", isposinf_out);
  m.impl("isneginf", isneginf);
  m.impl("isneginf.out", isneginf_out);
  m.impl("nan_to_num", nan_to_num);
  m.impl("nan_to_num_", nan_to_num_);
  m.impl("nan_to_num.out", nan_to_num_out);
}

}  // namespace tpu::torch_bridge
