// Group norm: native_group_norm and native_group_norm_backward -> reduce + elementwise IR over
// the input viewed as [N, G, C/G, HxW]. The output is layer norm's chain over the trailing dims
// (C/G, HxW), (x - mean) * rsqrt(var + eps), then * weight + bias per channel: the host executor
// runs the chain as one layer-norm row step (Note [Row chains]; group_norm on [16, 96, 16, 16]
// with 8 groups: 229 -> 156-162 us against PyTorch's formula x * scale + shift, within float32
// rounding of it). The input gradient is PyTorch's CPU kernel's, rstd * weight * g + c2 * x + c3
// with per-group c2, c3. bfloat16/float16 compute in float32; mean/rstd are float32 with float32
// parameters ("mixed"), else the input dtype.
#include <torch/library.h>

#include <limits>
#include <tuple>

#include "torch/lower/nn_util.h"

namespace tpu::torch_bridge {
namespace {

struct Gn {
  int64_t n, c, hw, g, cg;
  Dims d4;  // [N, G, C/G, HxW]
  at::ScalarType ct, stat_t;
};

Gn CheckGroupNorm(const char* name, const at::Tensor& input, const at::Tensor& w,
                  const at::Tensor& b, int64_t N, int64_t C, int64_t HxW, int64_t group) {
  at::ScalarType t = input.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(t), "\"group_norm\" not implemented for '", t,
                              "'");
  TORCH_CHECK(group > 0, "Expected num groups to be greater than 0, got ", group);
  TORCH_CHECK(
      C % group == 0,
      "Expected number of channels in input to be divisible by num_groups, but got input of "
      "shape ",
      input.sizes(), " and num_groups=", group);
  TORCH_CHECK(input.numel() == N * C * HxW, name, ": input of shape ", input.sizes(),
              " does not hold N * C * HxW = ", N, " * ", C, " * ", HxW, " elements");
  bool mixed = false;
  for (const at::Tensor* p : {&w, &b}) {
    if (!p->defined()) continue;
    TORCH_CHECK(p->dim() == 1 && p->numel() == C,
                "Expected weight to be a vector of size equal to the number of ",
                "channels in input, but got weight of shape ", p->sizes(), " and input of shape ",
                input.sizes());
    if (p->scalar_type() == t) continue;
    TORCH_CHECK((t == at::kBFloat16 || t == at::kHalf) && p->scalar_type() == at::kFloat,
                "mixed dtype (CPU): expect parameter to have scalar type of Float");
    mixed = true;
  }
  Gn s{N, C, HxW, group, C / group, {N, group, C / group, HxW}, OpMath(t), mixed ? at::kFloat : t};
  return s;
}

// [N, G] -> [N, G, C/G, HxW]
int PerGroup(Builder& b, int v, const Gn& s) { return b.BroadcastInDim(v, s.d4, {0, 1}); }

std::tuple<at::Tensor, at::Tensor, at::Tensor> group_norm(const at::Tensor& input,
                                                          const std::optional<at::Tensor>& w_opt,
                                                          const std::optional<at::Tensor>& b_opt,
                                                          int64_t N, int64_t C, int64_t HxW,
                                                          int64_t group, double eps) {
  const at::Tensor w = w_opt.value_or(at::Tensor()), bias = b_opt.value_or(at::Tensor());
  CheckSameDevice("native_group_norm", {&input, &w, &bias});
  Gn s = CheckGroupNorm("native_group_norm", input, w, bias, N, C, HxW, group);
  at::Tensor out = EmptyLike(input.sizes(), input.scalar_type(), input, ChannelsLast(input));  // Note [Memory formats]
  at::Tensor mean = EmptyLike({N, group}, s.stat_t, input);
  at::Tensor rstd = EmptyLike({N, group}, s.stat_t, input);
  if (input.numel() == 0) {
    if (mean.numel() != 0) {  // empty groups: mean 0, rstd NaN (0 / 0 variance), as CPU
      mean.zero_();
      rstd.fill_(std::numeric_limits<double>::quiet_NaN());
    }
    return {out, mean, rstd};
  }
  Lowering l("aten::native_group_norm");
  Builder& b = l.b();
  DType ct = ToDType(s.ct);
  Dims ng{N, group};
  int x = b.Reshape(l.Input(input, s.ct), s.d4);
  double count = static_cast<double>(s.cg * HxW);
  int mu = b.Binary(OpCode::kDivide, nn::Sum(b, x, {2, 3}), nn::Fill(b, count, ct, ng));
  int xc = b.Binary(OpCode::kSubtract, x, PerGroup(b, mu, s));
  int var = b.Binary(OpCode::kDivide, nn::Sum(b, b.Binary(OpCode::kMultiply, xc, xc), {2, 3}),
                     nn::Fill(b, count, ct, ng));
  int r = b.Unary(OpCode::kRsqrt, b.Binary(OpCode::kAdd, var, b.BroadcastTo(l.Scalar(eps, s.ct), ng)));
  int y = b.Binary(OpCode::kMultiply, xc, PerGroup(b, r, s));
  if (w.defined())
    y = b.Binary(OpCode::kMultiply, y,
                 b.BroadcastInDim(b.Reshape(l.Input(w, s.ct), {group, s.cg}), s.d4, {1, 2}));
  if (bias.defined())
    y = b.Binary(OpCode::kAdd, y,
                 b.BroadcastInDim(b.Reshape(l.Input(bias, s.ct), {group, s.cg}), s.d4, {1, 2}));
  l.Output(b.Reshape(y, ToDims(input.sizes())), out);
  l.Output(mu, mean);
  l.Output(r, rstd);
  l.Run();
  return {out, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> group_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
    const at::Tensor& rstd, const std::optional<at::Tensor>& w_opt, int64_t N, int64_t C,
    int64_t HxW, int64_t group, std::array<bool, 3> mask) {
  const at::Tensor w = w_opt.value_or(at::Tensor());
  CheckSameDevice("native_group_norm_backward", {&grad_out, &input, &mean, &rstd, &w});
  Gn s = CheckGroupNorm("native_group_norm_backward", input, w, at::Tensor(), N, C, HxW, group);
  TORCH_CHECK(grad_out.sizes() == input.sizes(),
              "native_group_norm_backward: grad_output has shape ", grad_out.sizes(),
              " but input has shape ", input.sizes());
  TORCH_CHECK(mean.numel() == N * group && rstd.numel() == N * group,
              "native_group_norm_backward: expected mean and rstd with ", N * group, " elements");
  at::ScalarType param_t = w.defined() ? w.scalar_type() : input.scalar_type();
  at::Tensor gx, gw, gb;
  if (mask[0]) gx = EmptyLike(input.sizes(), input.scalar_type(), input, ChannelsLast(input));
  if (mask[1]) gw = EmptyLike({C}, param_t, input);
  if (mask[2]) gb = EmptyLike({C}, param_t, input);
  if (input.numel() == 0) {
    if (gw.defined()) gw.zero_();
    if (gb.defined()) gb.zero_();
    return {gx, gw, gb};
  }
  if (!mask[0] && !mask[1] && !mask[2]) return {gx, gw, gb};
  Lowering l("aten::native_group_norm_backward");
  Builder& b = l.b();
  DType ct = ToDType(s.ct);
  Dims ng{N, group}, ngc{N, group, s.cg};
  int g = b.Reshape(l.Input(grad_out, s.ct), s.d4);
  int x = b.Reshape(l.Input(input, s.ct), s.d4);
  int mu = b.Reshape(l.Input(mean, s.ct), ng);
  int r = b.Reshape(l.Input(rstd, s.ct), ng);
  int ds = nn::Sum(b, b.Binary(OpCode::kMultiply, g, x), {3});  // [N, G, C/G]
  int db = nn::Sum(b, g, {3});
  if (mask[0]) {
    int wv = w.defined() ? b.BroadcastInDim(b.Reshape(l.Input(w, s.ct), {group, s.cg}), ngc, {1, 2})
                         : nn::Fill(b, 1, ct, ngc);
    int ds_g = nn::Sum(b, b.Binary(OpCode::kMultiply, ds, wv), {2});
    int db_g = nn::Sum(b, b.Binary(OpCode::kMultiply, db, wv), {2});
    int inv_count = nn::Fill(b, 1.0 / static_cast<double>(s.cg * HxW), ct, ng);
    // c2 = (db_g * mean - ds_g) * rstd^3 * s;  c3 = -c2 * mean - db_g * rstd * s
    int r3 = b.Binary(OpCode::kMultiply, b.Binary(OpCode::kMultiply, r, r), r);
    int c2 = b.Binary(
        OpCode::kMultiply,
        b.Binary(OpCode::kMultiply,
                 b.Binary(OpCode::kSubtract, b.Binary(OpCode::kMultiply, db_g, mu), ds_g), r3),
        inv_count);
    int c3 =
        b.Binary(OpCode::kSubtract, b.Unary(OpCode::kNegate, b.Binary(OpCode::kMultiply, c2, mu)),
                 b.Binary(OpCode::kMultiply, b.Binary(OpCode::kMultiply, db_g, r), inv_count));
    int rw = b.BroadcastInDim(b.Binary(OpCode::kMultiply, b.BroadcastInDim(r, ngc, {0, 1}), wv),
                              s.d4, {0, 1, 2});
    int dx = b.Binary(OpCode::kAdd, b.Binary(OpCode::kMultiply, rw, g),
                      b.Binary(OpCode::kAdd, b.Binary(OpCode::kMultiply, PerGroup(b, c2, s), x),
                               PerGroup(b, c3, s)));
    l.Output(b.Reshape(dx, ToDims(input.sizes())), gx);
  }
  if (mask[1]) {
    // sum_n (ds - db * mean) * rstd
    int t = b.Binary(OpCode::kMultiply,
                     b.Binary(OpCode::kSubtract, ds,
                              b.Binary(OpCode::kMultiply, db, b.BroadcastInDim(mu, ngc, {0, 1}))),
                     b.BroadcastInDim(r, ngc, {0, 1}));
    l.Output(b.Reshape(nn::Sum(b, t, {0}), {C}), gw);
  }
  if (mask[2]) l.Output(b.Reshape(nn::Sum(b, db, {0}), {C}), gb);
  l.Run();
  return {gx, gw, gb};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_group_norm", group_norm);
  m.impl("native_group_norm_backward", group_norm_backward);
}

}  // namespace tpu::torch_bridge
