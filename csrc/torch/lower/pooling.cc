// 2-d max and average pooling -> reduce_window IR (ATen's structured meta functions check the
// arguments with PyTorch's messages and size the results).
//   max_pool2d_with_indices: reduce_window(max) for the values; arg_reduce_window over (x, the
//     flat h * W + w index) for the indices (first maximum in scan order, NaN wins, as CPU).
//   max_pool2d_with_indices_backward: a scatter-add of grad_output at those indices.
//   avg_pool2d: reduce_window(add) divided by the window's element count, itself a
//     reduce_window(add) over ones (which padding counts depends on count_include_pad).
//   avg_pool2d_backward: grad_output / count, then the adjoint window: reduce_window(add) with the
//     strides as base dilation.
// ceil_mode windows that run past the padding are covered by extra high padding, which reads
// the init value (and does not count).
#include <ATen/ops/avg_pool2d_backward_meta.h>
#include <ATen/ops/avg_pool2d_meta.h>
#include <ATen/ops/max_pool2d_with_indices_backward_meta.h>
#include <ATen/ops/max_pool2d_with_indices_meta.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <tuple>

#include "torch/lower/nn_util.h"
#include "torch/lower/structured.h"

namespace tpu::torch_bridge {
namespace {

// The two results of max_pool2d_with_indices, allocated or resized by its meta function.
class MaxPoolMeta final : public at::meta::structured_max_pool2d_with_indices {
 public:
  MaxPoolMeta(const at::Tensor& out, const at::Tensor& indices) : outs_{out, indices} {}
  const at::Tensor& maybe_get_output(int64_t i) override { return outs_[i]; }
  void set_output_raw_strided(int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides,
                              at::TensorOptions options) override {
    at::Tensor& t = outs_[i];
    if (!t.defined()) {
      t = strides.empty() ? at::empty(sizes, options) : at::empty_strided(sizes, strides, options);
      return;
    }
    TORCH_CHECK(options.dtype() == t.dtype(), "Expected out tensor to have dtype ", options.dtype(),
                ", but got ", t.dtype(), " instead");
    ResizeOut(t, sizes);
  }
  at::Tensor outs_[2];
};

// One pooling window over the last two dims of a rank-3 or rank-4 tensor.
struct Pool {
  int64_t k[2], s[2], p[2], d[2];
  int64_t in[2], out[2];
  int rank;
};

int64_t At(at::IntArrayRef v, int i, int64_t dflt) {
  return v.empty() ? dflt : v[v.size() == 1 ? 0 : i];
}

Pool MakePool(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
              at::IntArrayRef padding, at::IntArrayRef dilation, const at::Tensor& out) {
  Pool q;
  q.rank = static_cast<int>(self.dim());
  for (int i = 0; i < 2; ++i) {
    q.k[i] = At(kernel, i, 1);
    q.s[i] = At(stride, i, q.k[i]);
    q.p[i] = At(padding, i, 0);
    q.d[i] = At(dilation, i, 1);
    q.in[i] = self.size(q.rank - 2 + i);
    q.out[i] = out.size(q.rank - 2 + i);
  }
  return q;
}

Dims Ones(int n) { return Dims(static_cast<size_t>(n), int64_t{1}); }

// The forward window. The high padding reaches exactly to the last window's end (ceil_mode may
// need more than `p`; floor mode may leave input rows unread).
WindowSpec ForwardWindow(const Pool& q) {
  WindowSpec w = WindowSpec::Of(Ones(q.rank));
  w.padding_high = w.padding_low;
  for (int i = 0; i < 2; ++i) {
    int j = q.rank - 2 + i;
    w.dimensions[j] = q.k[i];
    w.strides[j] = q.s[i];
    w.window_dilations[j] = q.d[i];
    w.padding_low[j] = q.p[i];
    int64_t end = (q.out[i] - 1) * q.s[i] + q.d[i] * (q.k[i] - 1) + 1;
    w.padding_high[j] = std::max<int64_t>(0, end - q.in[i] - q.p[i]);
  }
  return w;
}

Dims Spatial(const Pool& q) { return {q.in[0], q.in[1]}; }
Dims OutSpatial(const Pool& q) { return {q.out[0], q.out[1]}; }

// Lowest value of `t` (the max-pool init).
double Lowest(DType t) {
  if (IsFloat(t)) return -std::numeric_limits<double>::infinity();
  if (t == DType::kU8 || t == DType::kU32 || t == DType::kU64 || t == DType::kBool) return 0;
  return -std::ldexp(1.0, DTypeSize(t) * 8 - 1);
}

void CheckPoolDtype(const char* name, const at::Tensor& self, bool allow_int) {
  at::ScalarType t = self.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(t) || (allow_int && at::isIntegralType(t, false)),
                              "\"", name, "\" not implemented for '", t, "'");
}

std::tuple<at::Tensor&, at::Tensor&> max_pool2d_with_indices_out(
    const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
    at::IntArrayRef dilation, bool ceil_mode, at::Tensor& out, at::Tensor& indices) {
  CheckSameDevice("max_pool2d_with_indices", {&self, &out, &indices});
  CheckPoolDtype("max_pool2d", self, true);
  MaxPoolMeta m(out, indices);
  m.meta(self, kernel, stride, padding, dilation, ceil_mode);
  if (!out.defined()) out = m.outs_[0];
  if (!indices.defined()) indices = m.outs_[1];
  if (out.numel() == 0) return {out, indices};
  Pool q = MakePool(self, kernel, stride, padding, dilation, out);
  Lowering l("aten::max_pool2d_with_indices");
  Builder& b = l.b();
  DType t = ToDType(self.scalar_type());
  int x = l.Input(self);
  WindowSpec w = ForwardWindow(q);
  l.Output(b.ReduceWindow(x, b.Constant(Lowest(t), t), w, ReduceKind::kMax), out);
  // The flat index h * W + w of every input element, broadcast over the leading dims (a view).
  TensorType plane{DType::kI64, Spatial(q)};
  int flat = b.Binary(
      OpCode::kAdd,
      b.Binary(OpCode::kMultiply, b.Iota(plane, 0), nn::Fill(b, q.in[1], DType::kI64, plane.dims)),
      b.Iota(plane, 1));
  Dims dims = ToDims(self.sizes());
  int index = b.BroadcastInDim(flat, dims, {q.rank - 2, q.rank - 1});
  l.Output(b.ArgReduceWindow(x, index, w), indices);
  l.Run();
  return {out, indices};
}

std::tuple<at::Tensor, at::Tensor> max_pool2d_with_indices(
    const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
    at::IntArrayRef dilation, bool ceil_mode) {
  at::Tensor out, indices;
  max_pool2d_with_indices_out(self, kernel, stride, padding, dilation, ceil_mode, out, indices);
  return {out, indices};
}

// The _out kernels below fill `out` (an undefined tensor: a new one) and return it by value.
at::Tensor MaxPoolBackward(const at::Tensor& grad_output, const at::Tensor& self,
                           at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
                           at::IntArrayRef dilation, bool ceil_mode, const at::Tensor& indices,
                           const at::Tensor& grad_input) {
  CheckSameDevice("max_pool2d_with_indices_backward", {&grad_output, &self, &indices, &grad_input});
  CheckPoolDtype("max_pool2d_with_indices_backward", self, false);
  MetaOut<at::meta::structured_max_pool2d_with_indices_backward> m(grad_input);
  m.meta(grad_output, self, kernel, stride, padding, dilation, ceil_mode, indices);
  at::Tensor gi = m.out();
  if (gi.numel() == 0) return gi;
  Lowering l("aten::max_pool2d_with_indices_backward");
  Builder& b = l.b();
  DType ct = ToDType(OpMath(grad_output.scalar_type()));
  int64_t plane = self.size(-2) * self.size(-1), planes = self.numel() / plane;
  int64_t opl = grad_output.numel() / planes;
  // Flat indices into the whole input: plane * H * W + index.
  Dims pl_dims{planes, opl};
  int idx = b.Reshape(l.Input(indices), pl_dims);
  int base = b.Binary(OpCode::kMultiply, b.Iota(TensorType{DType::kI64, pl_dims}, 0),
                      nn::Fill(b, plane, DType::kI64, pl_dims));
  int flat = b.Reshape(b.Binary(OpCode::kAdd, idx, base), {planes * opl, 1});
  int g = b.Reshape(l.Input(grad_output, OpMath(grad_output.scalar_type())), {planes * opl});
  int zeros = nn::Fill(b, 0, ct, {planes * plane});
  int r = b.Scatter(zeros, flat, g, {}, {0}, {0}, ReduceKind::kAdd, /*checked=*/true);
  l.CaptureLocation();
  l.Output(b.Reshape(r, ToDims(self.sizes())), gi);
  l.Run();
  return gi;
}

at::Tensor max_pool2d_backward(const at::Tensor& grad_output, const at::Tensor& self,
                               at::IntArrayRef kernel, at::IntArrayRef stride,
                               at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode,
                               const at::Tensor& indices) {
  return MaxPoolBackward(grad_output, self, kernel, stride, padding, dilation, ceil_mode, indices,
                         at::Tensor());
}

at::Tensor& max_pool2d_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                    at::IntArrayRef kernel, at::IntArrayRef stride,
                                    at::IntArrayRef padding, at::IntArrayRef dilation,
                                    bool ceil_mode, const at::Tensor& indices,
                                    at::Tensor& grad_input) {
  MaxPoolBackward(grad_output, self, kernel, stride, padding, dilation, ceil_mode, indices,
                  grad_input);
  return grad_input;
}

// The divisor of each average: divisor_override, or the window's element count by
// count_include_pad's rule, as a [OH, OW] value broadcast to `dims`.
int Divisor(Lowering& l, const Pool& q, bool count_include_pad,
            std::optional<int64_t> divisor_override, DType ct, const Dims& dims) {
  Builder& b = l.b();
  if (divisor_override.has_value()) return nn::Splat(l, *divisor_override, ct, dims);
  // Ones over the region that counts: the padded input (include) or the input itself.
  Pool c = q;
  c.rank = 2;
  Dims region = Spatial(q);
  if (count_include_pad) {
    for (int i = 0; i < 2; ++i) {
      region[i] += 2 * q.p[i];
      c.in[i] = region[i];
      c.p[i] = 0;
    }
  }
  WindowSpec w = ForwardWindow(c);
  int counts = b.ReduceWindow(nn::Fill(b, 1, ct, region), b.Constant(0, ct), w, ReduceKind::kAdd);
  int r = static_cast<int>(dims.size());
  return b.BroadcastInDim(counts, dims, {r - 2, r - 1});
}

at::Tensor AvgPool(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                   at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                   std::optional<int64_t> divisor_override, const at::Tensor& out) {
  CheckSameDevice("avg_pool2d", {&self, &out});
  CheckPoolDtype("avg_pool2d", self, true);
  MetaOut<at::meta::structured_avg_pool2d> m(out);
  m.meta(self, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override);
  at::Tensor result = m.out();
  if (result.numel() == 0) return result;
  Pool q = MakePool(self, kernel, stride, padding, {}, result);
  Lowering l("aten::avg_pool2d");
  Builder& b = l.b();
  at::ScalarType cst = OpMath(self.scalar_type());
  DType ct = ToDType(cst);
  int sum =
      b.ReduceWindow(l.Input(self, cst), b.Constant(0, ct), ForwardWindow(q), ReduceKind::kAdd);
  Dims dims = ToDims(result.sizes());
  l.Output(
      b.Binary(OpCode::kDivide, sum, Divisor(l, q, count_include_pad, divisor_override, ct, dims)),
      result);
  l.Run();
  return result;
}

at::Tensor avg_pool2d(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                      at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                      std::optional<int64_t> divisor_override) {
  return AvgPool(self, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override,
                 at::Tensor());
}

at::Tensor& avg_pool2d_out(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                           at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                           std::optional<int64_t> divisor_override, at::Tensor& out) {
  AvgPool(self, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override, out);
  return out;
}

at::Tensor AvgPoolBackward(const at::Tensor& grad_output, const at::Tensor& self,
                           at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
                           bool ceil_mode, bool count_include_pad,
                           std::optional<int64_t> divisor_override, const at::Tensor& grad_input) {
  CheckSameDevice("avg_pool2d_backward", {&grad_output, &self, &grad_input});
  CheckPoolDtype("avg_pool2d_backward", self, false);
  MetaOut<at::meta::structured_avg_pool2d_backward> m(grad_input);
  m.meta(grad_output, self, kernel, stride, padding, ceil_mode, count_include_pad,
         divisor_override);
  at::Tensor gi = m.out();
  if (gi.numel() == 0) return gi;
  Pool q = MakePool(self, kernel, stride, padding, {}, grad_output);
  Lowering l("aten::avg_pool2d_backward");
  Builder& b = l.b();
  at::ScalarType cst = OpMath(grad_output.scalar_type());
  DType ct = ToDType(cst);
  Dims gdims = ToDims(grad_output.sizes());
  int g = b.Binary(OpCode::kDivide, l.Input(grad_output, cst),
                   Divisor(l, q, count_include_pad, divisor_override, ct, gdims));
  // Input row y receives the outputs i with y = i * s + a - p, a in [0, k): a window of k over
  // the grad dilated by s, padded low by k - 1 - p (p <= k / 2, so never negative).
  WindowSpec w = WindowSpec::Of(Ones(q.rank));
  w.padding_high = w.padding_low;
  for (int i = 0; i < 2; ++i) {
    int j = q.rank - 2 + i;
    w.dimensions[j] = q.k[i];
    w.base_dilations[j] = q.s[i];
    w.padding_low[j] = q.k[i] - 1 - q.p[i];
    w.padding_high[j] = std::max<int64_t>(0, q.in[i] + q.p[i] - 1 - (q.out[i] - 1) * q.s[i]);
  }
  int r = b.ReduceWindow(g, b.Constant(0, ct), w, ReduceKind::kAdd);
  // Windows that start past the input (ceil_mode) make the adjoint longer than the input.
  Dims full = ToDims(gi.sizes());
  if (b.TypeOf(r).dims != full) {
    Dims start(full.size(), 0), step(full.size(), 1);
    r = b.Slice(r, start, full, step);
  }
  l.Output(r, gi);
  l.Run();
  return gi;
}

at::Tensor avg_pool2d_backward(const at::Tensor& grad_output, const at::Tensor& self,
                               at::IntArrayRef kernel, at::IntArrayRef stride,
                               at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                               std::optional<int64_t> divisor_override) {
  return AvgPoolBackward(grad_output, self, kernel, stride, padding, ceil_mode, count_include_pad,
                         divisor_override, at::Tensor());
}

at::Tensor& avg_pool2d_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                    at::IntArrayRef kernel, at::IntArrayRef stride,
                                    at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                                    std::optional<int64_t> divisor_override,
                                    at::Tensor& grad_input) {
  AvgPoolBackward(grad_output, self, kernel, stride, padding, ceil_mode, count_include_pad,
                  divisor_override, grad_input);
  return grad_input;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("max_pool2d_with_indices", max_pool2d_with_indices);
  m.impl("max_pool2d_with_indices.out", max_pool2d_with_indices_out);
  m.impl("max_pool2d_with_indices_backward", max_pool2d_backward);
  m.impl("max_pool2d_with_indices_backward.grad_input", max_pool2d_backward_out);
  m.impl("avg_pool2d", avg_pool2d);
  m.impl("avg_pool2d.out", avg_pool2d_out);
  m.impl("avg_pool2d_backward", avg_pool2d_backward);
  m.impl("avg_pool2d_backward.grad_input", avg_pool2d_backward_out);
}

}  // namespace tpu::torch_bridge
