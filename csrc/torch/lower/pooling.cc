// 2-d and 3-d max and average pooling -> reduce_window IR (ATen's structured meta functions check
// the arguments with PyTorch's messages and size the results).
//   max_pool{2,3}d_with_indices: reduce_window(max) for the values; arg_reduce_window over (x,
//     the flat (t * H + h) * W + w index) for the indices (first maximum in scan order, NaN wins,
//     as CPU).
//   max_pool2d_with_indices_backward: a scatter-add of grad_output at those indices.
//   avg_pool2d: reduce_window(add) divided by the window's element count, itself a
//     reduce_window(add) over ones (which padding counts depends on count_include_pad).
//   avg_pool2d_backward: grad_output / count, then the adjoint window: reduce_window(add) with the
//     strides as base dilation.
// ceil_mode windows that run past the padding are covered by extra high padding, which reads
// the init value (and does not count).
#include <ATen/native/Pool.h>
#include <ATen/ops/avg_pool2d_backward_meta.h>
#include <ATen/ops/avg_pool2d_meta.h>
#include <ATen/ops/avg_pool3d_backward_meta.h>
#include <ATen/ops/avg_pool3d_meta.h>
#include <ATen/ops/max_pool2d_with_indices_backward_meta.h>
#include <ATen/ops/max_pool2d_with_indices_meta.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <tuple>

#include "torch/lower/index_util.h"
#include "torch/lower/nn_util.h"
#include "torch/lower/structured.h"

namespace tpu::torch_bridge {

// Scatter-adds grad_output at `indices` (flat within the last n dims of self) into gi: a scatter
// along the plane dim of [planes, plane] batched over the planes (torch.scatter_add's form), so
// the host runs the planes in parallel, each plane's updates in order; the flat form (plane
// offsets added to the indices, one scatter over [planes * plane]) had every thread walk every
// update ([16, 64, 56, 56] backward: ~3.2 ms, PyTorch CPU 0.9 ms). An index outside its plane is
// an error at the op.
void MaxPoolBackwardInto(const char* op, const at::Tensor& grad_output, const at::Tensor& self,
                         const at::Tensor& indices, int n, const at::Tensor& gi) {
  Lowering l(op);
  Builder& b = l.b();
  DType ct = ToDType(OpMath(grad_output.scalar_type()));
  int64_t plane = c10::multiply_integers(self.sizes().slice(self.dim() - n));
  int64_t planes = self.numel() / plane;
  int64_t opl = grad_output.numel() / planes;
  Dims pl_dims{planes, opl};
  int idx = AsIndexColumn(b, b.Reshape(l.Input(indices), pl_dims));
  int g = b.Reshape(l.Input(grad_output, OpMath(grad_output.scalar_type())), pl_dims);
  int zeros = nn::Fill(b, 0, ct, {planes, plane});
  int r = b.Scatter(zeros, idx, g, {}, {1}, {1}, ReduceKind::kAdd, /*checked=*/true, {0}, {0});
  l.CaptureLocation();
  l.Output(b.Reshape(r, ToDims(self.sizes())), gi);
  l.Run();
}

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

// One pooling window over the last n (2 or 3) dims of a tensor.
struct Pool {
  int64_t k[3], s[3], p[3], d[3];
  int64_t in[3], out[3];
  int rank, n;
  int Dim(int i) const { return rank - n + i; }
};

int64_t At(at::IntArrayRef v, int i, int64_t dflt) {
  return v.empty() ? dflt : v[v.size() == 1 ? 0 : i];
}

Pool MakePool(int n, const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
              at::IntArrayRef padding, at::IntArrayRef dilation, at::IntArrayRef out_sizes) {
  Pool q;
  q.rank = static_cast<int>(self.dim());
  q.n = n;
  for (int i = 0; i < n; ++i) {
    q.k[i] = At(kernel, i, 1);
    q.s[i] = At(stride, i, q.k[i]);
    q.p[i] = At(padding, i, 0);
    q.d[i] = At(dilation, i, 1);
    q.in[i] = self.size(q.Dim(i));
    q.out[i] = out_sizes[q.Dim(i)];
  }
  return q;
}

Dims Ones(int n) { return Dims(static_cast<size_t>(n), int64_t{1}); }

// The forward window. The high padding reaches exactly to the last window's end (ceil_mode may
// need more than `p`; floor mode may leave input rows unread).
WindowSpec ForwardWindow(const Pool& q) {
  WindowSpec w = WindowSpec::Of(Ones(q.rank));
  w.padding_high = w.padding_low;
  for (int i = 0; i < q.n; ++i) {
    int j = q.Dim(i);
    w.dimensions[j] = q.k[i];
    w.strides[j] = q.s[i];
    w.window_dilations[j] = q.d[i];
    w.padding_low[j] = q.p[i];
    int64_t end = (q.out[i] - 1) * q.s[i] + q.d[i] * (q.k[i] - 1) + 1;
    w.padding_high[j] = std::max<int64_t>(0, end - q.in[i] - q.p[i]);
  }
  return w;
}

Dims Spatial(const Pool& q) { return Dims(q.in, q.in + q.n); }
// The positions of the spatial dims, for broadcasting a spatial value over the leading dims.
Dims SpatialDims(const Pool& q) {
  Dims r;
  for (int i = 0; i < q.n; ++i) r.push_back(q.Dim(i));
  return r;
}

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

void MaxPoolInto(const char* op, const at::Tensor& self, const Pool& q, const at::Tensor& out,
                 const at::Tensor& indices) {
  Lowering l(op);
  Builder& b = l.b();
  DType t = ToDType(self.scalar_type());
  int x = l.Input(self);
  WindowSpec w = ForwardWindow(q);
  l.Output(b.ReduceWindow(x, b.Constant(Lowest(t), t), w, ReduceKind::kMax), out);
  // The flat (t * H + h) * W + w index of every input element, broadcast over the leading dims.
  TensorType plane{DType::kI64, Spatial(q)};
  int flat = b.Iota(plane, 0);
  for (int i = 1; i < q.n; ++i)
    flat =
        b.Binary(OpCode::kAdd,
                 b.Binary(OpCode::kMultiply, flat, nn::Fill(b, q.in[i], DType::kI64, plane.dims)),
                 b.Iota(plane, i));
  int index = b.BroadcastInDim(flat, ToDims(self.sizes()), SpatialDims(q));
  l.Output(b.ArgReduceWindow(x, index, w), indices);
  l.Run();
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
  MaxPoolInto("aten::max_pool2d_with_indices", self,
              MakePool(2, self, kernel, stride, padding, dilation, out.sizes()), out, indices);
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
  MaxPoolBackwardInto("aten::max_pool2d_with_indices_backward", grad_output, self, indices, 2, gi);
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
// count_include_pad's rule, as a spatial value broadcast to `dims`.
int Divisor(Lowering& l, const Pool& q, bool count_include_pad,
            std::optional<int64_t> divisor_override, DType ct, const Dims& dims) {
  Builder& b = l.b();
  if (divisor_override.has_value()) return nn::Splat(l, *divisor_override, ct, dims);
  // Ones over the region that counts: the padded input (include) or the input itself.
  Pool c = q;
  c.rank = q.n;
  Dims region = Spatial(q);
  if (count_include_pad) {
    for (int i = 0; i < q.n; ++i) {
      region[i] += 2 * q.p[i];
      c.in[i] = region[i];
      c.p[i] = 0;
    }
  }
  WindowSpec w = ForwardWindow(c);
  int counts = b.ReduceWindow(nn::Fill(b, 1, ct, region), b.Constant(0, ct), w, ReduceKind::kAdd);
  return b.BroadcastInDim(counts, dims, SpatialDims(q));
}

void AvgPoolInto(const char* op, const at::Tensor& self, const Pool& q, bool count_include_pad,
                 std::optional<int64_t> divisor_override, const at::Tensor& result) {
  Lowering l(op);
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
  AvgPoolInto("aten::avg_pool2d", self,
              MakePool(2, self, kernel, stride, padding, {}, result.sizes()), count_include_pad,
              divisor_override, result);
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

void AvgPoolBackwardInto(const char* op, const at::Tensor& grad_output, const Pool& q,
                         bool count_include_pad, std::optional<int64_t> divisor_override,
                         const at::Tensor& gi) {
  Lowering l(op);
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
  for (int i = 0; i < q.n; ++i) {
    int j = q.Dim(i);
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
  AvgPoolBackwardInto("aten::avg_pool2d_backward", grad_output,
                      MakePool(2, self, kernel, stride, padding, {}, grad_output.sizes()),
                      count_include_pad, divisor_override, gi);
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

// ---- 3-d ----------------------------------------------------------------------------------------
// max_pool3d has no structured meta function: its CPU template's argument checks and messages.
Pool MaxPool3dArgs(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                   at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode) {
  TORCH_CHECK(kernel.size() == 1 || kernel.size() == 3,
              "max_pool3d: kernel_size must either be a single int, or a tuple of three ints")
  TORCH_CHECK(stride.empty() || stride.size() == 1 || stride.size() == 3,
              "max_pool3d: stride must either be omitted, a single int, or a tuple of three ints")
  TORCH_CHECK(padding.size() == 1 || padding.size() == 3,
              "max_pool3d: padding must either be a single int, or a tuple of three ints");
  TORCH_CHECK(dilation.size() == 1 || dilation.size() == 3,
              "max_pool3d: dilation must be either a single int, or a tuple of three ints");
  TORCH_CHECK(self.dim() == 4 || self.dim() == 5,
              "non-empty 4D or 5D (batch mode) tensor expected for input");
  at::DimVector out_sizes(self.sizes());
  Pool q = MakePool(3, self, kernel, stride, padding, dilation, out_sizes);
  for (int i = 0; i < 3; ++i)
    q.out[i] = at::native::pooling_output_shape<int64_t>(q.in[i], q.k[i], q.p[i], q.s[i], q.d[i],
                                                         ceil_mode);
  return q;
}

void CheckPool3dShape(const at::Tensor& self, const Pool& q, const char* fn) {
  auto i = [](int64_t v) { return static_cast<int>(v); };
  at::native::pool3d_shape_check(self, self.size(-4), i(q.k[0]), i(q.k[1]), i(q.k[2]), i(q.s[0]),
                                 i(q.s[1]), i(q.s[2]), i(q.p[0]), i(q.p[1]), i(q.p[2]), i(q.d[0]),
                                 i(q.d[1]), i(q.d[2]), q.in[0], q.in[1], q.in[2], q.out[0],
                                 q.out[1], q.out[2], fn);
}

at::DimVector OutSizes(const at::Tensor& self, const Pool& q) {
  at::DimVector r(self.sizes());
  for (int i = 0; i < q.n; ++i) r[q.Dim(i)] = q.out[i];
  return r;
}

std::tuple<at::Tensor&, at::Tensor&> max_pool3d_with_indices_out(
    const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
    at::IntArrayRef dilation, bool ceil_mode, at::Tensor& out, at::Tensor& indices) {
  CheckSameDevice("max_pool3d_with_indices", {&self, &out, &indices});
  CheckPoolDtype("max_pool3d", self, true);
  Pool q = MaxPool3dArgs(self, kernel, stride, padding, dilation, ceil_mode);
  CheckPool3dShape(self, q, "max_pool3d_with_indices_out_cpu_template()");
  at::DimVector sizes = OutSizes(self, q);
  ResizeOut(out, sizes);
  ResizeOut(indices, sizes);
  if (out.numel() > 0) MaxPoolInto("aten::max_pool3d_with_indices", self, q, out, indices);
  return {out, indices};
}

std::tuple<at::Tensor, at::Tensor> max_pool3d_with_indices(
    const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
    at::IntArrayRef dilation, bool ceil_mode) {
  at::Tensor out = at::empty({0}, self.options());
  at::Tensor indices = at::empty({0}, self.options().dtype(at::kLong));
  max_pool3d_with_indices_out(self, kernel, stride, padding, dilation, ceil_mode, out, indices);
  return {out, indices};
}

at::Tensor& max_pool3d_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                    at::IntArrayRef kernel, at::IntArrayRef stride,
                                    at::IntArrayRef padding, at::IntArrayRef dilation,
                                    bool ceil_mode, const at::Tensor& indices,
                                    at::Tensor& grad_input) {
  CheckSameDevice("max_pool3d_with_indices_backward", {&grad_output, &self, &indices, &grad_input});
  CheckPoolDtype("max_pool3d_with_indices_backward", self, false);
  Pool q = MaxPool3dArgs(self, kernel, stride, padding, dilation, ceil_mode);
  for (int i = 0; i < 3; ++i) q.out[i] = grad_output.size(grad_output.dim() - 3 + i);
  auto i = [](int64_t v) { return static_cast<int>(v); };
  at::native::max_pool3d_backward_shape_check(
      self, grad_output, indices, self.size(-4), i(q.k[0]), i(q.k[1]), i(q.k[2]), i(q.s[0]),
      i(q.s[1]), i(q.s[2]), i(q.p[0]), i(q.p[1]), i(q.p[2]), i(q.d[0]), i(q.d[1]), i(q.d[2]),
      q.in[0], q.in[1], q.in[2], q.out[0], q.out[1], q.out[2],
      "max_pool3d_with_indices_backward_out_cpu_template()");
  ResizeOut(grad_input, self.sizes());
  if (grad_input.numel() > 0)
    MaxPoolBackwardInto("aten::max_pool3d_with_indices_backward", grad_output, self, indices, 3,
                        grad_input);
  return grad_input;
}

at::Tensor max_pool3d_backward(const at::Tensor& grad_output, const at::Tensor& self,
                               at::IntArrayRef kernel, at::IntArrayRef stride,
                               at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode,
                               const at::Tensor& indices) {
  at::Tensor gi = at::empty({0}, grad_output.options());
  return max_pool3d_backward_out(grad_output, self, kernel, stride, padding, dilation, ceil_mode,
                                 indices, gi);
}

// ATen's CPU kernels take float, double and int64 only (no bfloat16/half).
void CheckAvgPool3dDtype(const char* kernel, const at::Tensor& self) {
  at::ScalarType t = self.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(t == at::kFloat || t == at::kDouble || t == at::kLong, "\"", kernel,
                              "\" not implemented for '", t, "'");
}

at::Tensor AvgPool3d(const at::Tensor& out, const at::Tensor& self, at::IntArrayRef kernel,
                     at::IntArrayRef stride, at::IntArrayRef padding, bool ceil_mode,
                     bool count_include_pad, std::optional<int64_t> divisor_override) {
  CheckSameDevice("avg_pool3d", {&self, &out});
  CheckAvgPool3dDtype("avg_pool3d_out_frame", self);
  MetaOut<at::meta::structured_avg_pool3d> m(out);
  m.meta(self, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override);
  at::Tensor result = m.out();
  if (result.numel() == 0) return result;
  AvgPoolInto("aten::avg_pool3d", self,
              MakePool(3, self, kernel, stride, padding, {}, result.sizes()), count_include_pad,
              divisor_override, result);
  return result;
}

at::Tensor AvgPool3dBackward(const at::Tensor& grad_input, const at::Tensor& grad_output,
                             const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                             at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                             std::optional<int64_t> divisor_override) {
  CheckSameDevice("avg_pool3d_backward", {&grad_output, &self, &grad_input});
  CheckAvgPool3dDtype("avg_pool3d_backward_out_frame", self);
  MetaOut<at::meta::structured_avg_pool3d_backward> m(grad_input);
  m.meta(grad_output, self, kernel, stride, padding, ceil_mode, count_include_pad,
         divisor_override);
  at::Tensor gi = m.out();
  if (gi.numel() == 0) return gi;
  AvgPoolBackwardInto("aten::avg_pool3d_backward", grad_output,
                      MakePool(3, self, kernel, stride, padding, {}, grad_output.sizes()),
                      count_include_pad, divisor_override, gi);
  return gi;
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
  m.impl("max_pool3d_with_indices", max_pool3d_with_indices);
  m.impl("max_pool3d_with_indices.out", max_pool3d_with_indices_out);
  m.impl("max_pool3d_with_indices_backward", max_pool3d_backward);
  m.impl("max_pool3d_with_indices_backward.grad_input", max_pool3d_backward_out);
  m.impl("avg_pool3d", Forms<AvgPool3d>::Functional);
  m.impl("avg_pool3d.out", Forms<AvgPool3d>::Out);
  m.impl("avg_pool3d_backward", Forms<AvgPool3dBackward>::Functional);
  m.impl("avg_pool3d_backward.grad_input", Forms<AvgPool3dBackward>::Out);
}

}  // namespace tpu::torch_bridge
