// Layer norm (native_layer_norm and native_layer_norm_backward) and RMS norm (_fused_rms_norm and
// its backward) -> reduce + elementwise IR.
//
// The statistics reduce over the trailing normalized dims directly (no reshape), so strided
// inputs are read in place. Statistics and outputs compute in float32 for bfloat16/float16 and
// round once; the variance is two-pass (mean first, then the mean of squared deviations).
// F.rms_norm (CompositeImplicitAutograd) calls _fused_rms_norm on a device that implements it: one
// program forward and one backward, where its decomposition (pow, mean, add, rsqrt, mul, mul) was
// six forward and more backward.
#include <torch/library.h>

#include <limits>
#include <sstream>
#include <tuple>

#include "torch/lower/nn_util.h"

namespace tpu::torch_bridge {
namespace {

struct LnShape {
  int64_t axis;     // first normalized dim
  Dims dims;        // input shape
  Dims outer;       // input shape[:axis]: the statistics' shape
  Dims stat_dims;   // shape[:axis] + [1] * normalized rank: what ATen returns for mean/rstd
  Dims norm_axes;   // [axis, rank)
  Dims outer_axes;  // [0, axis)
  int64_t n;        // elements per normalized group
};

// Parameters share the input's dtype, or are float32 for a bfloat16/float16 input.
void CheckParam(const at::Tensor& input, const at::Tensor& p) {
  if (!p.defined() || p.scalar_type() == input.scalar_type()) return;
  TORCH_CHECK((input.scalar_type() == at::kBFloat16 || input.scalar_type() == at::kHalf) &&
                  p.scalar_type() == at::kFloat,
              "mixed dtype: expect parameter to have scalar type of Float");
}

// `param_dtypes`: layer norm's rule for the parameters' dtypes (RMS norm takes any floating weight).
LnShape CheckLayerNorm(const at::Tensor& input, at::IntArrayRef normalized_shape,
                       const at::Tensor& weight, const at::Tensor& bias, bool param_dtypes = true) {
  int64_t nd = static_cast<int64_t>(normalized_shape.size());
  TORCH_CHECK(
      nd >= 1,
      "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one "
      "element, but got normalized_shape = ",
      normalized_shape);
  TORCH_CHECK(!weight.defined() || weight.sizes().equals(normalized_shape),
              "Expected weight to be of same shape as normalized_shape, but got weight of shape ",
              weight.sizes(), " and normalized_shape = ", normalized_shape);
  TORCH_CHECK(!bias.defined() || bias.sizes().equals(normalized_shape),
              "Expected bias to be of same shape as normalized_shape, but got bias of shape ",
              bias.sizes(), " and normalized_shape = ", normalized_shape);
  int64_t rank = input.dim();
  if (rank < nd || !input.sizes().slice(rank - nd).equals(normalized_shape)) {
    std::ostringstream ss;
    ss << "Given normalized_shape=" << normalized_shape << ", expected input with shape [*";
    for (int64_t s : normalized_shape) ss << ", " << s;
    ss << "], but got input of size" << input.sizes();
    TORCH_CHECK(false, ss.str());
  }
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(input.scalar_type()),
                              "\"LayerNormKernelImpl\" not implemented for '", input.scalar_type(),
                              "'");
  if (param_dtypes) {
    CheckParam(input, weight);
    CheckParam(input, bias);
  }
  LnShape s;
  s.axis = rank - nd;
  s.dims = ToDims(input.sizes());
  s.outer = Dims(s.dims.begin(), s.dims.begin() + s.axis);
  s.stat_dims = s.outer;
  s.stat_dims.resize(rank, 1);
  s.norm_axes = nn::Range(s.axis, nd);
  s.outer_axes = nn::Range(0, s.axis);
  s.n = c10::multiply_integers(normalized_shape);
  return s;
}

// Mean/rstd dtype: float32 when float32 parameters go with a reduced-precision input.
at::ScalarType StatType(const at::Tensor& input, const at::Tensor& w, const at::Tensor& b) {
  bool mixed = (w.defined() && w.scalar_type() != input.scalar_type()) ||
               (b.defined() && b.scalar_type() != input.scalar_type());
  return mixed ? at::kFloat : input.scalar_type();
}

// A statistic (shape `outer`) broadcast over the normalized dims.
int Stat(Builder& b, int x, const LnShape& s) { return b.BroadcastInDim(x, s.dims, s.outer_axes); }
// A parameter (normalized shape) broadcast over the outer dims.
int Param(Builder& b, int x, const LnShape& s) { return b.BroadcastInDim(x, s.dims, s.norm_axes); }
// The mean over the normalized dims.
int GroupMean(Builder& b, int x, const LnShape& s) {
  int sum = nn::Sum(b, x, s.norm_axes);
  return b.Binary(OpCode::kDivide, sum, b.ScalarLike(static_cast<double>(s.n), sum));
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm(
    const at::Tensor& input, at::IntArrayRef normalized_shape,
    const std::optional<at::Tensor>& weight_opt, const std::optional<at::Tensor>& bias_opt,
    double eps) {
  const at::Tensor& w = weight_opt.has_value() ? *weight_opt : at::Tensor();
  const at::Tensor& bias = bias_opt.has_value() ? *bias_opt : at::Tensor();
  CheckSameDevice("native_layer_norm", {&input, &w, &bias});
  LnShape s = CheckLayerNorm(input, normalized_shape, w, bias);
  at::ScalarType stat_t = StatType(input, w, bias);
  at::Tensor out = EmptyLike(input.sizes(), input.scalar_type(), input);
  at::Tensor mean = EmptyLike(s.stat_dims, stat_t, input);
  at::Tensor rstd = EmptyLike(s.stat_dims, stat_t, input);
  if (input.numel() == 0) {
    // No groups, or empty groups (mean 0 and rstd NaN, as ATen's CPU kernel gives).
    if (mean.numel() != 0) {
      mean.zero_();
      rstd.fill_(std::numeric_limits<double>::quiet_NaN());
    }
    return {out, mean, rstd};
  }
  Lowering l("aten::native_layer_norm");
  Builder& b = l.b();
  at::ScalarType ct = OpMath(input.scalar_type());
  int x = l.Input(input, ct);
  int mu = GroupMean(b, x, s);
  int xc = b.Binary(OpCode::kSubtract, x, Stat(b, mu, s));
  int var = GroupMean(b, b.Binary(OpCode::kMultiply, xc, xc), s);
  int r = b.Unary(OpCode::kRsqrt,
                  b.Binary(OpCode::kAdd, var, b.BroadcastTo(l.Scalar(eps, ct), s.outer)));
  int y = b.Binary(OpCode::kMultiply, xc, Stat(b, r, s));
  if (w.defined()) y = b.Binary(OpCode::kMultiply, y, Param(b, l.Input(w, ct), s));
  if (bias.defined()) y = b.Binary(OpCode::kAdd, y, Param(b, l.Input(bias, ct), s));
  l.Output(y, out);
  l.Output(b.Reshape(mu, s.stat_dims), mean);
  l.Output(b.Reshape(r, s.stat_dims), rstd);
  l.Run();
  return {out, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, at::IntArrayRef normalized_shape,
    const at::Tensor& mean, const at::Tensor& rstd, const std::optional<at::Tensor>& weight_opt,
    const std::optional<at::Tensor>& bias_opt, std::array<bool, 3> mask) {
  const at::Tensor& w = weight_opt.has_value() ? *weight_opt : at::Tensor();
  const at::Tensor& bias = bias_opt.has_value() ? *bias_opt : at::Tensor();
  CheckSameDevice("native_layer_norm_backward", {&grad_out, &input, &mean, &rstd, &w, &bias});
  LnShape s = CheckLayerNorm(input, normalized_shape, w, bias);
  TORCH_CHECK(grad_out.sizes() == input.sizes(), "native_layer_norm_backward: grad_out has shape ",
              grad_out.sizes(), " but input has shape ", input.sizes());
  int64_t groups = c10::multiply_integers(s.outer);
  TORCH_CHECK(mean.numel() == groups && rstd.numel() == groups,
              "native_layer_norm_backward: expected mean and rstd "
              "with ",
              groups, " elements, got ", mean.numel(), " and ", rstd.numel());
  at::Tensor dx, dw, db;
  if (mask[0]) dx = EmptyLike(input.sizes(), input.scalar_type(), input);
  // Parameter gradients exist only for parameters that exist (ATen's CPU kernel cannot make them).
  if (mask[1] && w.defined()) dw = EmptyLike(w.sizes(), w.scalar_type(), w);
  if (mask[2] && bias.defined()) db = EmptyLike(bias.sizes(), bias.scalar_type(), bias);
  if (input.numel() == 0) {  // no groups: zero parameter gradients
    if (dw.defined()) dw.zero_();
    if (db.defined()) db.zero_();
    return {dx, dw, db};
  }
  if (!dx.defined() && !dw.defined() && !db.defined()) return {dx, dw, db};
  Lowering l("aten::native_layer_norm_backward");
  Builder& b = l.b();
  at::ScalarType ct = OpMath(input.scalar_type());
  int g = l.Input(grad_out, ct);
  if (dx.defined() || dw.defined()) {
    int x = l.Input(input, ct);
    int mu = b.Reshape(l.Input(mean, ct), s.outer);
    int r = b.Reshape(l.Input(rstd, ct), s.outer);
    int xhat =
        b.Binary(OpCode::kMultiply, b.Binary(OpCode::kSubtract, x, Stat(b, mu, s)), Stat(b, r, s));
    if (dx.defined()) {
      // dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)), gw = g * weight
      int gw = w.defined() ? b.Binary(OpCode::kMultiply, g, Param(b, l.Input(w, ct), s)) : g;
      int m1 = Stat(b, GroupMean(b, gw, s), s);
      int m2 = Stat(b, GroupMean(b, b.Binary(OpCode::kMultiply, gw, xhat), s), s);
      int inner = b.Binary(OpCode::kSubtract, b.Binary(OpCode::kSubtract, gw, m1),
                           b.Binary(OpCode::kMultiply, xhat, m2));
      l.Output(b.Binary(OpCode::kMultiply, Stat(b, r, s), inner), dx);
    }
    if (dw.defined()) {
      int gx = b.Binary(OpCode::kMultiply, g, xhat);
      l.Output(s.axis == 0 ? gx : nn::Sum(b, gx, s.outer_axes), dw);
    }
  }
  if (db.defined()) l.Output(s.axis == 0 ? g : nn::Sum(b, g, s.outer_axes), db);
  l.Run();
  return {dx, dw, db};
}

// ---- RMS norm ---------------------------------------------------------------------------------
// As the CPU's composite computes it: in float32 for bfloat16/float16 (float64 stays float64),
// rstd = rsqrt(mean(x^2) + eps) over the normalized dims, y = x * rstd * weight rounded once to the
// input's dtype (whatever the weight's floating dtype), rstd returned keepdim in the compute type;
// eps by default the compute type's epsilon.
LnShape CheckRmsNorm(const char* op, const at::Tensor& input, at::IntArrayRef normalized_shape,
                     const at::Tensor& w) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(input.scalar_type()), "\"rms_norm\" not implemented for '",
                              input.scalar_type(), "'");
  TORCH_CHECK(!w.defined() || at::isFloatingType(w.scalar_type()), op, ": expected a floating-point weight, got ",
              w.scalar_type());
  return CheckLayerNorm(input, normalized_shape, w, at::Tensor(), /*param_dtypes=*/false);
}

std::tuple<at::Tensor, at::Tensor> fused_rms_norm(const at::Tensor& input, at::IntArrayRef normalized_shape,
                                                  const std::optional<at::Tensor>& weight_opt,
                                                  std::optional<double> eps_opt) {
  const at::Tensor& w = weight_opt.has_value() ? *weight_opt : at::Tensor();
  CheckSameDevice("_fused_rms_norm", {&input, &w});
  LnShape s = CheckRmsNorm("_fused_rms_norm", input, normalized_shape, w);
  at::ScalarType ct = OpMath(input.scalar_type());
  const double eps = eps_opt.has_value() ? *eps_opt
                     : ct == at::kDouble ? std::numeric_limits<double>::epsilon()
                                         : static_cast<double>(std::numeric_limits<float>::epsilon());
  at::Tensor out = EmptyLike(input.sizes(), input.scalar_type(), input);
  at::Tensor rstd = EmptyLike(s.stat_dims, ct, input);
  if (input.numel() == 0) {
    if (rstd.numel() != 0) rstd.fill_(std::numeric_limits<double>::quiet_NaN());  // the mean of no elements
    return {out, rstd};
  }
  Lowering l("aten::_fused_rms_norm");
  Builder& b = l.b();
  int x = l.Input(input, ct);
  int ms = GroupMean(b, b.Binary(OpCode::kMultiply, x, x), s);
  int r = b.Unary(OpCode::kRsqrt, b.Binary(OpCode::kAdd, ms, b.BroadcastTo(l.Scalar(eps, ct), s.outer)));
  int y = b.Binary(OpCode::kMultiply, x, Stat(b, r, s));
  if (w.defined()) y = b.Binary(OpCode::kMultiply, y, Param(b, l.Input(w, ct), s));
  l.Output(y, out);
  l.Output(b.Reshape(r, s.stat_dims), rstd);
  l.Run();
  return {out, rstd};
}

// dx = rstd * (gw - xhat * mean(gw * xhat)), gw = grad * weight, xhat = x * rstd; dweight = the
// sum over the outer dims of grad * xhat (in the compute type, rounded once).
std::tuple<at::Tensor, at::Tensor> fused_rms_norm_backward(const at::Tensor& grad_out, const at::Tensor& input,
                                                           at::IntArrayRef normalized_shape, const at::Tensor& rstd,
                                                           const std::optional<at::Tensor>& weight_opt,
                                                           std::array<bool, 2> mask) {
  const at::Tensor& w = weight_opt.has_value() ? *weight_opt : at::Tensor();
  CheckSameDevice("_fused_rms_norm_backward", {&grad_out, &input, &rstd, &w});
  LnShape s = CheckRmsNorm("_fused_rms_norm_backward", input, normalized_shape, w);
  TORCH_CHECK(grad_out.sizes() == input.sizes(), "_fused_rms_norm_backward: grad_out has shape ", grad_out.sizes(),
              " but input has shape ", input.sizes());
  const int64_t groups = c10::multiply_integers(s.outer);
  TORCH_CHECK(rstd.numel() == groups, "_fused_rms_norm_backward: expected rstd with ", groups, " elements, got ",
              rstd.numel());
  at::Tensor dx, dw;
  if (mask[0]) dx = EmptyLike(input.sizes(), input.scalar_type(), input);
  if (mask[1] && w.defined()) dw = EmptyLike(w.sizes(), w.scalar_type(), w);
  if (input.numel() == 0) {
    if (dw.defined()) dw.zero_();
    return {dx, dw};
  }
  if (!dx.defined() && !dw.defined()) return {dx, dw};
  Lowering l("aten::_fused_rms_norm_backward");
  Builder& b = l.b();
  at::ScalarType ct = OpMath(input.scalar_type());
  int g = l.Input(grad_out, ct);
  int x = l.Input(input, ct);
  int r = Stat(b, b.Reshape(l.Input(rstd, ct), s.outer), s);  // broadcast to x's shape
  int xhat = b.Binary(OpCode::kMultiply, x, r);
  if (dx.defined()) {
    int gw = w.defined() ? b.Binary(OpCode::kMultiply, g, Param(b, l.Input(w, ct), s)) : g;
    int c = Stat(b, GroupMean(b, b.Binary(OpCode::kMultiply, gw, xhat), s), s);
    int inner = b.Binary(OpCode::kSubtract, gw, b.Binary(OpCode::kMultiply, xhat, c));
    l.Output(b.Binary(OpCode::kMultiply, r, inner), dx);
  }
  if (dw.defined()) {
    int gx = b.Binary(OpCode::kMultiply, g, xhat);
    l.Output(s.axis == 0 ? gx : nn::Sum(b, gx, s.outer_axes), dw);
  }
  l.Run();
  return {dx, dw};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_layer_norm", layer_norm);
  m.impl("native_layer_norm_backward", layer_norm_backward);
  m.impl("_fused_rms_norm", fused_rms_norm);
  m.impl("_fused_rms_norm_backward", fused_rms_norm_backward);
}

}  // namespace tpu::torch_bridge
