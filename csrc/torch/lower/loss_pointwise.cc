// Pointwise losses: mse_loss, smooth_l1_loss, huber_loss, binary_cross_entropy (+ with_logits) and
// their backward ops -> elementwise + reduce IR. Hyper-parameters (beta, delta) are runtime
// scalars.
//
// A mean/sum reduces the elementwise loss after rounding it to the result dtype, because
// PyTorch's CPU kernels store the elementwise loss in that dtype first (it matters for bfloat16).
//
// binary_cross_entropy: PyTorch's CPU kernel raises for an input or target outside [0, 1]; the
// program checks both (Note [Check op] in ir/graph.h), so the error names the op and the line.
#include <ATen/ExpandUtils.h>
#include <ATen/core/Reduction.h>
#include <torch/library.h>

#include <limits>

#include "torch/lower/nn_util.h"

namespace tpu::torch_bridge {
namespace {

using at::Reduction::Mean;
using at::Reduction::None;
using V = int;

int Bin(Builder& b, OpCode op, int x, int y) { return b.Binary(op, x, y); }
int Half(Builder& b, int x) { return Bin(b, OpCode::kMultiply, x, b.ScalarLike(0.5, x)); }

// The mean or sum of an elementwise loss `v` (compute dtype) whose result dtype is `t`.
int ReduceLoss(Builder& b, int v, at::ScalarType t, int64_t reduction) {
  DType c = b.TypeOf(v).dtype;
  if (ToDType(t) != c) v = b.Convert(b.Convert(v, ToDType(t)), c);
  double n = static_cast<double>(b.TypeOf(v).NumElements());
  int rank = b.TypeOf(v).rank();
  int s = rank ? nn::Sum(b, v, nn::Range(0, rank)) : v;
  return reduction == Mean ? Bin(b, OpCode::kDivide, s, b.ScalarLike(n, s)) : s;
}

// Forward: term(l, x, y) is the elementwise loss of x and y, broadcast and in the compute dtype.
template <typename F>
at::Tensor Loss(const char* name, const char* op, const at::Tensor& self, const at::Tensor& target,
                int64_t reduction, const at::Tensor* out, F term) {
  CheckSameDevice(name, {&self, &target});
  at::ScalarType t = at::result_type(self, target);
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(t), "\"", name, "\" not implemented for '", t,
                              "'");
  at::DimVector shape = at::infer_size_dimvector(self.sizes(), target.sizes());
  bool reduce = reduction != None;
  at::Tensor result = *PrepareOut(op, out ? Out(*out) : Functional(),
                                 reduce ? at::IntArrayRef() : at::IntArrayRef(shape), t, self);
  if (result.numel() == 0) return result;
  if (c10::multiply_integers(shape) == 0) {  // a reduction of nothing
    result.fill_(reduction == Mean ? std::numeric_limits<double>::quiet_NaN() : 0.0);
    return result;
  }
  Lowering l(op);
  Builder& b = l.b();
  at::ScalarType ct = OpMath(t);
  Dims dims = ToDims(shape);
  int x = b.BroadcastTo(l.Input(self, ct), dims);  // parameters in a fixed order: self, target
  int v = term(l, x, b.BroadcastTo(l.Input(target, ct), dims));
  l.Output(reduce ? ReduceLoss(b, v, t, reduction) : v, result);
  l.Run();
  return result;
}

// Backward: grad_input = dterm(l, x, y) * grad, divided by self.numel() for a mean, over the
// broadcast of self, target and grad; dtype self's (or the out= tensor's).
template <typename F>
at::Tensor LossBackward(const char* name, const char* op, const at::Tensor& grad,
                        const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                        const at::Tensor* out, F dterm) {
  CheckSameDevice(name, {&grad, &self, &target});
  at::ScalarType st = self.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(st), "\"", name, "\" not implemented for '", st,
                              "'");
  at::DimVector shape = at::infer_size_dimvector(
      at::infer_size_dimvector(self.sizes(), target.sizes()), grad.sizes());
  at::Tensor result;
  if (out) {
    at::assert_no_internal_overlap(*out);
    ResizeOut(*out, shape);
    result = *out;
  } else {
    result = EmptyLike(shape, st, self);
  }
  if (result.numel() == 0) return result;
  Lowering l(op);
  Builder& b = l.b();
  at::ScalarType ct =
      OpMath(at::promote_types(at::promote_types(st, target.scalar_type()), grad.scalar_type()));
  Dims dims = ToDims(shape);
  auto in = [&](const at::Tensor& x) { return b.BroadcastTo(TensorOrScalar(l, x, ct), dims); };
  int v = Bin(b, OpCode::kMultiply, dterm(l, in(self), in(target)), in(grad));
  if (reduction == Mean)
    v = Bin(b, OpCode::kDivide, v, b.ScalarLike(static_cast<double>(self.numel()), v));
  l.Output(v, result);
  l.Run();
  return result;
}

// ---- mse ----------------------------------------------------------------------------------------
at::Tensor Mse(const at::Tensor& self, const at::Tensor& target, int64_t reduction,
               const at::Tensor* out) {
  return Loss("mse_loss", "aten::mse_loss", self, target, reduction, out,
              [](Lowering& l, V x, V y) {
                int d = Bin(l.b(), OpCode::kSubtract, x, y);
                return Bin(l.b(), OpCode::kMultiply, d, d);
              });
}
at::Tensor MseBackward(const at::Tensor& g, const at::Tensor& self, const at::Tensor& target,
                       int64_t reduction, const at::Tensor* out) {
  return LossBackward("mse_loss_backward", "aten::mse_loss_backward", g, self, target, reduction,
                      out, [](Lowering& l, V x, V y) {
                        int d = Bin(l.b(), OpCode::kSubtract, x, y);
                        return Bin(l.b(), OpCode::kAdd, d, d);
                      });
}

// ---- smooth_l1 / huber
// ---------------------------------------------------------------------------
at::Tensor SmoothL1(const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                    double beta, const at::Tensor* out) {
  TORCH_CHECK(beta >= 0, "smooth_l1_loss does not support negative values for beta.");
  return Loss("smooth_l1_loss", "aten::smooth_l1_loss", self, target, reduction, out,
              [&](Lowering& l, V x, V y) {
                Builder& b = l.b();
                int z = b.Unary(OpCode::kAbs, Bin(b, OpCode::kSubtract, x, y));
                int bt = b.BroadcastTo(l.Scalar(beta, ToScalarType(b.TypeOf(z).dtype)),
                                       b.TypeOf(z).dims);
                // z < beta ? 0.5 * z^2 / beta : z - 0.5 * beta (beta == 0: plain |x - y|)
                int quad = Bin(b, OpCode::kDivide, Half(b, Bin(b, OpCode::kMultiply, z, z)), bt);
                return b.Select(b.Compare(CompareDirection::kLT, z, bt), quad,
                                Bin(b, OpCode::kSubtract, z, Half(b, bt)));
              });
}

at::Tensor Huber(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double delta,
                 const at::Tensor* out) {
  TORCH_CHECK(delta > 0, "huber_loss does not support non-positive values for delta.");
  return Loss(
      "huber_loss", "aten::huber_loss", self, target, reduction, out, [&](Lowering& l, V x, V y) {
        Builder& b = l.b();
        int z = b.Unary(OpCode::kAbs, Bin(b, OpCode::kSubtract, x, y));
        int dl = b.BroadcastTo(l.Scalar(delta, ToScalarType(b.TypeOf(z).dtype)), b.TypeOf(z).dims);
        // z < delta ? 0.5 * z^2 : delta * (z - 0.5 * delta)
        int lin = Bin(b, OpCode::kMultiply, dl, Bin(b, OpCode::kSubtract, z, Half(b, dl)));
        return b.Select(b.Compare(CompareDirection::kLT, z, dl),
                        Half(b, Bin(b, OpCode::kMultiply, z, z)), lin);
      });
}

// d/dx of both: -k for x - y <= -t, k for x - y >= t, else (x - y) * k / t, with (k, t) = (1, beta)
// for smooth_l1 and (delta, delta) for huber, checked in this order as PyTorch does (so beta == 0
// gives -1 at x == y, and the division by zero is never selected).
int ClippedSlope(Lowering& l, V x, V y, double t, bool huber) {
  Builder& b = l.b();
  int d = Bin(b, OpCode::kSubtract, x, y);
  const Dims dims = b.TypeOf(d).dims;
  DType c = b.TypeOf(d).dtype;
  int tv = b.BroadcastTo(l.Scalar(t, ToScalarType(c)), dims);
  int k = huber ? tv : b.ScalarLike(1, d);
  int inner = huber ? d : Bin(b, OpCode::kDivide, d, tv);
  int neg_t = b.Unary(OpCode::kNegate, tv);
  int r = b.Select(b.Compare(CompareDirection::kGE, d, tv), k, inner);
  return b.Select(b.Compare(CompareDirection::kLE, d, neg_t), b.Unary(OpCode::kNegate, k), r);
}

at::Tensor SmoothL1Backward(const at::Tensor& g, const at::Tensor& self, const at::Tensor& target,
                            int64_t reduction, double beta, const at::Tensor* out) {
  TORCH_CHECK(beta >= 0, "smooth_l1_loss does not support negative values for beta.");
  return LossBackward("smooth_l1_loss_backward", "aten::smooth_l1_loss_backward", g, self, target,
                      reduction, out,
                      [&](Lowering& l, V x, V y) { return ClippedSlope(l, x, y, beta, false); });
}

at::Tensor HuberBackward(const at::Tensor& g, const at::Tensor& self, const at::Tensor& target,
                         int64_t reduction, double delta, const at::Tensor* out) {
  TORCH_CHECK(delta > 0, "huber_loss does not support non-positive values for delta.");
  return LossBackward("huber_loss_backward", "aten::huber_loss_backward", g, self, target,
                      reduction, out,
                      [&](Lowering& l, V x, V y) { return ClippedSlope(l, x, y, delta, true); });
}

// ---- binary_cross_entropy
// ------------------------------------------------------------------------ Target and weight
// broadcast to the input's shape (the loss has the input's shape).
void CheckBce(const at::Tensor& self, const at::Tensor& target, const at::Tensor& weight) {
  TORCH_CHECK(target.scalar_type() == self.scalar_type(), "Found dtype ", target.scalar_type(),
              " but expected ", self.scalar_type());
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()),
                              "\"binary_cross_entropy\" not implemented for '", self.scalar_type(),
                              "'");
  for (const at::Tensor* t : {&target, &weight}) {
    if (!t->defined()) continue;
    auto shape = at::infer_size_dimvector(self.sizes(), t->sizes());
    TORCH_CHECK(at::IntArrayRef(shape) == self.sizes(), "output with shape ", self.sizes(),
                " doesn't match the broadcast shape ", at::IntArrayRef(shape));
  }
}

// v, checked to lie in [0, 1] (NaN fails, as on CPU).
int InUnitRange(Lowering& l, int v, CheckKind kind) {
  Builder& b = l.b();
  int ok = Bin(b, OpCode::kAnd, b.Compare(CompareDirection::kGE, v, b.ScalarLike(0, v)),
               b.Compare(CompareDirection::kLE, v, b.ScalarLike(1, v)));
  return l.Checked(v, ok, kind);
}

int Weighted(Lowering& l, int v, const at::Tensor& weight) {
  if (!weight.defined()) return v;
  Builder& b = l.b();
  int w = b.BroadcastTo(l.Input(weight, ToScalarType(b.TypeOf(v).dtype)), b.TypeOf(v).dims);
  return Bin(b, OpCode::kMultiply, v, w);
}

at::Tensor Bce(const at::Tensor& self, const at::Tensor& target, const at::Tensor& weight,
               int64_t reduction, const at::Tensor* out) {
  CheckSameDevice("binary_cross_entropy", {&self, &target, &weight});
  CheckBce(self, target, weight);
  at::ScalarType t = self.scalar_type();
  bool reduce = reduction != None;
  at::Tensor result = nn::ResultTensor(out, reduce ? at::IntArrayRef() : self.sizes(), t, self);
  if (result.numel() == 0) return result;
  if (self.numel() == 0) {
    result.fill_(reduction == Mean ? std::numeric_limits<double>::quiet_NaN() : 0.0);
    return result;
  }
  Lowering l("aten::binary_cross_entropy");
  Builder& b = l.b();
  at::ScalarType ct = OpMath(t);
  Dims dims = ToDims(self.sizes());
  int x = InUnitRange(l, l.Input(self, ct), CheckKind::kBceInputRange);
  int y = InUnitRange(l, b.BroadcastTo(l.Input(target, ct), dims), CheckKind::kBceTargetRange);
  // (y - 1) * max(log1p(-x), -100) - y * max(log(x), -100)
  int floor = b.ScalarLike(-100, x);
  int log_x = Bin(b, OpCode::kMaximum, b.Unary(OpCode::kLog, x), floor);
  int log_1mx =
      Bin(b, OpCode::kMaximum, b.Unary(OpCode::kLog1p, b.Unary(OpCode::kNegate, x)), floor);
  int v = Bin(b, OpCode::kSubtract,
              Bin(b, OpCode::kMultiply, Bin(b, OpCode::kSubtract, y, b.ScalarLike(1, y)), log_1mx),
              Bin(b, OpCode::kMultiply, y, log_x));
  v = Weighted(l, v, weight);
  l.Output(reduce ? ReduceLoss(b, v, t, reduction) : v, result);
  l.Run();
  return result;
}

at::Tensor BceBackward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                       const at::Tensor& weight, int64_t reduction, const at::Tensor* out) {
  CheckSameDevice("binary_cross_entropy_backward", {&grad, &self, &target, &weight});
  CheckBce(self, target, weight);
  at::Tensor result = nn::ResultTensor(out, self.sizes(), self.scalar_type(), self);
  if (result.numel() == 0) return result;
  Lowering l("aten::binary_cross_entropy_backward");
  Builder& b = l.b();
  at::ScalarType ct = OpMath(self.scalar_type());
  Dims dims = ToDims(self.sizes());
  int x = l.Input(self, ct), y = b.BroadcastTo(l.Input(target, ct), dims);
  int g = b.BroadcastTo(TensorOrScalar(l, grad, ct), dims);
  // grad * (x - y) / max((1 - x) * x, 1e-12)
  int denom = Bin(b, OpCode::kMaximum,
                  Bin(b, OpCode::kMultiply, Bin(b, OpCode::kSubtract, b.ScalarLike(1, x), x), x),
                  b.ScalarLike(1e-12, x));
  int v =
      Bin(b, OpCode::kDivide, Bin(b, OpCode::kMultiply, g, Bin(b, OpCode::kSubtract, x, y)), denom);
  v = Weighted(l, v, weight);
  if (reduction == Mean)
    v = Bin(b, OpCode::kDivide, v, b.ScalarLike(static_cast<double>(self.numel()), v));
  l.Output(v, result);
  l.Run();
  return result;
}

// binary_cross_entropy_with_logits is CompositeExplicitAutograd (its autograd formula stays
// PyTorch's); this kernel replaces the composite's chain of eager ops with one program:
// loss = (1 - y) * x - log_sigmoid(x) * (1 + (pos_weight - 1) * y), log_sigmoid(x) =
// min(x, 0) - log1p(exp(-|x|)), stable for any x.
at::Tensor BceWithLogits(const at::Tensor& self, const at::Tensor& target, const at::Tensor& weight,
                         const at::Tensor& pos_weight, int64_t reduction) {
  CheckSameDevice("binary_cross_entropy_with_logits", {&self, &target, &weight, &pos_weight});
  at::ScalarType t = at::result_type(self, target);
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(t),
                              "\"binary_cross_entropy_with_logits\" not implemented for '", t, "'");
  // The composite computes in place on (1 - target): every operand broadcasts to target's shape.
  for (const at::Tensor* o : {&self, &weight, &pos_weight}) {
    if (!o->defined()) continue;
    auto shape = at::infer_size_dimvector(target.sizes(), o->sizes());
    TORCH_CHECK(at::IntArrayRef(shape) == target.sizes(), "output with shape ", target.sizes(),
                " doesn't match the broadcast shape ", at::IntArrayRef(shape));
  }
  bool reduce = reduction != None;
  at::Tensor result = EmptyLike(reduce ? at::IntArrayRef() : target.sizes(), t, self);
  if (result.numel() == 0) return result;
  if (target.numel() == 0)
    return result.fill_(reduction == Mean ? std::numeric_limits<double>::quiet_NaN() : 0.0);
  Lowering l("aten::binary_cross_entropy_with_logits");
  Builder& b = l.b();
  at::ScalarType ct = OpMath(t);
  Dims dims = ToDims(target.sizes());
  auto in = [&](const at::Tensor& v) { return b.BroadcastTo(l.Input(v, ct), dims); };
  int x = in(self), y = in(target);
  int one = b.ScalarLike(1, x);
  int softplus_neg = b.Unary(
      OpCode::kLog1p, b.Unary(OpCode::kExp, b.Unary(OpCode::kNegate, b.Unary(OpCode::kAbs, x))));
  int log_sig =
      Bin(b, OpCode::kSubtract, Bin(b, OpCode::kMinimum, x, b.ScalarLike(0, x)), softplus_neg);
  if (pos_weight.defined())
    log_sig =
        Bin(b, OpCode::kMultiply, log_sig,
            Bin(b, OpCode::kAdd,
                Bin(b, OpCode::kMultiply, Bin(b, OpCode::kSubtract, in(pos_weight), one), y), one));
  int v = Bin(b, OpCode::kSubtract, Bin(b, OpCode::kMultiply, Bin(b, OpCode::kSubtract, one, y), x),
              log_sig);
  if (weight.defined()) v = Bin(b, OpCode::kMultiply, v, in(weight));
  l.Output(reduce ? ReduceLoss(b, v, t, reduction) : v, result);
  l.Run();
  return result;
}

// ---- registered forms ------------------------------------------------------------------------
const at::Tensor& Opt(const std::optional<at::Tensor>& t) {
  static const at::Tensor kUndefined;
  return t.has_value() ? *t : kUndefined;
}
using T = at::Tensor;
using OT = std::optional<at::Tensor>;

T mse_loss(const T& s, const T& t, int64_t r) { return Mse(s, t, r, nullptr); }
T& mse_loss_out(const T& s, const T& t, int64_t r, T& out) {
  Mse(s, t, r, &out);
  return out;
}
T mse_loss_backward(const T& g, const T& s, const T& t, int64_t r) {
  return MseBackward(g, s, t, r, nullptr);
}
T& mse_loss_backward_out(const T& g, const T& s, const T& t, int64_t r, T& out) {
  MseBackward(g, s, t, r, &out);
  return out;
}
T smooth_l1(const T& s, const T& t, int64_t r, double beta) {
  return SmoothL1(s, t, r, beta, nullptr);
}
T& smooth_l1_out(const T& s, const T& t, int64_t r, double beta, T& out) {
  SmoothL1(s, t, r, beta, &out);
  return out;
}
T smooth_l1_backward(const T& g, const T& s, const T& t, int64_t r, double beta) {
  return SmoothL1Backward(g, s, t, r, beta, nullptr);
}
T& smooth_l1_backward_out(const T& g, const T& s, const T& t, int64_t r, double beta, T& out) {
  SmoothL1Backward(g, s, t, r, beta, &out);
  return out;
}
T huber(const T& s, const T& t, int64_t r, double delta) { return Huber(s, t, r, delta, nullptr); }
T& huber_out(const T& s, const T& t, int64_t r, double delta, T& out) {
  Huber(s, t, r, delta, &out);
  return out;
}
T huber_backward(const T& g, const T& s, const T& t, int64_t r, double delta) {
  return HuberBackward(g, s, t, r, delta, nullptr);
}
T& huber_backward_out(const T& g, const T& s, const T& t, int64_t r, double delta, T& out) {
  HuberBackward(g, s, t, r, delta, &out);
  return out;
}
T bce(const T& s, const T& t, const OT& w, int64_t r) { return Bce(s, t, Opt(w), r, nullptr); }
T& bce_out(const T& s, const T& t, const OT& w, int64_t r, T& out) {
  Bce(s, t, Opt(w), r, &out);
  return out;
}
T bce_backward(const T& g, const T& s, const T& t, const OT& w, int64_t r) {
  return BceBackward(g, s, t, Opt(w), r, nullptr);
}
T& bce_backward_out(const T& g, const T& s, const T& t, const OT& w, int64_t r, T& out) {
  BceBackward(g, s, t, Opt(w), r, &out);
  return out;
}
T bce_logits(const T& s, const T& t, const OT& w, const OT& pw, int64_t r) {
  return BceWithLogits(s, t, Opt(w), Opt(pw), r);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mse_loss", mse_loss);
  m.impl("mse_loss.out", mse_loss_out);
  m.impl("mse_loss_backward", mse_loss_backward);
  m.impl("mse_loss_backward.grad_input", mse_loss_backward_out);
  m.impl("smooth_l1_loss", smooth_l1);
  m.impl("smooth_l1_loss.out", smooth_l1_out);
  m.impl("smooth_l1_loss_backward", smooth_l1_backward);
  m.impl("smooth_l1_loss_backward.grad_input", smooth_l1_backward_out);
  m.impl("huber_loss", huber);
  m.impl("huber_loss.out", huber_out);
  m.impl("huber_loss_backward", huber_backward);
  m.impl("huber_loss_backward.out", huber_backward_out);
  m.impl("binary_cross_entropy", bce);
  m.impl("binary_cross_entropy.out", bce_out);
  m.impl("binary_cross_entropy_backward", bce_backward);
  m.impl("binary_cross_entropy_backward.grad_input", bce_backward_out);
  m.impl("binary_cross_entropy_with_logits", bce_logits);
}

}  // namespace tpu::torch_bridge
