// Group norm: native_group_norm and native_group_norm_backward -> reduce + elementwise IR.
//
// Without these, native_group_norm ran ATen's CompositeExplicitAutograd decomposition (var_mean,
// sub, mul, add: every step rounded to bfloat16 for a bfloat16 input, several bf16 ulps off
// CPU's kernel) and its backward ran on the CPU. As layer norm: statistics and outputs compute in
// float32 for bfloat16/float16 and round once; the variance is two-pass. The input [N, C, *] is
// viewed as [N, G, C/G, HxW]: a group reduces over the last two dims.
#include <torch/library.h>

#include <limits>
#include <tuple>

#include "torch/lower/nn_util.h"

namespace tpu::torch_bridge {
namespace {

struct GnShape {
  Dims dims;   // the input's shape
  Dims dims4;  // [N, G, C/G, HxW]
  Dims stat;   // [N, G]
  int64_t n;   // elements per group
};

GnShape CheckGroupNorm(const at::Tensor& X, const at::Tensor& w, const at::Tensor& b, int64_t N, int64_t C,
                       int64_t HxW, int64_t group) {
  TORCH_CHECK(group > 0, "Expected num groups to be greater than 0, got ", group);
  TORCH_CHECK(C % group == 0, "Expected number of channels in input to be divisible by ",
              "num_groups, but got input of shape ", X.sizes(), " and num_groups=", group);
  TORCH_CHECK(!w.defined() || (w.dim() == 1 && w.numel() == C),
              "Expected weight to be a vector of size equal to the number of ",
              "channels in input, but got weight of shape ", w.sizes(), " and input of shape ", X.sizes());
  TORCH_CHECK(!b.defined() || (b.dim() == 1 && b.numel() == C),
              "Expected bias to be a vector of size equal to the number of ",
              "channels in input, but got bias of shape ", b.sizes(), " and input of shape ", X.sizes());
  TORCH_CHECK(X.numel() == N * C * HxW, "Expected input of ", N * C * HxW, " elements (N * C * HxW), got ",
              X.sizes());
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(X.scalar_type()), "\"group_norm_tpu\" not implemented for '",
                              X.scalar_type(), "'");
  for (const at::Tensor* p : {&w, &b}) {
    if (!p->defined() || p->scalar_type() == X.scalar_type()) continue;
    TORCH_CHECK((X.scalar_type() == at::kBFloat16 || X.scalar_type() == at::kHalf) && p->scalar_type() == at::kFloat,
                "mixed dtype: expect parameter to have scalar type of Float");
  }
  GnShape s;
  s.dims = ToDims(X.sizes());
  s.dims4 = {N, group, C / group, HxW};
  s.stat = {N, group};
  s.n = C / group * HxW;
  return s;
}

// Mean/rstd dtype: float32 when float32 parameters go with a reduced-precision input.
at::ScalarType StatType(const at::Tensor& X, const at::Tensor& w, const at::Tensor& b) {
  bool mixed = (w.defined() && w.scalar_type() != X.scalar_type()) || (b.defined() && b.scalar_type() != X.scalar_type());
  return mixed ? at::kFloat : X.scalar_type();
}

// A [N, G] statistic, or a [C] parameter, broadcast over [N, G, C/G, HxW].
int Stat(Builder& b, int x, const GnShape& s) { return b.BroadcastInDim(x, s.dims4, {0, 1}); }
int Param(Builder& b, int p, const GnShape& s) {
  return b.BroadcastInDim(b.Reshape(p, {s.dims4[1], s.dims4[2]}), s.dims4, {1, 2});
}
int GroupMean(Builder& b, int x, const GnShape& s) {
  int sum = nn::Sum(b, x, {2, 3});
  return b.Binary(OpCode::kDivide, sum, b.ScalarLike(static_cast<double>(s.n), sum));
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> group_norm(const at::Tensor& X, const std::optional<at::Tensor>& w_opt,
                                                          const std::optional<at::Tensor>& b_opt, int64_t N, int64_t C,
                                                          int64_t HxW, int64_t group, double eps) {
  const at::Tensor& w = w_opt.has_value() ? *w_opt : at::Tensor();
  const at::Tensor& bias = b_opt.has_value() ? *b_opt : at::Tensor();
  CheckSameDevice("native_group_norm", {&X, &w, &bias});
  GnShape s = CheckGroupNorm(X, w, bias, N, C, HxW, group);
  at::ScalarType stat_t = StatType(X, w, bias);
  at::Tensor out = EmptyLike(X.sizes(), X.scalar_type(), X);
  at::Tensor mean = EmptyLike({N, group}, stat_t, X);
  at::Tensor rstd = EmptyLike({N, group}, stat_t, X);
  if (X.numel() == 0) {
    // Empty groups: mean 0 and rstd NaN, as ATen's CPU kernel gives.
    if (mean.numel() != 0) {
      mean.zero_();
      rstd.fill_(std::numeric_limits<double>::quiet_NaN());
    }
    return {out, mean, rstd};
  }
  Lowering l("aten::native_group_norm");
  Builder& b = l.b();
  at::ScalarType ct = OpMath(X.scalar_type());
  int x = b.Reshape(l.Input(X, ct), s.dims4);
  int mu = GroupMean(b, x, s);
  int xc = b.Binary(OpCode::kSubtract, x, Stat(b, mu, s));
  int var = GroupMean(b, b.Binary(OpCode::kMultiply, xc, xc), s);
  int r = b.Unary(OpCode::kRsqrt, b.Binary(OpCode::kAdd, var, b.BroadcastTo(l.Scalar(eps, ct), s.stat)));
  int y = b.Binary(OpCode::kMultiply, xc, Stat(b, r, s));
  if (w.defined()) y = b.Binary(OpCode::kMultiply, y, Param(b, l.Input(w, ct), s));
  if (bias.defined()) y = b.Binary(OpCode::kAdd, y, Param(b, l.Input(bias, ct), s));
  l.Output(b.Reshape(y, s.dims), out);
  l.Output(mu, mean);
  l.Output(r, rstd);
  l.Run();
  return {out, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> group_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& X, const at::Tensor& mean, const at::Tensor& rstd,
    const std::optional<at::Tensor>& w_opt, int64_t N, int64_t C, int64_t HxW, int64_t group,
    std::array<bool, 3> mask) {
  const at::Tensor& w = w_opt.has_value() ? *w_opt : at::Tensor();
  CheckSameDevice("native_group_norm_backward", {&grad_out, &X, &mean, &rstd, &w});
  GnShape s = CheckGroupNorm(X, w, at::Tensor(), N, C, HxW, group);
  TORCH_CHECK(grad_out.sizes() == X.sizes(), "native_group_norm_backward: grad_out has shape ", grad_out.sizes(),
              " but input has shape ", X.sizes());
  TORCH_CHECK(mean.numel() == N * group && rstd.numel() == N * group,
              "Expected mean and rstd of ", N * group, " elements (N * group), got ", mean.numel(), " and ",
              rstd.numel());
  at::Tensor dx, dw, db;
  // Parameter gradients have the weight's dtype (the input's when there is no weight).
  at::ScalarType pt = w.defined() ? w.scalar_type() : X.scalar_type();
  if (mask[0]) dx = EmptyLike(X.sizes(), X.scalar_type(), X);
  if (mask[1] && w.defined()) dw = EmptyLike({C}, pt, X);
  if (mask[2]) db = EmptyLike({C}, pt, X);
  if (X.numel() == 0) {  // no elements: zero parameter gradients
    if (dw.defined()) dw.zero_();
    if (db.defined()) db.zero_();
    return {dx, dw, db};
  }
  if (!dx.defined() && !dw.defined() && !db.defined()) return {dx, dw, db};
  Lowering l("aten::native_group_norm_backward");
  Builder& b = l.b();
  at::ScalarType ct = OpMath(X.scalar_type());
  int g = b.Reshape(l.Input(grad_out, ct), s.dims4);
  // Per-channel sums over N and HxW: [N, G, C/G, HxW] -> [C].
  auto channel_sum = [&](int v) { return b.Reshape(nn::Sum(b, v, {0, 3}), {C}); };
  if (dx.defined() || dw.defined()) {
    int x = b.Reshape(l.Input(X, ct), s.dims4);
    int mu = b.Reshape(l.Input(mean, ct), s.stat);
    int r = b.Reshape(l.Input(rstd, ct), s.stat);
    int xhat = b.Binary(OpCode::kMultiply, b.Binary(OpCode::kSubtract, x, Stat(b, mu, s)), Stat(b, r, s));
    if (dx.defined()) {
      // dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)) over the group, gw = g * weight
      int gw = w.defined() ? b.Binary(OpCode::kMultiply, g, Param(b, l.Input(w, ct), s)) : g;
      int m1 = Stat(b, GroupMean(b, gw, s), s);
      int m2 = Stat(b, GroupMean(b, b.Binary(OpCode::kMultiply, gw, xhat), s), s);
      int inner = b.Binary(OpCode::kSubtract, b.Binary(OpCode::kSubtract, gw, m1), b.Binary(OpCode::kMultiply, xhat, m2));
      l.Output(b.Reshape(b.Binary(OpCode::kMultiply, Stat(b, r, s), inner), s.dims), dx);
    }
    if (dw.defined()) l.Output(channel_sum(b.Binary(OpCode::kMultiply, g, xhat)), dw);
  }
  if (db.defined()) l.Output(channel_sum(g), db);
  l.Run();
  return {dx, dw, db};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_group_norm", group_norm);
  m.impl("native_group_norm_backward", group_norm_backward);
}

}  // namespace tpu::torch_bridge
