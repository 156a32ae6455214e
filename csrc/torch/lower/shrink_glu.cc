// hardshrink / softshrink, log_sigmoid, glu and prelu with their backward kernels, following
// ATen's CPU kernels' formulas (a bfloat16/float16 threshold is rounded to the tensor's dtype
// first, as they do).
#include <torch/library.h>

#include "torch/lower/activation_util.h"

namespace tpu::torch_bridge {
namespace {

// ---- hardshrink / softshrink --------------------------------------------------------------------
LoweredResult Hardshrink(const at::Tensor& self, const at::Scalar& lambd, OutArg out) {
  return Act("aten::hardshrink", "hardshrink_tpu", self, out, [&](Expr& e, int x) {
    int l = e.PAs(lambd, self.scalar_type());
    return e.Select(e.And(e.Ge(x, e.Neg(l)), e.Le(x, l)), e.K(0), x);
  });
}
// (x >= -lambd && x <= lambd) ? 0 : grad: the backward of both shrinks.
LoweredResult ShrinkBackward(const char* op, const at::Tensor& grad, const at::Tensor& self, const at::Scalar& lambd,
                             OutArg out) {
  return Bwd(op, "shrink_backward_tpu", grad, self, out, [&](Expr& e, int g, int x) {
    int l = e.PAs(lambd, self.scalar_type());
    return e.Select(e.And(e.Ge(x, e.Neg(l)), e.Le(x, l)), e.K(0), g);
  });
}
LoweredResult Softshrink(const at::Tensor& self, const at::Scalar& lambd, OutArg out) {
  TORCH_CHECK(lambd.to<double>() >= 0, "lambda must be greater or equal to 0, but found to be ", lambd.to<double>(), ".");
  return Act("aten::softshrink", "softshrink_tpu", self, out, [&](Expr& e, int x) {
    int l = e.PAs(lambd, self.scalar_type());
    return e.Select(e.Gt(x, l), e.Sub(x, l), e.Select(e.Lt(x, e.Neg(l)), e.Add(x, l), e.Mul(x, e.K(0))));
  });
}

at::Tensor hardshrink(const at::Tensor& s, const at::Scalar& l) { return Hardshrink(s, l, Functional()); }
at::Tensor& hardshrink_out(const at::Tensor& s, const at::Scalar& l, at::Tensor& out) {
  Hardshrink(s, l, Out(out));
  return out;
}
at::Tensor softshrink(const at::Tensor& s, const at::Scalar& l) { return Softshrink(s, l, Functional()); }
at::Tensor& softshrink_out(const at::Tensor& s, const at::Scalar& l, at::Tensor& out) {
  Softshrink(s, l, Out(out));
  return out;
}
at::Tensor hardshrink_backward(const at::Tensor& g, const at::Tensor& s, const at::Scalar& l) {
  return ShrinkBackward("aten::hardshrink_backward", g, s, l, Functional());
}
at::Tensor& hardshrink_backward_out(const at::Tensor& g, const at::Tensor& s, const at::Scalar& l, at::Tensor& out) {
  ShrinkBackward("aten::hardshrink_backward", g, s, l, Out(out));
  return out;
}
at::Tensor softshrink_backward(const at::Tensor& g, const at::Tensor& s, const at::Scalar& l) {
  return ShrinkBackward("aten::softshrink_backward", g, s, l, Functional());
}
at::Tensor& softshrink_backward_out(const at::Tensor& g, const at::Tensor& s, const at::Scalar& l, at::Tensor& out) {
  ShrinkBackward("aten::softshrink_backward", g, s, l, Out(out));
  return out;
}

// ---- log_sigmoid: out = min(x, 0) - log1p(z) and buffer z = exp(-|x|) ----------------------------
void CheckFloating(const char* kernel, const at::Tensor& t) {
  CheckKernelDType(at::isFloatingType(t.scalar_type()), kernel, t.scalar_type());
}

std::tuple<at::Tensor&, at::Tensor&> log_sigmoid_forward_out(const at::Tensor& self, at::Tensor& output,
                                                             at::Tensor& buffer) {
  CheckFloating("log_sigmoid_forward_tpu", self);
  CheckSameDevice("aten::log_sigmoid_forward", {&self, &output, &buffer});
  ResizeOut(output, self.sizes());
  ResizeOut(buffer, self.sizes());
  if (self.numel() == 0) return {output, buffer};
  Lowering l("aten::log_sigmoid_forward");
  int x = l.Input(self, OpMath(self.scalar_type()));
  Expr e(l, x);
  int z = e.Exp(e.Neg(e.Abs(x)));
  l.Output(e.Sub(e.Min(x, e.K(0)), e.Log1p(z)), output);
  l.Output(z, buffer);
  l.Run();
  return {output, buffer};
}
std::tuple<at::Tensor, at::Tensor> log_sigmoid_forward(const at::Tensor& self) {
  at::Tensor output = at::empty_like(self, at::MemoryFormat::Contiguous);
  at::Tensor buffer = at::empty_like(self, at::MemoryFormat::Contiguous);
  log_sigmoid_forward_out(self, output, buffer);
  return {output, buffer};
}

// ATen: (max_deriv - sign * z / (1 + z)) * grad, with max_deriv = x < 0, sign = x < 0 ? 1 : -1.
at::Tensor& log_sigmoid_backward_out(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& buffer,
                                     at::Tensor& grad_input) {
  CheckFloating("log_sigmoid_backward_tpu", self);
  CheckSameDevice("aten::log_sigmoid_backward", {&grad, &self, &buffer, &grad_input});
  at::DimVector shape = at::infer_size_dimvector(grad.sizes(), self.sizes());
  ResizeOut(grad_input, shape);
  if (grad_input.numel() == 0) return grad_input;
  at::ScalarType compute = OpMath(grad_input.scalar_type());
  Lowering l("aten::log_sigmoid_backward");
  Dims dims(shape.begin(), shape.end());
  int g = l.b().BroadcastTo(l.Input(grad, compute), dims);
  int x = l.b().BroadcastTo(l.Input(self, compute), dims);
  Expr e(l, x);
  // The CPU kernel reads the forward's buffer; one that was not kept (empty) is recomputed.
  int z = buffer.numel() > 0 ? l.b().BroadcastTo(l.Input(buffer, compute), dims) : e.Exp(e.Neg(e.Abs(x)));
  int neg = e.Lt(x, e.K(0));
  int r = e.Sub(e.Select(neg, e.K(1), e.K(0)), e.Mul(e.Select(neg, e.K(1), e.K(-1)), e.Div(z, e.Add(e.K(1), z))));
  l.Output(e.Mul(r, g), grad_input);
  l.Run();
  return grad_input;
}
at::Tensor log_sigmoid_backward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& buffer) {
  at::Tensor grad_input = at::empty({0}, grad.options().dtype(at::result_type(grad, self)));
  return log_sigmoid_backward_out(grad, self, buffer, grad_input);
}

// ---- glu: a * sigmoid(b) of the halves along dim --------------------------------------------------
// The two halves of x along `dim` as IR values.
std::pair<int, int> Halves(Lowering& l, int x, const at::Tensor& self, int64_t dim) {
  Dims start(self.dim(), 0), limit(self.sizes().begin(), self.sizes().end()), step(self.dim(), 1);
  int64_t half = self.size(dim) / 2;
  limit[dim] = half;
  int a = l.b().Slice(x, start, limit, step);
  start[dim] = half;
  limit[dim] = self.size(dim);
  int b = l.b().Slice(x, start, limit, step);
  return {a, b};
}

// ATen's glu checks; returns the wrapped dim.
int64_t CheckGlu(const at::Tensor& self, int64_t dim) {
  TORCH_CHECK(self.dim() > 0, "glu does not support scalars because halving size must be even");
  int64_t d = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK(self.size(d) % 2 == 0, "Halving dimension must be even, but dimension ", d, " is size ", self.size(d));
  return d;
}

at::Tensor& glu_out(const at::Tensor& self, int64_t dim, at::Tensor& out) {
  int64_t d = CheckGlu(self, dim);
  CheckSameDevice("aten::glu", {&self, &out});
  at::DimVector shape(self.sizes());
  shape[d] /= 2;
  ResizeOut(out, shape);
  if (out.numel() == 0) return out;
  Lowering l("aten::glu");
  int x = l.Input(self, OpMath(self.scalar_type()));
  auto [a, b] = Halves(l, x, self, d);
  Expr e(l, a);
  l.Output(e.Mul(a, e.Sigmoid(b)), out);
  l.Run();
  return out;
}
at::Tensor glu(const at::Tensor& self, int64_t dim) {
  CheckGlu(self, dim);
  at::Tensor out = at::empty({0}, self.options());
  return glu_out(self, dim, out);
}

// ATen: sig = sigmoid(b); grad_a = sig * grad; grad_b = (1 - sig) * sig * a * grad.
at::Tensor& glu_backward_out(const at::Tensor& grad, const at::Tensor& self, int64_t dim, at::Tensor& grad_input) {
  int64_t d = CheckGlu(self, dim);
  CheckSameDevice("aten::glu_backward", {&grad, &self, &grad_input});
  ResizeOut(grad_input, self.sizes());
  if (self.numel() == 0) return grad_input;
  at::ScalarType compute = OpMath(self.scalar_type());
  Lowering l("aten::glu_backward");
  int x = l.Input(self, compute);
  int g = l.Input(grad, compute);
  auto [a, b] = Halves(l, x, self, d);
  Expr e(l, a);
  int sig = e.Sigmoid(b);
  int ga = e.Mul(sig, g);
  int gb = e.Mul(e.Mul(e.Mul(e.Sub(e.K(1), sig), sig), a), g);
  l.Output(l.b().Concatenate({ga, gb}, d), grad_input);
  l.Run();
  return grad_input;
}
at::Tensor glu_backward(const at::Tensor& grad, const at::Tensor& self, int64_t dim) {
  at::Tensor grad_input = at::empty_like(self, at::MemoryFormat::Contiguous);
  return glu_backward_out(grad, self, dim, grad_input);
}

// ---- prelu: x > 0 ? x : w * x (w broadcast by the composite) ------------------------------------
at::Tensor prelu_kernel(const at::Tensor& self, const at::Tensor& weight) {
  return LowerElementwise("aten::_prelu_kernel", {self, weight}, Functional(), ResultKind::kCommon,
                          [](Lowering& l, const ValueList& v, DType) {
                            Expr e(l, v[0]);
                            return e.Select(e.Gt(v[0], e.K(0)), v[0], e.Mul(v[1], v[0]));
                          });
}

// ATen: grad_self = x > 0 ? grad : w * grad; grad_weight = x > 0 ? 0 : x * grad (per element).
std::tuple<at::Tensor, at::Tensor> prelu_kernel_backward(const at::Tensor& grad, const at::Tensor& self,
                                                         const at::Tensor& weight) {
  CheckSameDevice("aten::_prelu_kernel_backward", {&grad, &self, &weight});
  at::DimVector shape = at::infer_size_dimvector(at::infer_size_dimvector(self.sizes(), weight.sizes()), grad.sizes());
  at::Tensor grad_self = at::empty(shape, self.options());
  at::Tensor grad_weight = at::empty(shape, weight.options());
  if (grad_self.numel() == 0) return {grad_self, grad_weight};
  at::ScalarType compute = OpMath(at::promote_types(self.scalar_type(), weight.scalar_type()));
  Lowering l("aten::_prelu_kernel_backward");
  Dims dims(shape.begin(), shape.end());
  int x = l.b().BroadcastTo(l.Input(self, compute), dims);
  int w = l.b().BroadcastTo(l.Input(weight, compute), dims);
  int g = l.b().BroadcastTo(l.Input(grad, compute), dims);
  Expr e(l, x);
  int pos = e.Gt(x, e.K(0));
  l.Output(e.Select(pos, g, e.Mul(w, g)), grad_self);
  l.Output(e.Select(pos, e.K(0), e.Mul(x, g)), grad_weight);
  l.Run();
  return {grad_self, grad_weight};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("hardshrink", hardshrink);
  m.impl("hardshrink.out", hardshrink_out);
  m.impl("hardshrink_backward", hardshrink_backward);
  m.impl("hardshrink_backward.grad_input", hardshrink_backward_out);
  m.impl("softshrink", softshrink);
  m.impl("softshrink.out", softshrink_out);
  m.impl("softshrink_backward", softshrink_backward);
  m.impl("softshrink_backward.grad_input", softshrink_backward_out);
  m.impl("log_sigmoid_forward", log_sigmoid_forward);
  m.impl("log_sigmoid_forward.output", log_sigmoid_forward_out);
  m.impl("log_sigmoid_backward", log_sigmoid_backward);
  m.impl("log_sigmoid_backward.grad_input", log_sigmoid_backward_out);
  m.impl("glu", glu);
  m.impl("glu.out", glu_out);
  m.impl("glu_backward", glu_backward);
  m.impl("glu_backward.grad_input", glu_backward_out);
  m.impl("_prelu_kernel", prelu_kernel);
  m.impl("_prelu_kernel_backward", prelu_kernel_backward);
}

}  // namespace tpu::torch_bridge
