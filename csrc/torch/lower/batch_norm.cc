// Batch norm -> reduce + elementwise IR: native_batch_norm (+ backward), the
// _native_batch_norm_legit overloads and _batch_norm_with_update (+ batch_norm_backward) that
// torch.compile's decompositions and the newer batch_norm path use. One lowering serves all.
//
// Training: per-channel mean and biased variance over (N, spatial) (two passes), the output as
// x * alpha + beta with alpha = invstd * weight, beta = bias - mean * alpha (PyTorch's CPU
// formulation), and the running statistics updated in place in the same program:
//   running_mean = momentum * mean + (1 - momentum) * running_mean
//   running_var  = momentum * var_sum / (n - 1) + (1 - momentum) * running_var  (unbiased)
// Evaluation normalizes with the running statistics. bfloat16/float16 inputs compute in float32;
// statistics are float32 when float32 parameters go with them ("mixed"), else the input dtype.
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <tuple>

#include "torch/lower/nn_util.h"

namespace tpu::torch_bridge {
namespace {

const at::Tensor& Opt(const std::optional<at::Tensor>& t) {
  static const at::Tensor kUndefined;
  return t.has_value() ? *t : kUndefined;
}

struct Bn {
  Dims dims, reduce;
  int64_t c, n;
  at::ScalarType ct, stat_t, param_t;
};

Bn CheckBatchNorm(const char* name, const at::Tensor& input,
                  std::initializer_list<const at::Tensor*> params) {
  at::ScalarType t = input.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(t), "\"batch_norm\" not implemented for '", t,
                              "'");
  TORCH_CHECK(input.dim() >= 2, name, ": expected an input with at least 2 dimensions, got ",
              input.sizes());
  TORCH_CHECK(input.numel() != 0,
              "input tensor must have at least one element, but got input_sizes = ", input.sizes());
  Bn s;
  s.dims = ToDims(input.sizes());
  s.c = input.size(1);
  s.n = input.numel() / s.c;
  s.reduce.push_back(0);
  for (int64_t d = 2; d < input.dim(); ++d) s.reduce.push_back(d);
  s.ct = OpMath(t);
  bool mixed = false;
  for (const at::Tensor* p : params) {
    if (!p->defined()) continue;
    TORCH_CHECK(p->numel() == s.c, name, ": expected a parameter/statistic with ", s.c,
                " elements (the input's channels), got ", p->sizes());
    if (p->scalar_type() == t) continue;
    TORCH_CHECK((t == at::kBFloat16 || t == at::kHalf) && p->scalar_type() == at::kFloat,
                "mixed dtype (CPU): expect parameter to have scalar type of Float");
    mixed = true;
  }
  s.stat_t = mixed ? at::kFloat : t;
  s.param_t = s.stat_t;
  return s;
}

// A per-channel value broadcast over the input's shape.
int PerChannel(Builder& b, int v, const Bn& s) {
  return b.BroadcastInDim(b.Reshape(v, {s.c}), s.dims, {1});
}

// y (and, in training, the saved statistics and running-stat updates) into the given tensors.
// save_mean/save_invstd are written only in training; running stats updated if defined.
void LowerForward(const char* op, const Bn& s, const at::Tensor& input, const at::Tensor& w,
                  const at::Tensor& bias, const at::Tensor& rm, const at::Tensor& rv, bool training,
                  double momentum, double eps, const at::Tensor& out, const at::Tensor& save_mean,
                  const at::Tensor& save_invstd) {
  Lowering l(op);
  Builder& b = l.b();
  DType ct = ToDType(s.ct);
  Dims cd{s.c};
  int x = l.Input(input, s.ct);
  int eps_v = nn::Splat(l, eps, ct, cd);
  int mean, invstd;
  if (training) {
    // The output normalizes with the float32 statistics; the saved and running statistics are
    // rounded to their dtype (bfloat16 stats). CPU's bfloat16 kernels sometimes normalize with
    // the rounded ones (depending on the shape and layout), which is less accurate.
    DType st = ToDType(s.stat_t);
    auto round = [&](int v) { return b.ConvertIfNeeded(b.ConvertIfNeeded(v, st), ct); };
    mean = b.Binary(OpCode::kDivide, nn::Sum(b, x, s.reduce), nn::Fill(b, s.n, ct, cd));
    int xc = b.Binary(OpCode::kSubtract, x, PerChannel(b, mean, s));
    int exact_var_sum = nn::Sum(b, b.Binary(OpCode::kMultiply, xc, xc), s.reduce);
    int var_sum = round(exact_var_sum);
    int var = b.Binary(OpCode::kDivide, exact_var_sum, nn::Fill(b, s.n, ct, cd));
    invstd = b.Binary(OpCode::kDivide, nn::Fill(b, 1, ct, cd),
                      b.Unary(OpCode::kSqrt, b.Binary(OpCode::kAdd, var, eps_v)));
    l.Output(mean, save_mean);
    l.Output(invstd, save_invstd);
    // momentum in the statistics' dtype, as CPU's kernel holds it
    int m = b.ConvertIfNeeded(nn::Splat(l, momentum, st, cd), ct);
    int keep = b.Binary(OpCode::kSubtract, nn::Fill(b, 1, ct, cd), m);
    auto blend = [&](int v, const at::Tensor& running) {
      int old = b.Reshape(l.Input(running, s.ct), cd);
      int r = b.Binary(OpCode::kAdd, b.Binary(OpCode::kMultiply, m, v),
                       b.Binary(OpCode::kMultiply, keep, old));
      l.Output(b.Reshape(r, ToDims(running.sizes())), running);
    };
    if (rm.defined()) blend(round(mean), rm);
    if (rv.defined()) blend(b.Binary(OpCode::kDivide, var_sum, nn::Fill(b, s.n - 1, ct, cd)), rv);
  } else {
    mean = b.Reshape(l.Input(rm, s.ct), cd);
    int var = b.Reshape(l.Input(rv, s.ct), cd);
    invstd = b.Binary(OpCode::kDivide, nn::Fill(b, 1, ct, cd),
                      b.Unary(OpCode::kSqrt, b.Binary(OpCode::kAdd, var, eps_v)));
  }
  int alpha =
      w.defined() ? b.Binary(OpCode::kMultiply, invstd, b.Reshape(l.Input(w, s.ct), cd)) : invstd;
  int ma = b.Binary(OpCode::kMultiply, mean, alpha);
  int beta = bias.defined() ? b.Binary(OpCode::kSubtract, b.Reshape(l.Input(bias, s.ct), cd), ma)
                            : b.Unary(OpCode::kNegate, ma);
  int y = b.Binary(OpCode::kAdd, b.Binary(OpCode::kMultiply, x, PerChannel(b, alpha, s)),
                   PerChannel(b, beta, s));
  l.Output(y, out);
  l.Run();
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> BatchNorm(
    const char* op, const at::Tensor& input, const at::Tensor& w, const at::Tensor& bias,
    const at::Tensor& rm, const at::Tensor& rv, bool training, double momentum, double eps) {
  CheckSameDevice(op, {&input, &w, &bias, &rm, &rv});
  Bn s = CheckBatchNorm(op, input, {&w, &bias, &rm, &rv});
  TORCH_CHECK(training || (rm.defined() && rv.defined()),
              "running_mean and running_var must be defined in evaluation mode");
  at::Tensor out = EmptyLike(input.sizes(), input.scalar_type(), input, ChannelsLast(input));  // Note [Memory formats]
  int64_t stat_n = training ? s.c : 0;
  at::Tensor save_mean = EmptyLike({stat_n}, s.stat_t, input);
  at::Tensor save_invstd = EmptyLike({stat_n}, s.stat_t, input);
  LowerForward(op, s, input, w, bias, rm, rv, training, momentum, eps, out, save_mean, save_invstd);
  return {out, save_mean, save_invstd};
}

// The out= forms: CPU writes the running statistics in place although the schema does not mark
// them mutable, so a generic fallback would drop that update; they run natively.
std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> BatchNormOut(
    const char* op, const at::Tensor& input, const at::Tensor& w, const at::Tensor& bias, const at::Tensor& rm,
    const at::Tensor& rv, bool training, double momentum, double eps, at::Tensor& out, at::Tensor& save_mean,
    at::Tensor& save_invstd) {
  CheckSameDevice(op, {&input, &w, &bias, &rm, &rv, &out, &save_mean, &save_invstd});
  Bn s = CheckBatchNorm(op, input, {&w, &bias, &rm, &rv});
  TORCH_CHECK(training || (rm.defined() && rv.defined()),
              "running_mean and running_var must be defined in evaluation mode");
  TORCH_CHECK(out.scalar_type() == input.scalar_type() && save_mean.scalar_type() == s.stat_t &&
                  save_invstd.scalar_type() == s.stat_t,
              op, ": out= tensors have the wrong dtype");
  int64_t stat_n = training ? s.c : 0;
  at::native::resize_output(out, input.sizes());
  at::native::resize_output(save_mean, {stat_n});
  at::native::resize_output(save_invstd, {stat_n});
  LowerForward(op, s, input, w, bias, rm, rv, training, momentum, eps, out, save_mean, save_invstd);
  return {out, save_mean, save_invstd};
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> native_batch_norm_out(
    const at::Tensor& input, const std::optional<at::Tensor>& w, const std::optional<at::Tensor>& b,
    const std::optional<at::Tensor>& rm, const std::optional<at::Tensor>& rv, bool training, double momentum,
    double eps, at::Tensor& out, at::Tensor& save_mean, at::Tensor& save_invstd) {
  return BatchNormOut("aten::native_batch_norm", input, Opt(w), Opt(b), Opt(rm), Opt(rv), training, momentum, eps,
                      out, save_mean, save_invstd);
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> batch_norm_legit_out(
    const at::Tensor& input, const std::optional<at::Tensor>& w, const std::optional<at::Tensor>& b, at::Tensor& rm,
    at::Tensor& rv, bool training, double momentum, double eps, at::Tensor& out, at::Tensor& save_mean,
    at::Tensor& save_invstd) {
  return BatchNormOut("aten::_native_batch_norm_legit", input, Opt(w), Opt(b), rm, rv, training, momentum, eps, out,
                      save_mean, save_invstd);
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> batch_norm_legit_no_stats_out(
    const at::Tensor& input, const std::optional<at::Tensor>& w, const std::optional<at::Tensor>& b, bool training,
    double momentum, double eps, at::Tensor& out, at::Tensor& save_mean, at::Tensor& save_invstd) {
  return BatchNormOut("aten::_native_batch_norm_legit", input, Opt(w), Opt(b), at::Tensor(), at::Tensor(), training,
                      momentum, eps, out, save_mean, save_invstd);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm(
    const at::Tensor& input, const std::optional<at::Tensor>& w, const std::optional<at::Tensor>& b,
    const std::optional<at::Tensor>& rm, const std::optional<at::Tensor>& rv, bool training,
    double momentum, double eps) {
  return BatchNorm("aten::native_batch_norm", input, Opt(w), Opt(b), Opt(rm), Opt(rv), training,
                   momentum, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_legit(
    const at::Tensor& input, const std::optional<at::Tensor>& w, const std::optional<at::Tensor>& b,
    at::Tensor& rm, at::Tensor& rv, bool training, double momentum, double eps) {
  return BatchNorm("aten::_native_batch_norm_legit", input, Opt(w), Opt(b), rm, rv, training,
                   momentum, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_legit_no_stats(
    const at::Tensor& input, const std::optional<at::Tensor>& w, const std::optional<at::Tensor>& b,
    bool training, double momentum, double eps) {
  return BatchNorm("aten::_native_batch_norm_legit", input, Opt(w), Opt(b), at::Tensor(),
                   at::Tensor(), training, momentum, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> batch_norm_with_update(
    const at::Tensor& input, const std::optional<at::Tensor>& w, const std::optional<at::Tensor>& b,
    at::Tensor& rm, at::Tensor& rv, double momentum, double eps) {
  auto [out, mean, invstd] = BatchNorm("aten::_batch_norm_with_update", input, Opt(w), Opt(b), rm,
                                       rv, true, momentum, eps);
  // The reserve buffer is empty outside cuDNN/MIOpen.
  return {out, mean, invstd, at::empty({0}, input.options().dtype(at::kByte))};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> BatchNormBackward(
    const char* op, const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& w,
    const at::Tensor& rm, const at::Tensor& rv, const at::Tensor& save_mean,
    const at::Tensor& save_invstd, bool training, double eps, std::array<bool, 3> mask) {
  CheckSameDevice(op, {&grad_out, &input, &w, &rm, &rv, &save_mean, &save_invstd});
  Bn s = CheckBatchNorm(op, input, {&w, &rm, &rv});
  TORCH_CHECK(grad_out.sizes() == input.sizes(), op, ": grad_output has shape ", grad_out.sizes(),
              " but input has shape ", input.sizes());
  const at::Tensor& mean_t = training ? save_mean : rm;
  const at::Tensor& var_t = training ? save_invstd : rv;
  TORCH_CHECK(mean_t.defined() && var_t.defined() && mean_t.numel() == s.c && var_t.numel() == s.c,
              op,
              training ? ": expected save_mean and save_invstd with "
                       : ": expected running_mean and running_var with ",
              s.c, " elements");
  at::ScalarType param_t = w.defined() ? w.scalar_type() : mean_t.scalar_type();
  at::Tensor gx, gw, gb;
  if (mask[0]) gx = EmptyLike(input.sizes(), input.scalar_type(), input, ChannelsLast(input));
  if (mask[1]) gw = EmptyLike({s.c}, param_t, input);
  if (mask[2]) gb = EmptyLike({s.c}, param_t, input);
  if (!mask[0] && !mask[1] && !mask[2]) return {gx, gw, gb};
  Lowering l(op);
  Builder& b = l.b();
  DType ct = ToDType(s.ct);
  Dims cd{s.c};
  int g = l.Input(grad_out, s.ct);
  int x = l.Input(input, s.ct);
  int mean = b.Reshape(l.Input(mean_t, s.ct), cd);
  int invstd = b.Reshape(l.Input(var_t, s.ct), cd);
  if (!training)
    invstd =
        b.Binary(OpCode::kDivide, nn::Fill(b, 1, ct, cd),
                 b.Unary(OpCode::kSqrt, b.Binary(OpCode::kAdd, invstd, nn::Splat(l, eps, ct, cd))));
  int xc = b.Binary(OpCode::kSubtract, x, PerChannel(b, mean, s));
  int sum = nn::Sum(b, g, s.reduce);
  int dotp = nn::Sum(b, b.Binary(OpCode::kMultiply, xc, g), s.reduce);
  if (mask[0]) {
    int scale =
        w.defined() ? b.Binary(OpCode::kMultiply, invstd, b.Reshape(l.Input(w, s.ct), cd)) : invstd;
    int r;
    if (training) {
      // ((g - sum / n) - xc * k) * invstd * w with k = dotp * invstd^2 / n
      int nv = nn::Fill(b, s.n, ct, cd);
      int k = b.Binary(
          OpCode::kDivide,
          b.Binary(OpCode::kMultiply, b.Binary(OpCode::kMultiply, dotp, invstd), invstd), nv);
      int gm = b.Binary(OpCode::kDivide, sum, nv);
      r = b.Binary(OpCode::kSubtract, b.Binary(OpCode::kSubtract, g, PerChannel(b, gm, s)),
                   b.Binary(OpCode::kMultiply, xc, PerChannel(b, k, s)));
      r = b.Binary(OpCode::kMultiply, r, PerChannel(b, scale, s));
    } else {
      r = b.Binary(OpCode::kMultiply, g, PerChannel(b, scale, s));
    }
    l.Output(r, gx);
  }
  if (mask[1]) l.Output(b.Binary(OpCode::kMultiply, dotp, invstd), gw);
  if (mask[2]) l.Output(sum, gb);
  l.Run();
  return {gx, gw, gb};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const std::optional<at::Tensor>& w,
    const std::optional<at::Tensor>& rm, const std::optional<at::Tensor>& rv,
    const std::optional<at::Tensor>& save_mean, const std::optional<at::Tensor>& save_invstd,
    bool train, double eps, std::array<bool, 3> mask) {
  return BatchNormBackward("aten::native_batch_norm_backward", grad_out, input, Opt(w), Opt(rm),
                           Opt(rv), Opt(save_mean), Opt(save_invstd), train, eps, mask);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& w,
    const std::optional<at::Tensor>& rm, const std::optional<at::Tensor>& rv,
    const std::optional<at::Tensor>& save_mean, const std::optional<at::Tensor>& save_var,
    bool update, double eps, std::array<bool, 3> mask, const at::Tensor& reserve) {
  return BatchNormBackward("aten::batch_norm_backward", grad_out, input, w, Opt(rm), Opt(rv),
                           Opt(save_mean), Opt(save_var), update, eps, mask);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_batch_norm", native_batch_norm);
  m.impl("native_batch_norm.out", native_batch_norm_out);
  m.impl("_native_batch_norm_legit.out", batch_norm_legit_out);
  m.impl("_native_batch_norm_legit.no_stats_out", batch_norm_legit_no_stats_out);
  m.impl("native_batch_norm_backward", native_batch_norm_backward);
  m.impl("_native_batch_norm_legit", batch_norm_legit);
  m.impl("_native_batch_norm_legit.no_stats", batch_norm_legit_no_stats);
  m.impl("_batch_norm_with_update", batch_norm_with_update);
  m.impl("batch_norm_backward", batch_norm_backward);
}

}  // namespace tpu::torch_bridge
