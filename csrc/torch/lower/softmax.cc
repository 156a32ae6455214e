// Softmax family: _softmax, _log_softmax and their backward ops -> reduce + elementwise IR.
// Numerically stable: the max along `dim` is subtracted before exp. bfloat16/float16 compute in
// float32 and round once at the end, as PyTorch's CPU kernels do.
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include <limits>

#include "torch/lower/nn_util.h"

namespace tpu::torch_bridge {
namespace {

// softmax(x) or log_softmax(x) along d; x has rank >= 1 and a floating compute dtype.
int Forward(Builder& b, int x, int64_t d, bool log) {
  const Dims full = b.TypeOf(x).dims;
  DType t = b.TypeOf(x).dtype;
  int max =
      b.Reduce(x, b.Constant(-std::numeric_limits<double>::infinity(), t), {d}, ReduceKind::kMax);
  int shifted = b.Binary(OpCode::kSubtract, x, nn::Unreduce(b, max, full, d));
  int e = b.Unary(OpCode::kExp, shifted);
  int sum = nn::Sum(b, e, {d});
  if (log)
    return b.Binary(OpCode::kSubtract, shifted,
                    nn::Unreduce(b, b.Unary(OpCode::kLog, sum), full, d));
  return b.Binary(OpCode::kDivide, e, nn::Unreduce(b, sum, full, d));
}

// grad_input from grad g and the forward's output y (both in the compute dtype).
int Backward(Builder& b, int g, int y, int64_t d, bool log) {
  const Dims full = b.TypeOf(g).dims;
  if (log) {  // g - exp(y) * sum(g)
    int s = nn::Unreduce(b, nn::Sum(b, g, {d}), full, d);
    return b.Binary(OpCode::kSubtract, g, b.Binary(OpCode::kMultiply, b.Unary(OpCode::kExp, y), s));
  }
  // y * (g - sum(g * y))
  int s = nn::Unreduce(b, nn::Sum(b, b.Binary(OpCode::kMultiply, g, y), {d}), full, d);
  return b.Binary(OpCode::kMultiply, y, b.Binary(OpCode::kSubtract, g, s));
}

// A 0-dim tensor is a softmax over one element: computed as shape [1].
int AsRank1(Builder& b, int x) { return b.TypeOf(x).rank() == 0 ? b.Reshape(x, {1}) : x; }

at::Tensor SoftmaxImpl(bool log, const at::Tensor& self, int64_t dim, bool half_to_float,
                       const at::Tensor* out) {
  const char* name = log ? "log_softmax" : "softmax";
  int64_t d = at::maybe_wrap_dim(dim, self.dim());
  at::ScalarType in_t = self.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(in_t), "\"", name, "\" not implemented for '",
                              in_t, "'");
  // half_to_float: a float32 result from a float16/bfloat16 input (what CUDA kernels offer and
  // PyTorch's CPU kernels refuse); it saves the rounding step and the conversion op after it.
  TORCH_CHECK(!half_to_float || in_t == at::kHalf || in_t == at::kBFloat16,
              "conversion is supported for Half and BFloat16 type only");
  at::Tensor result = nn::ResultTensor(out, self.sizes(), half_to_float ? at::kFloat : in_t, self);
  if (result.numel() == 0) return result;
  Lowering l(log ? "aten::_log_softmax" : "aten::_softmax");
  Builder& b = l.b();
  int r = Forward(b, AsRank1(b, l.Input(self, OpMath(in_t))), d, log);
  if (self.dim() == 0) r = b.Reshape(r, {});
  l.Output(r, result);
  l.Run();
  return result;
}

at::Tensor BackwardImpl(bool log, const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                        at::ScalarType input_dtype, const at::Tensor* out) {
  CheckSameDevice(log ? "_log_softmax_backward_data" : "_softmax_backward_data", {&grad, &output});
  TORCH_CHECK(grad.sizes() == output.sizes(),
              "Expected tensor for argument #1 'grad' to have same size as tensor for argument #2 "
              "'output'; but ",
              grad.sizes(), " does not equal ", output.sizes(), " (while checking arguments for ",
              log ? "log_softmax_backward" : "softmax_backward", ")");
  int64_t d = at::maybe_wrap_dim(dim, grad.dim());
  at::ScalarType g_t = grad.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(g_t), "\"",
                              log ? "log_softmax_backward" : "softmax_backward",
                              "\" not implemented for '", g_t, "'");
  // The result dtype ATen's meta function gives: grad's, except the half_to_float case.
  at::ScalarType res_t = (g_t == at::kFloat && input_dtype == at::kHalf) ? at::kHalf : g_t;
  at::Tensor result = nn::ResultTensor(out, grad.sizes(), res_t, grad);
  if (result.numel() == 0) return result;
  Lowering l(log ? "aten::_log_softmax_backward_data" : "aten::_softmax_backward_data");
  Builder& b = l.b();
  at::ScalarType ct = OpMath(g_t);
  int g = AsRank1(b, l.Input(grad, ct));  // parameters in a fixed order: grad, then output
  int r = Backward(b, g, AsRank1(b, l.Input(output, ct)), d, log);
  if (grad.dim() == 0) r = b.Reshape(r, {});
  l.Output(r, result);
  l.Run();
  return result;
}

at::Tensor softmax(const at::Tensor& s, int64_t dim, bool h2f) {
  return SoftmaxImpl(false, s, dim, h2f, nullptr);
}
at::Tensor& softmax_out(const at::Tensor& s, int64_t dim, bool h2f, at::Tensor& out) {
  SoftmaxImpl(false, s, dim, h2f, &out);
  return out;
}
at::Tensor log_softmax(const at::Tensor& s, int64_t dim, bool h2f) {
  return SoftmaxImpl(true, s, dim, h2f, nullptr);
}
at::Tensor& log_softmax_out(const at::Tensor& s, int64_t dim, bool h2f, at::Tensor& out) {
  SoftmaxImpl(true, s, dim, h2f, &out);
  return out;
}
at::Tensor softmax_bwd(const at::Tensor& g, const at::Tensor& y, int64_t dim, at::ScalarType t) {
  return BackwardImpl(false, g, y, dim, t, nullptr);
}
at::Tensor& softmax_bwd_out(const at::Tensor& g, const at::Tensor& y, int64_t dim, at::ScalarType t,
                            at::Tensor& out) {
  BackwardImpl(false, g, y, dim, t, &out);
  return out;
}
at::Tensor log_softmax_bwd(const at::Tensor& g, const at::Tensor& y, int64_t dim,
                           at::ScalarType t) {
  return BackwardImpl(true, g, y, dim, t, nullptr);
}
at::Tensor& log_softmax_bwd_out(const at::Tensor& g, const at::Tensor& y, int64_t dim,
                                at::ScalarType t, at::Tensor& out) {
  BackwardImpl(true, g, y, dim, t, &out);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_softmax", softmax);
  m.impl("_softmax.out", softmax_out);
  m.impl("_log_softmax", log_softmax);
  m.impl("_log_softmax.out", log_softmax_out);
  m.impl("_softmax_backward_data", softmax_bwd);
  m.impl("_softmax_backward_data.out", softmax_bwd_out);
  m.impl("_log_softmax_backward_data", log_softmax_bwd);
  m.impl("_log_softmax_backward_data.out", log_softmax_bwd_out);
}

}  // namespace tpu::torch_bridge
