// Negative log-likelihood losses: nll_loss_forward/backward (1-D/2-D input) and
// nll_loss2d_forward/backward (N, C, H, W) -> gather + elementwise + reduce IR.
//
// The forward picks input[..., target, ...] with a *checked* gather: an out-of-range target is a
// data-dependent error raised by the executor and reported with the op and the user's line (at
// the next sync point in strict mode, at the op in debug mode). ignore_index targets are replaced
// by class 0 before the lookup and their terms are selected away, never multiplied by a zero
// weight (that would turn a -inf log-probability into NaN). The backward writes -w[t] * grad into
// the target's class with a one-hot select: no scatter.
#include <ATen/core/Reduction.h>
#include <torch/library.h>

#include <limits>
#include <tuple>

#include "torch/lower/index_util.h"
#include "torch/lower/nn_util.h"

namespace tpu::torch_bridge {
namespace {

using at::Reduction::Mean;
using at::Reduction::None;

void CheckTarget(const at::Tensor& target) {
  TORCH_CHECK(target.scalar_type() == at::kLong || target.scalar_type() == at::kByte,
              "expected target dtype to be Long or Byte, but got ", target.scalar_type());
}

void CheckInputType(const char* op, const at::Tensor& self, const at::Tensor& weight) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()), "\"", op,
                              "\" not implemented for '", self.scalar_type(), "'");
  TORCH_CHECK(!weight.defined() || weight.scalar_type() == self.scalar_type(),
              "expected scalar type ", self.scalar_type(), " but found ", weight.scalar_type());
}

// nll_loss (1-D/2-D input). Returns the target's shape without the class dim (a [1] target of a
// 1-D input counts as a 0-dim one).
Dims CheckNll(const at::Tensor& self, const at::Tensor& target, const at::Tensor& weight) {
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "input tensor should be 1D or 2D");
  TORCH_CHECK(target.dim() <= 1, "0D or 1D target tensor expected, multi-target not supported");
  CheckTarget(target);
  if (self.dim() == 1 && target.dim() == 1)
    TORCH_CHECK_VALUE(
        target.size(0) == 1,
        "For 1D input, 1D target must have size 1, but got target size: ", target.size(0));
  bool no_batch = self.dim() == 1;
  TORCH_CHECK(no_batch || self.size(0) == target.size(0),
              "size mismatch (got input: ", self.sizes(), ", target: ", target.sizes(), ")");
  int64_t n_classes = self.size(-1);
  TORCH_CHECK(!weight.defined() || (weight.dim() == 1 && weight.numel() == n_classes),
              "weight tensor should be defined either for all ", n_classes,
              " classes or no classes but got weight "
              "tensor of shape: ",
              weight.sizes());
  CheckInputType("nll_loss", self, weight);
  return no_batch ? Dims{} : Dims{target.size(0)};
}

Dims CheckNll2d(const at::Tensor& self, const at::Tensor& target, const at::Tensor& weight) {
  TORCH_CHECK(target.dim() == 3,
              "only batches of spatial targets supported (3D tensors) but got targets of "
              "dimension: ",
              target.dim());
  TORCH_CHECK(self.dim() == 4,
              "only batches of spatial inputs supported (4D tensors), but got input of dimension: ",
              self.dim());
  CheckTarget(target);
  TORCH_CHECK(self.size(0) == target.size(0) && self.size(2) == target.size(1) &&
                  self.size(3) == target.size(2),
              "size mismatch (got input: ", self.sizes(), " , target: ", target.sizes());
  TORCH_CHECK(!weight.defined() || weight.numel() == self.size(1),
              "weight tensor should be defined either for all or no classes");
  CheckInputType("nll_loss2d", self, weight);
  return ToDims(target.sizes());
}

// The class dim: 0 for a 1-D input, else 1.
int64_t ClassDim(const at::Tensor& self) { return self.dim() == 1 ? 0 : 1; }

// IR values shared by forward and backward, all of the target's shape `ts`.
struct Target {
  int valid;  // target != ignore_index
  int safe;   // the target with ignored entries replaced by class 0 (i64)
};

Target LowerTarget(Lowering& l, const at::Tensor& target, const Dims& ts, int64_t ignore_index) {
  Builder& b = l.b();
  int t = l.Input(target, at::kLong);
  if (b.TypeOf(t).dims != ts) t = b.Reshape(t, ts);
  int valid =
      b.Compare(CompareDirection::kNE, t, b.BroadcastTo(l.Scalar(ignore_index, at::kLong), ts));
  return {valid, b.Select(valid, t, nn::Fill(b, 0, DType::kI64, ts))};
}

// table[target] at every target position, of the target's shape `ts`: a checked gather, so a
// target outside the 1-D table fails the program.
int ByTarget(Builder& b, int table, const Target& t, const Dims& ts) {
  Dims idx_dims = ts;
  idx_dims.push_back(1);
  return b.Gather(table, b.Reshape(t.safe, idx_dims), {}, {0}, {0}, {1}, /*checked=*/true);
}

// weight[target] (1 without a weight), 0 where the target is ignored.
int TargetWeight(Lowering& l, const at::Tensor& weight, const Target& t, const Dims& ts, DType c) {
  Builder& b = l.b();
  int w = weight.defined() ? ByTarget(b, l.Input(weight, ToScalarType(c)), t, ts) : nn::Fill(b, 1, c, ts);
  return b.Select(t.valid, w, nn::Fill(b, 0, c, ts));
}

// The target at every target position as an index of the input's rank: the target's shape with a
// dim of 1 at the class dim.
int TargetAlongClassDim(Builder& b, const Target& t, const Dims& ts, int64_t class_dim) {
  Dims idx_dims = ts;
  idx_dims.insert(idx_dims.begin() + class_dim, 1);
  return b.Reshape(t.safe, idx_dims);
}

// input[i0, .., target[i0, ..], ..] for every target position: a gather along the class dim whose
// other dims are batching dims (GatherAlongDim), so the target is read as it is.
int PickTarget(Builder& b, int x, int64_t class_dim, const Target& t, const Dims& ts) {
  return b.Reshape(GatherAlongDim(b, x, TargetAlongClassDim(b, t, ts, class_dim), class_dim), ts);
}

std::tuple<at::Tensor, at::Tensor> NllForward(const char* op, const at::Tensor& self,
                                              const at::Tensor& target, const at::Tensor& weight,
                                              int64_t reduction, int64_t ignore_index,
                                              const Dims& ts, at::Tensor* out,
                                              at::Tensor* total_out) {
  CheckSameDevice(op, {&self, &target, &weight});
  // Unreduced losses of a batched input keep the target's shape; everything else is a scalar.
  bool unreduced = reduction == None && self.dim() > 1;
  at::ScalarType t = self.scalar_type();
  at::Tensor output =
      nn::ResultTensor(out, unreduced ? at::IntArrayRef(ts) : at::IntArrayRef(), t, self);
  at::Tensor total = nn::ResultTensor(total_out, {}, t, self);
  if (target.numel() == 0 || self.numel() == 0) {  // no terms: an empty/zero loss, NaN for a mean
    if (output.numel())
      output.fill_(reduction == Mean ? std::numeric_limits<double>::quiet_NaN() : 0.0);
    total.zero_();
    return {output, total};
  }
  Lowering l(op);
  Builder& b = l.b();
  at::ScalarType ct = OpMath(t);
  DType c = ToDType(ct);
  Target tgt = LowerTarget(l, target, ts, ignore_index);
  // Gather in the input's dtype: only the picked values are converted, not the whole input.
  int picked = b.ConvertIfNeeded(PickTarget(b, l.Input(self), ClassDim(self), tgt, ts), c);
  l.CaptureLocation();  // the gather may fail when the program runs: name the user's line
  int w = TargetWeight(l, weight, tgt, ts, c);
  int zero = nn::Fill(b, 0, c, ts);
  int loss =
      b.Select(tgt.valid, b.Unary(OpCode::kNegate, b.Binary(OpCode::kMultiply, picked, w)), zero);
  if (unreduced) {
    l.Output(loss, output);
    l.Output(b.Constant(0, c), total);
  } else {
    Dims all = nn::Range(0, ts.size());
    int sum = all.empty() ? loss : nn::Sum(b, loss, all);
    int tw = all.empty() ? w : nn::Sum(b, w, all);
    l.Output(reduction == Mean ? b.Binary(OpCode::kDivide, sum, tw) : sum, output);
    l.Output(tw, total);
  }
  l.Run();
  return {output, total};
}

at::Tensor NllBackward(const char* op, const at::Tensor& grad, const at::Tensor& self,
                       const at::Tensor& target, const at::Tensor& weight, int64_t reduction,
                       int64_t ignore_index, const at::Tensor& total_weight, const Dims& ts,
                       at::Tensor* out) {
  CheckSameDevice(op, {&grad, &self, &target, &weight, &total_weight});
  TORCH_CHECK(total_weight.numel() == 1,
              "expected total_weight to be a  single element tensor, got: ", total_weight.sizes(),
              " (", total_weight.numel(), " elements)");
  bool unreduced = reduction == None && self.dim() > 1;
  if (unreduced) {
    TORCH_CHECK(grad.sizes() == at::IntArrayRef(ts),
                "size mismatch (got grad_output: ", grad.sizes(), " target: ", target.sizes(), ")");
  } else {
    TORCH_CHECK(grad.dim() <= 1 && grad.numel() == 1,
                "Expected a single element grad_output tensor, but got: ", grad.sizes());
  }
  at::Tensor result = nn::ResultTensor(out, self.sizes(), self.scalar_type(), self);
  if (result.numel() == 0) return result;
  Lowering l(op);
  Builder& b = l.b();
  at::ScalarType ct = OpMath(self.scalar_type());
  DType c = ToDType(ct);
  Target tgt = LowerTarget(l, target, ts, ignore_index);
  int w = TargetWeight(l, weight, tgt, ts, c);
  l.CaptureLocation();
  int g = l.Input(grad, ct);
  if (!unreduced) {
    g = b.Reshape(g, {});
    if (reduction == Mean)
      g = b.Binary(OpCode::kDivide, g, b.Reshape(l.Input(total_weight, ct), {}));
    g = b.BroadcastTo(g, ts);
  }
  int val = b.Select(tgt.valid, b.Unary(OpCode::kNegate, b.Binary(OpCode::kMultiply, w, g)),
                     nn::Fill(b, 0, c, ts));
  const Dims full = ToDims(self.sizes());
  int64_t cd = ClassDim(self);
  // As PyTorch's CPU kernel does, the backward checks the targets itself (a checked gather of
  // the class ids by target): a bad target fails the gradient whatever became of the forward's
  // outputs (its total_weight does not depend on the targets' range).
  int checked = ByTarget(b, b.Iota(TensorType{DType::kI64, {full[cd]}}, 0), tgt, ts);
  // Each position's value scattered into zeros at its class (the gradient's one nonzero per
  // position): a scatter along the class dim with the other dims as batching dims, so it writes
  // one element per position instead of comparing every class with the target.
  Target at{tgt.valid, checked};
  int idx = AsIndexColumn(b, TargetAlongClassDim(b, at, ts, cd));
  Dims upd_dims = ts;
  upd_dims.insert(upd_dims.begin() + cd, 1);
  const Dims batch = AllBut(static_cast<int64_t>(full.size()), cd);
  l.Output(b.Scatter(nn::Fill(b, 0, c, full), idx, b.Reshape(val, upd_dims), {}, {cd}, {cd}, ReduceKind::kReplace,
                     /*checked=*/true, batch, batch),
           result);
  l.Run();
  return result;
}

// ---- registered forms ------------------------------------------------------------------------
const at::Tensor& Opt(const std::optional<at::Tensor>& t) {
  static const at::Tensor kUndefined;
  return t.has_value() ? *t : kUndefined;
}

std::tuple<at::Tensor, at::Tensor> nll_loss_forward(const at::Tensor& self,
                                                    const at::Tensor& target,
                                                    const std::optional<at::Tensor>& w,
                                                    int64_t reduction, int64_t ignore_index) {
  Dims ts = CheckNll(self, target, Opt(w));
  return NllForward("aten::nll_loss_forward", self, target, Opt(w), reduction, ignore_index, ts,
                    nullptr, nullptr);
}
std::tuple<at::Tensor&, at::Tensor&> nll_loss_forward_out(const at::Tensor& self,
                                                          const at::Tensor& target,
                                                          const std::optional<at::Tensor>& w,
                                                          int64_t reduction, int64_t ignore_index,
                                                          at::Tensor& out, at::Tensor& total) {
  Dims ts = CheckNll(self, target, Opt(w));
  NllForward("aten::nll_loss_forward", self, target, Opt(w), reduction, ignore_index, ts, &out,
             &total);
  return {out, total};
}
at::Tensor nll_loss_backward(const at::Tensor& grad, const at::Tensor& self,
                             const at::Tensor& target, const std::optional<at::Tensor>& w,
                             int64_t reduction, int64_t ignore_index,
                             const at::Tensor& total_weight) {
  Dims ts = CheckNll(self, target, Opt(w));
  return NllBackward("aten::nll_loss_backward", grad, self, target, Opt(w), reduction, ignore_index,
                     total_weight, ts, nullptr);
}
at::Tensor& nll_loss_backward_out(const at::Tensor& grad, const at::Tensor& self,
                                  const at::Tensor& target, const std::optional<at::Tensor>& w,
                                  int64_t reduction, int64_t ignore_index,
                                  const at::Tensor& total_weight, at::Tensor& out) {
  Dims ts = CheckNll(self, target, Opt(w));
  NllBackward("aten::nll_loss_backward", grad, self, target, Opt(w), reduction, ignore_index,
              total_weight, ts, &out);
  return out;
}
std::tuple<at::Tensor, at::Tensor> nll_loss2d_forward(const at::Tensor& self,
                                                      const at::Tensor& target,
                                                      const std::optional<at::Tensor>& w,
                                                      int64_t reduction, int64_t ignore_index) {
  Dims ts = CheckNll2d(self, target, Opt(w));
  return NllForward("aten::nll_loss2d_forward", self, target, Opt(w), reduction, ignore_index, ts,
                    nullptr, nullptr);
}
std::tuple<at::Tensor&, at::Tensor&> nll_loss2d_forward_out(const at::Tensor& self,
                                                            const at::Tensor& target,
                                                            const std::optional<at::Tensor>& w,
                                                            int64_t reduction, int64_t ignore_index,
                                                            at::Tensor& out, at::Tensor& total) {
  Dims ts = CheckNll2d(self, target, Opt(w));
  NllForward("aten::nll_loss2d_forward", self, target, Opt(w), reduction, ignore_index, ts, &out,
             &total);
  return {out, total};
}
at::Tensor nll_loss2d_backward(const at::Tensor& grad, const at::Tensor& self,
                               const at::Tensor& target, const std::optional<at::Tensor>& w,
                               int64_t reduction, int64_t ignore_index,
                               const at::Tensor& total_weight) {
  Dims ts = CheckNll2d(self, target, Opt(w));
  if (reduction == None)
    TORCH_CHECK(
        grad.dim() == 3,
        "grad_output must have same dimension as target (3) but got dimension: ", grad.sizes());
  return NllBackward("aten::nll_loss2d_backward", grad, self, target, Opt(w), reduction,
                     ignore_index, total_weight, ts, nullptr);
}
at::Tensor& nll_loss2d_backward_out(const at::Tensor& grad, const at::Tensor& self,
                                    const at::Tensor& target, const std::optional<at::Tensor>& w,
                                    int64_t reduction, int64_t ignore_index,
                                    const at::Tensor& total_weight, at::Tensor& out) {
  Dims ts = CheckNll2d(self, target, Opt(w));
  if (reduction == None)
    TORCH_CHECK(
        grad.dim() == 3,
        "grad_output must have same dimension as target (3) but got dimension: ", grad.sizes());
  NllBackward("aten::nll_loss2d_backward", grad, self, target, Opt(w), reduction, ignore_index,
              total_weight, ts, &out);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("nll_loss_forward", nll_loss_forward);
  m.impl("nll_loss_forward.output", nll_loss_forward_out);
  m.impl("nll_loss_backward", nll_loss_backward);
  m.impl("nll_loss_backward.grad_input", nll_loss_backward_out);
  m.impl("nll_loss2d_forward", nll_loss2d_forward);
  m.impl("nll_loss2d_forward.output", nll_loss2d_forward_out);
  m.impl("nll_loss2d_backward", nll_loss2d_backward);
  m.impl("nll_loss2d_backward.grad_input", nll_loss2d_backward_out);
}

}  // namespace tpu::torch_bridge
