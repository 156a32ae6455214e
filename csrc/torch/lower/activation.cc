// Activation functions and their backward kernels. Each formula follows ATen's vectorized CPU
// kernel operation for operation (and its choice of branch for NaN), so float32 results agree to
// the rounding of the math functions; bfloat16/float16 compute in float32 and round once.
#include <torch/library.h>

#include <cmath>

#include "torch/lower/activation_util.h"

namespace tpu::torch_bridge {
namespace {

using V = ValueList;

// ---- relu / threshold ------------------------------------------------------------------------
LoweredResult Relu(const at::Tensor& self, OutArg out) {
  TORCH_CHECK(self.scalar_type() != at::kBool, "Boolean inputs not supported for relu");
  return Act(
      "aten::relu", "relu_tpu", self, out, [](Expr& e, int x) { return e.Max(x, e.K(0)); },
      kIntsOk);
}

// x <= threshold ? value : x (threshold truncates to integer dtypes; bfloat16 compares in float32)
at::Tensor Threshold(const at::Tensor& self, const at::Scalar& th, const at::Scalar& value,
                     OutArg out) {
  return Act(
      "aten::threshold", "threshold_tpu", self, out,
      [&](Expr& e, int x) {
        int th_v = e.P(th);  // parameters in a fixed order, not argument evaluation order
        return e.Select(e.Le(x, th_v), e.P(value), x);
      },
      kIntsOk | kCastsOut);
}
at::Tensor ThresholdBackward(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& th,
                             OutArg out) {
  return Bwd(
      "aten::threshold_backward", "threshold_tpu", grad, self, out,
      [&](Expr& e, int g, int x) { return e.Select(e.Le(x, e.P(th)), e.K(0), g); }, /*ints=*/true);
}

// ---- gelu ------------------------------------------------------------------------------------
bool GeluIsTanh(c10::string_view approximate) {
  if (approximate == "tanh") return true;
  TORCH_CHECK(approximate == "none", "approximate argument must be either none or tanh.");
  return false;
}
constexpr double kGeluBeta = M_SQRT2 * M_2_SQRTPI * 0.5;  // sqrt(2 / pi)
constexpr double kGeluKappa = 0.044715;

// gelu(-inf) = 0 (the formula alone gives -inf * 0 = NaN) and gelu(+inf) = +inf, the limits, as
// ATen's current kernels return them.
LoweredResult Gelu(const at::Tensor& self, c10::string_view approximate, OutArg out) {
  bool tanh = GeluIsTanh(approximate);
  return Act("aten::gelu", "gelu_tpu", self, out, [&](Expr& e, int x) {
    int r;
    if (tanh) {
      int cube = e.Mul(e.Mul(x, x), x);
      int inner = e.Mul(e.K(kGeluBeta), e.Add(x, e.Mul(e.K(kGeluKappa), cube)));
      r = e.Mul(e.Mul(e.K(0.5), x), e.Add(e.K(1), e.Tanh(inner)));
    } else {
      r = e.Mul(e.Mul(x, e.K(0.5)), e.Add(e.K(1), e.Erf(e.Mul(x, e.K(M_SQRT1_2)))));
    }
    return e.Select(e.Eq(x, e.K(-INFINITY)), e.K(0), r);
  });
}
at::Tensor GeluBackward(const at::Tensor& grad, const at::Tensor& self,
                        c10::string_view approximate, OutArg out) {
  bool tanh = GeluIsTanh(approximate);
  return Bwd(
      "aten::gelu_backward", "gelu_backward_tpu", grad, self, out, [&](Expr& e, int dy, int x) {
        if (tanh) {
          int x_sq = e.Mul(x, x);
          int inner = e.Mul(e.K(kGeluBeta), e.Add(x, e.Mul(e.K(kGeluKappa), e.Mul(x_sq, x))));
          int t = e.Tanh(inner);
          int left = e.Mul(e.K(0.5), x);
          int left_derivative = e.Mul(e.K(0.5), e.Add(e.K(1), t));
          int tanh_derivative = e.Sub(e.K(1), e.Mul(t, t));
          int inner_derivative =
              e.Mul(e.K(kGeluBeta), e.Add(e.K(1), e.Mul(e.Mul(e.K(3), e.K(kGeluKappa)), x_sq)));
          int right_derivative = e.Mul(e.Mul(left, tanh_derivative), inner_derivative);
          return e.Mul(dy, e.Add(left_derivative, right_derivative));
        }
        int cdf = e.Mul(e.K(0.5), e.Add(e.K(1), e.Erf(e.Mul(x, e.K(M_SQRT1_2)))));
        int pdf = e.Mul(e.K(M_2_SQRTPI * M_SQRT1_2 * 0.5), e.Exp(e.Mul(e.Mul(x, x), e.K(-0.5))));
        return e.Mul(dy, e.Add(cdf, e.Mul(x, pdf)));
      });
}

// ---- silu / mish -----------------------------------------------------------------------------
LoweredResult Silu(const at::Tensor& self, OutArg out) {
  return Act("aten::silu", "silu_tpu", self, out,
             [](Expr& e, int x) { return e.Mul(x, e.Sigmoid(x)); });  // (ATen: x / (1 + exp(-x)))
}
LoweredResult SiluBackward(const at::Tensor& grad, const at::Tensor& self, OutArg out) {
  return Bwd("aten::silu_backward", "silu_backward_tpu", grad, self, out,
             [](Expr& e, int dy, int x) {
               int s = e.Sigmoid(x);
               return e.Mul(e.Mul(dy, s), e.Add(e.K(1), e.Mul(x, e.Sub(e.K(1), s))));
             });
}
int TanhSoftplus(Expr& e, int x) { return e.Tanh(e.Log1p(e.Exp(x))); }
LoweredResult Mish(const at::Tensor& self, OutArg out) {
  return Act("aten::mish", "mish_tpu", self, out,
             [](Expr& e, int x) { return e.Mul(x, TanhSoftplus(e, x)); });
}
LoweredResult MishBackward(const at::Tensor& grad, const at::Tensor& self, OutArg out) {
  return Bwd("aten::mish_backward", "mish_backward_tpu", grad, self, out,
             [](Expr& e, int dy, int x) {
               int s = e.Sigmoid(x);
               int t = TanhSoftplus(e, x);
               return e.Mul(dy, e.Add(t, e.Mul(e.Mul(x, s), e.Sub(e.K(1), e.Mul(t, t)))));
             });
}

// ---- hardtanh / leaky_relu / elu / softplus --------------------------------------------------
at::Tensor Hardtanh(const at::Tensor& self, const at::Scalar& lo, const at::Scalar& hi,
                    OutArg out) {
  TORCH_CHECK(self.scalar_type() != at::kBool, "Bool inputs not supported for hardtanh");
  return Act(
      "aten::hardtanh", "hardtanh_tpu", self, out,
      [&](Expr& e, int x) {
        int lo_v = e.P(lo);  // parameters in a fixed order, not argument evaluation order
        return e.Min(e.Max(x, lo_v), e.P(hi));
      },
      kIntsOk);
}
// The vectorized kernel's mask: a NaN input gets a zero gradient.
at::Tensor HardtanhBackward(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& lo,
                            const at::Scalar& hi, OutArg out) {
  return Bwd("aten::hardtanh_backward", "hardtanh_backward_tpu", grad, self, out,
             [&](Expr& e, int g, int x) {
               int lo_v = e.P(lo), hi_v = e.P(hi);  // a fixed parameter order
               return e.Select(e.And(e.Gt(x, lo_v), e.Lt(x, hi_v)), g, e.K(0));
             });
}

LoweredResult LeakyRelu(const at::Tensor& self, const at::Scalar& slope, OutArg out) {
  return Act("aten::leaky_relu", "leaky_relu_tpu", self, out,
             [&](Expr& e, int x) { return e.Select(e.Gt(x, e.K(0)), x, e.Mul(x, e.P(slope))); });
}
at::Tensor LeakyReluBackward(const at::Tensor& grad, const at::Tensor& self,
                             const at::Scalar& slope, bool is_result, OutArg out) {
  TORCH_CHECK(!is_result || slope.to<double>() >= 0.0,
              "In-place leakyReLu backward calculation is triggered with a negative slope which is "
              "not supported. This is caused by calling in-place forward function with a negative "
              "slope, please call out-of-place version instead. File an issue at "
              "https://github.com/pytorch/pytorch if you do require supporting in-place leakRelu "
              "backward calculation with negative slope");
  return Bwd(
      "aten::leaky_relu_backward", "leaky_relu_backward_tpu", grad, self, out,
      [&](Expr& e, int g, int x) { return e.Select(e.Gt(x, e.K(0)), g, e.Mul(g, e.P(slope))); });
}

// x > 0 ? x * scale : (exp(x * input_scale) - 1) * alpha * scale
at::Tensor Elu(const at::Tensor& self, const at::Scalar& alpha, const at::Scalar& scale,
               const at::Scalar& input_scale, OutArg out) {
  return Act("aten::elu", "elu_tpu", self, out, [&](Expr& e, int x) {
    int poscoef = e.P(scale);
    int negcoef = e.Mul(e.P(alpha), poscoef);
    int neg = e.Mul(e.Sub(e.Exp(e.Mul(x, e.P(input_scale))), e.K(1)), negcoef);
    return e.Select(e.Gt(x, e.K(0)), e.Mul(x, poscoef), neg);
  });
}
at::Tensor EluBackward(const at::Tensor& grad, const at::Scalar& alpha, const at::Scalar& scale,
                       const at::Scalar& input_scale, bool is_result,
                       const at::Tensor& self_or_result, OutArg out) {
  TORCH_CHECK(!is_result || alpha.to<double>() >= 0.0,
              "In-place elu backward calculation is triggered with a negative slope which is not "
              "supported. This is caused by calling in-place forward function with a negative "
              "slope, please call out-of-place version instead.");
  return Bwd("aten::elu_backward", "elu_backward_tpu", grad, self_or_result, out,
             [&](Expr& e, int g, int b) {
               int poscoef = e.P(scale), negiptcoef = e.P(input_scale);
               int negcoef = e.Mul(e.P(alpha), poscoef);
               int gi = e.Mul(g, negiptcoef);
               // From the result: d/dx = input_scale * (y + alpha * scale) on the negative side.
               int neg = is_result ? e.Mul(gi, e.Add(b, negcoef))
                                   : e.Mul(e.Mul(gi, negcoef), e.Exp(e.Mul(b, negiptcoef)));
               return e.Select(e.Gt(b, e.K(0)), e.Mul(g, poscoef), neg);
             });
}

// x * beta > threshold ? x : log1p(exp(x * beta)) / beta
at::Tensor Softplus(const at::Tensor& self, const at::Scalar& beta, const at::Scalar& th,
                    OutArg out) {
  return Act("aten::softplus", "softplus_tpu", self, out, [&](Expr& e, int x) {
    int b = e.P(beta);
    int xb = e.Mul(x, b);
    return e.Select(e.Gt(xb, e.P(th)), x, e.Div(e.Log1p(e.Exp(xb)), b));
  });
}
at::Tensor SoftplusBackward(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& beta,
                            const at::Scalar& th, OutArg out) {
  return Bwd("aten::softplus_backward", "softplus_backward_tpu", grad, self, out,
             [&](Expr& e, int g, int x) {
               int xb = e.Mul(x, e.P(beta));
               int z = e.Exp(xb);
               return e.Select(e.Gt(xb, e.P(th)), g, e.Div(e.Mul(g, z), e.Add(z, e.K(1))));
             });
}

// ---- hardsigmoid / hardswish -----------------------------------------------------------------
int Relu6Shifted(Expr& e, int x) {
  return e.Min(e.Max(e.Add(x, e.K(3)), e.K(0)), e.K(6));
}  // clamp(x + 3, 0, 6)
LoweredResult Hardsigmoid(const at::Tensor& self, OutArg out) {
  return Act("aten::hardsigmoid", "hardsigmoid_tpu", self, out,
             [](Expr& e, int x) { return e.Div(Relu6Shifted(e, x), e.K(6)); });
}
LoweredResult HardsigmoidBackward(const at::Tensor& grad, const at::Tensor& self, OutArg out) {
  return Bwd("aten::hardsigmoid_backward", "hardsigmoid_backward_tpu", grad, self, out,
             [](Expr& e, int g, int x) {
               int inside = e.And(e.Gt(x, e.K(-3)), e.Lt(x, e.K(3)));
               return e.Select(inside, e.Mul(g, e.K(1.0f / 6.0f)),
                               e.K(0));  // ATen's constant is a float
             });
}
LoweredResult Hardswish(const at::Tensor& self, OutArg out) {
  return Act("aten::hardswish", "hardswish_tpu", self, out,
             [](Expr& e, int x) { return e.Div(e.Mul(x, Relu6Shifted(e, x)), e.K(6)); });
}
LoweredResult HardswishBackward(const at::Tensor& grad, const at::Tensor& self, OutArg out) {
  return Bwd("aten::hardswish_backward", "hardswish_backward_tpu", grad, self, out,
             [](Expr& e, int g, int x) {
               int mid = e.Mul(g, e.Add(e.Div(x, e.K(3)), e.K(0.5)));
               return e.Select(e.Le(x, e.K(-3)), e.K(0), e.Select(e.Ge(x, e.K(3)), g, mid));
             });
}

// ---- tanh / sigmoid backward, logit ----------------------------------------------------------
LoweredResult TanhBackward(const at::Tensor& grad, const at::Tensor& y, OutArg out) {
  return Bwd("aten::tanh_backward", "tanh_backward_tpu", grad, y, out,
             [](Expr& e, int g, int t) { return e.Mul(g, e.Sub(e.K(1), e.Mul(t, t))); });
}
LoweredResult SigmoidBackward(const at::Tensor& grad, const at::Tensor& y, OutArg out) {
  return Bwd("aten::sigmoid_backward", "sigmoid_backward_tpu", grad, y, out,
             [](Expr& e, int g, int s) { return e.Mul(e.Mul(g, e.Sub(e.K(1), s)), s); });
}

// ATen computes logit and its backward in the tensor's own dtype: for bfloat16/float16 every
// intermediate is rounded to it. `Own` replays those roundings (a no-op for float32/64).
struct Own {
  Expr& e;
  at::ScalarType st;
  int operator()(int v) const {
    if (st != at::kBFloat16 && st != at::kHalf) return v;
    return e.b().Convert(e.b().Convert(v, ToDType(st)), e.dtype());
  }
};

// log(x / (1 - x)), x first clamped to [eps, 1 - eps] when eps >= 0.
LoweredResult Logit(const at::Tensor& self, std::optional<double> eps, OutArg out) {
  double eps_v = eps.value_or(-1.0);
  // Integer and bool inputs compute (and clamp to eps) in the float result dtype, as on CPU.
  at::ScalarType st =
      at::isFloatingType(self.scalar_type()) ? self.scalar_type() : c10::typeMetaToScalarType(at::get_default_dtype());
  return LowerElementwise("aten::logit", {self}, out, ResultKind::kFloat,
                          [&](Lowering& l, const V& v, DType) {
                            Expr e(l, v[0]);
                            Own own{e, st};
                            int x = v[0];
                            if (eps_v >= 0) {
                              int lo = e.PAs(eps_v, st);
                              x = e.Min(e.Max(x, lo), own(e.Sub(e.K(1), lo)));
                            }
                            return e.Log(own(e.Div(x, own(e.Sub(e.K(1), x)))));
                          });
}
// Outside the domain the gradient is NaN (no eps) or 0 (outside [eps, 1 - eps]).
at::Tensor LogitBackward(const at::Tensor& grad, const at::Tensor& self, std::optional<double> eps,
                         OutArg out) {
  double eps_v = eps.value_or(-1.0);
  at::ScalarType st = at::result_type(grad, self);
  return Bwd("aten::logit_backward", "logit_backward_tpu", grad, self, out,
             [&](Expr& e, int dy, int x) {
               Own own{e, st};
               int lo = eps_v >= 0 ? e.PAs(eps_v, st) : e.K(0);
               int hi = eps_v >= 0 ? own(e.Sub(e.K(1), lo)) : e.K(1);
               int inside = e.And(e.Ge(x, lo), e.Le(x, hi));
               int d = e.Div(dy, own(e.Mul(x, own(e.Sub(e.K(1), x)))));
               return e.Select(inside, d, e.K(eps_v >= 0 ? 0.0 : NAN));
             });
}

// ---- the functional / in-place / out= kernels --------------------------------------------------
#define TPU_X(...) __VA_ARGS__
// Forward: name(self, PARAMS), name_(self, PARAMS), name_out(self, PARAMS, out).
#define TPU_ACT(name, Impl, PARAMS, ARGS)                                                      \
  [[maybe_unused]] at::Tensor name(const at::Tensor& s TPU_X PARAMS) {                         \
    return Impl(s TPU_X ARGS, Functional());                                                   \
  }                                                                                            \
  [[maybe_unused]] at::Tensor& name##_(at::Tensor& s TPU_X PARAMS) {                           \
    Impl(s TPU_X ARGS, Inplace(s));                                                            \
    return s;                                                                                  \
  }                                                                                            \
  [[maybe_unused]] at::Tensor& name##_out(const at::Tensor& s TPU_X PARAMS, at::Tensor& out) { \
    Impl(s TPU_X ARGS, Out(out));                                                              \
    return out;                                                                                \
  }
// Backward: name(grad, self, PARAMS) and name_out(grad, self, PARAMS, grad_input).
#define TPU_BWD(name, Impl, PARAMS, ARGS)                                                        \
  at::Tensor name(const at::Tensor& g, const at::Tensor& x TPU_X PARAMS) {                       \
    return Impl(g, x TPU_X ARGS, Functional());                                                  \
  }                                                                                              \
  [[maybe_unused]] at::Tensor& name##_out(const at::Tensor& g, const at::Tensor& x TPU_X PARAMS, \
                                          at::Tensor& gi) {                                      \
    Impl(g, x TPU_X ARGS, Out(gi));                                                              \
    return gi;                                                                                   \
  }

using S = at::Scalar;
TPU_ACT(relu, Relu, (), ())
TPU_ACT(threshold, Threshold, (, const S& t, const S& v), (, t, v))
TPU_BWD(threshold_backward, ThresholdBackward, (, const S& t), (, t))
TPU_ACT(gelu, Gelu, (, c10::string_view a), (, a))
TPU_BWD(gelu_backward, GeluBackward, (, c10::string_view a), (, a))
TPU_ACT(silu, Silu, (), ())
TPU_BWD(silu_backward, SiluBackward, (), ())
TPU_ACT(mish, Mish, (), ())
TPU_BWD(mish_backward, MishBackward, (), ())
TPU_ACT(hardtanh, Hardtanh, (, const S& lo, const S& hi), (, lo, hi))
TPU_BWD(hardtanh_backward, HardtanhBackward, (, const S& lo, const S& hi), (, lo, hi))
TPU_ACT(leaky_relu, LeakyRelu, (, const S& slope), (, slope))
TPU_BWD(leaky_relu_backward, LeakyReluBackward, (, const S& slope, bool r), (, slope, r))
TPU_ACT(elu, Elu, (, const S& a, const S& s2, const S& i), (, a, s2, i))
TPU_ACT(softplus, Softplus, (, const S& b, const S& t), (, b, t))
TPU_BWD(softplus_backward, SoftplusBackward, (, const S& b, const S& t), (, b, t))
TPU_ACT(hardsigmoid, Hardsigmoid, (), ())
TPU_BWD(hardsigmoid_backward, HardsigmoidBackward, (), ())
TPU_ACT(hardswish, Hardswish, (), ())
TPU_BWD(hardswish_backward, HardswishBackward, (), ())
TPU_BWD(tanh_backward, TanhBackward, (), ())
TPU_BWD(sigmoid_backward, SigmoidBackward, (), ())
TPU_ACT(logit, Logit, (, std::optional<double> eps), (, eps))
TPU_BWD(logit_backward, LogitBackward, (, std::optional<double> eps), (, eps))
#undef TPU_ACT
#undef TPU_BWD
#undef TPU_X

// elu_backward takes self_or_result last.
at::Tensor elu_backward(const at::Tensor& g, const S& a, const S& s, const S& i, bool r,
                        const at::Tensor& x) {
  return EluBackward(g, a, s, i, r, x, Functional());
}
at::Tensor& elu_backward_out(const at::Tensor& g, const S& a, const S& s, const S& i, bool r,
                             const at::Tensor& x, at::Tensor& gi) {
  EluBackward(g, a, s, i, r, x, Out(gi));
  return gi;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
#define TPU_REG3(name)        \
  m.impl(#name, name);        \
  m.impl(#name "_", name##_); \
  m.impl(#name ".out", name##_out);
#define TPU_REG_BWD(name) \
  m.impl(#name, name);    \
  m.impl(#name ".grad_input", name##_out);
  m.impl("relu", relu);  // relu.out is CompositeExplicitAutograd in ATen
  m.impl("relu_", relu_);
  TPU_REG3(threshold)
  TPU_REG_BWD(threshold_backward)
  TPU_REG3(gelu)
  TPU_REG_BWD(gelu_backward)
  TPU_REG3(silu)
  TPU_REG_BWD(silu_backward)
  TPU_REG3(mish)
  m.impl("mish_backward", mish_backward);  // no out= form in ATen
  TPU_REG3(hardtanh)
  TPU_REG_BWD(hardtanh_backward)
  TPU_REG3(leaky_relu)
  TPU_REG_BWD(leaky_relu_backward)
  TPU_REG3(elu)
  TPU_REG_BWD(elu_backward)
  m.impl("softplus", softplus);  // no in-place form in ATen
  m.impl("softplus.out", softplus_out);
  TPU_REG_BWD(softplus_backward)
  TPU_REG3(hardsigmoid)
  TPU_REG_BWD(hardsigmoid_backward)
  TPU_REG3(hardswish)
  m.impl("hardswish_backward", hardswish_backward);  // its out= form is CompositeExplicitAutograd
  TPU_REG_BWD(tanh_backward)
  TPU_REG_BWD(sigmoid_backward)
  TPU_REG3(logit)
  TPU_REG_BWD(logit_backward)
#undef TPU_REG3
#undef TPU_REG_BWD
}

}  // namespace tpu::torch_bridge
