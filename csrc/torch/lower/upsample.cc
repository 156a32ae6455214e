// Upsampling, separable per spatial dim: the N-d lowerings (upsample.h) and the 2-d ops,
// upsample_nearest2d and upsample_bilinear2d with their backward ops (1-d and 3-d in
// upsample_nd.cc). Source indices and weights are computed in the program from iotas with
// PyTorch's CPU formulas in float32 (so they round alike), the scale a runtime parameter:
//   nearest:  src = min(floor(dst * scale), in - 1)  (exactly dst and dst / 2 when out is in, 2 in)
//   bilinear: src = scale * (dst + 0.5) - 0.5 clamped at 0 (or scale * dst with align_corners),
//             i0 = min(floor(src), in - 1), i1 = i0 + (i0 < in - 1), l1 = clamp(src - i0, 0, 1)
// The forward gathers rows then columns; the backward scatter-adds the weighted gradient along
// the same indices (columns, then rows). ATen's meta functions check arguments and size results.
#include "torch/lower/upsample.h"

#include <ATen/ops/upsample_bilinear2d_backward_meta.h>
#include <ATen/ops/upsample_bilinear2d_meta.h>
#include <ATen/ops/upsample_nearest2d_backward_meta.h>
#include <ATen/ops/upsample_nearest2d_meta.h>
#include <torch/library.h>

#include "torch/lower/nn_util.h"
#include "torch/lower/structured.h"

namespace tpu::torch_bridge {
namespace {

// PyTorch's compute_scales_value<T>: 1 / scale when given, else in / out, in T.
template <typename T>
T ScaleValue(std::optional<double> scale, int64_t in, int64_t out) {
  return scale.has_value() && *scale > 0 ? static_cast<T>(1.0 / *scale)
                                         : static_cast<T>(in) / static_cast<T>(out);
}

// One dim's sampling: indices (i64 [out]) and, for bilinear, weights (f32 [out]).
struct Taps {
  int i0 = -1, i1 = -1, l0 = -1, l1 = -1;
};

int I64(Builder& b, int64_t v, int64_t n) {
  return nn::Fill(b, static_cast<double>(v), DType::kI64, {n});
}

Taps NearestTaps(Lowering& l, int64_t in, int64_t out, std::optional<double> scale) {
  Builder& b = l.b();
  int dst = b.Iota(TensorType{DType::kI64, {out}}, 0);
  Taps t;
  if (out == in) {
    t.i0 = dst;
  } else {  // (doubling is NearestDim's broadcast)
    int s = nn::Splat(l, ScaleValue<float>(scale, in, out), DType::kF32, {out});
    int src = b.Unary(OpCode::kFloor, b.Binary(OpCode::kMultiply, b.Convert(dst, DType::kF32), s));
    t.i0 = b.Binary(OpCode::kMinimum, b.Convert(src, DType::kI64), I64(b, in - 1, out));
  }
  return t;
}

// Weights in `t` (float32, or float64 for a float64 input: CPU's opmath type).
Taps LinearTaps(Lowering& l, int64_t in, int64_t out, bool align_corners,
                std::optional<double> scale, DType ft) {
  Builder& b = l.b();
  auto F32 = [&](double v, int64_t n) { return nn::Fill(b, v, ft, {n}); };
  int dst = b.Iota(TensorType{DType::kI64, {out}}, 0);
  Taps t;
  if (out == in) {  // a copy
    t.i0 = t.i1 = dst;
    t.l0 = F32(1, out);
    t.l1 = F32(0, out);
    return t;
  }
  double ratio;
  if (ft == DType::kF64)
    ratio = align_corners ? (out > 1 ? static_cast<double>(in - 1) / (out - 1) : 0.0)
                          : ScaleValue<double>(scale, in, out);
  else
    ratio = align_corners
                ? (out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.f)
                : ScaleValue<float>(scale, in, out);
  int r = nn::Splat(l, ratio, ft, {out});
  int d = b.Convert(dst, ft);
  int src;
  if (align_corners) {
    src = b.Binary(OpCode::kMultiply, r, d);
  } else {
    src = b.Binary(OpCode::kSubtract,
                   b.Binary(OpCode::kMultiply, r, b.Binary(OpCode::kAdd, d, F32(0.5, out))),
                   F32(0.5, out));
    src = b.Binary(OpCode::kMaximum, src, F32(0, out));
  }
  t.i0 = b.Binary(OpCode::kMinimum, b.Convert(b.Unary(OpCode::kFloor, src), DType::kI64),
                  I64(b, in - 1, out));
  int inner = b.Compare(CompareDirection::kLT, t.i0, I64(b, in - 1, out));
  t.i1 = b.Binary(OpCode::kAdd, t.i0, b.Select(inner, I64(b, 1, out), I64(b, 0, out)));
  t.l1 = b.Clamp(F32(0, out), b.Binary(OpCode::kSubtract, src, b.Convert(t.i0, ft)), F32(1, out));
  t.l0 = b.Binary(OpCode::kSubtract, F32(1, out), t.l1);
  return t;
}

Dims AllBut(int rank, int dim) {
  Dims d;
  for (int i = 0; i < rank; ++i)
    if (i != dim) d.push_back(i);
  return d;
}

// x[..., idx[j], ...] along `dim`.
int Take(Builder& b, int x, int dim, int idx) {
  Dims slice = b.TypeOf(x).dims;
  int rank = static_cast<int>(slice.size());
  slice[dim] = 1;
  int64_t n = b.TypeOf(idx).dims[0];
  return b.Gather(x, b.Reshape(idx, {n, 1}), AllBut(rank, dim), {dim}, {dim}, slice,
                  /*checked=*/false);
}

// The adjoint of Take: g scatter-added into zeros of size `size` along `dim`.
int Put(Builder& b, int g, int dim, int idx, int64_t size) {
  Dims dims = b.TypeOf(g).dims;
  int rank = static_cast<int>(dims.size());
  int64_t n = dims[dim];
  dims[dim] = size;
  int zeros = nn::Fill(b, 0, b.TypeOf(g).dtype, dims);
  return b.Scatter(zeros, b.Reshape(idx, {n, 1}), g, AllBut(rank, dim), {dim}, {dim},
                   ReduceKind::kAdd,
                   /*checked=*/false);
}

// Nearest along one dim. Doubling (dst / 2, exact in PyTorch too) repeats each row twice with a
// broadcast; other sizes gather.
int NearestDim(Lowering& l, int x, int dim, int64_t in, int64_t out, std::optional<double> scale) {
  Builder& b = l.b();
  if (out != 2 * in) return Take(b, x, dim, NearestTaps(l, in, out, scale).i0);
  const Dims dims = b.TypeOf(x).dims;
  Dims split = dims;
  split.insert(split.begin() + dim + 1, 1);
  Dims pairs = split;
  pairs[dim + 1] = 2;
  Dims doubled = dims;
  doubled[dim] *= 2;
  int r = b.Reshape(x, split);
  return b.Reshape(b.BroadcastInDim(r, pairs, nn::Range(0, pairs.size())), doubled);
}

// The adjoint: doubling sums row pairs (reduce_window, in CPU's accumulation order); other sizes
// scatter-add.
int NearestDimBackward(Lowering& l, int g, int dim, int64_t in, int64_t out,
                       std::optional<double> scale) {
  Builder& b = l.b();
  if (out != 2 * in) return Put(b, g, dim, NearestTaps(l, in, out, scale).i0, in);
  WindowSpec w = WindowSpec::Of(Dims(b.TypeOf(g).dims.size(), int64_t{1}));
  w.dimensions[dim] = w.strides[dim] = 2;
  return b.ReduceWindow(g, b.Constant(0, b.TypeOf(g).dtype), w, ReduceKind::kAdd);
}

// A per-position weight along `dim`, broadcast to x's shape and converted to its dtype.
int Weighted(Builder& b, int x, int w, int dim) {
  const TensorType t = b.TypeOf(x);
  return b.Binary(OpCode::kMultiply, x,
                  b.BroadcastInDim(b.ConvertIfNeeded(w, t.dtype), t.dims, {dim}));
}

// Bilinear along one dim: l0 * x[i0] + l1 * x[i1].
int LerpDim(Builder& b, int x, int dim, const Taps& t) {
  return b.Binary(OpCode::kAdd, Weighted(b, Take(b, x, dim, t.i0), t.l0, dim),
                  Weighted(b, Take(b, x, dim, t.i1), t.l1, dim));
}

int LerpDimBackward(Builder& b, int g, int dim, const Taps& t, int64_t size) {
  return b.Binary(OpCode::kAdd, Put(b, Weighted(b, g, t.l0, dim), dim, t.i0, size),
                  Put(b, Weighted(b, g, t.l1, dim), dim, t.i1, size));
}

}  // namespace

// The spatial dims are the last scales.size() dims; the backward runs them in reverse order.
void UpsampleNearestInto(const char* op, const at::Tensor& self, at::IntArrayRef output_size,
                         const UpsampleScales& scales, const at::Tensor& result) {
  Lowering l(op);
  const int n = static_cast<int>(scales.size()), first = static_cast<int>(self.dim()) - n;
  int x = l.Input(self);
  for (int i = 0; i < n; ++i)
    x = NearestDim(l, x, first + i, self.size(first + i), output_size[i], scales[i]);
  l.Output(x, result);
  l.Run();
}

void UpsampleNearestBackwardInto(const char* op, const at::Tensor& grad,
                                 at::IntArrayRef output_size, at::IntArrayRef input_size,
                                 const UpsampleScales& scales, const at::Tensor& result) {
  Lowering l(op);
  Builder& b = l.b();
  const int n = static_cast<int>(scales.size()), first = static_cast<int>(input_size.size()) - n;
  int g = l.Input(grad, OpMath(grad.scalar_type()));
  bool all_doubled = true;
  for (int i = 0; i < n; ++i) all_doubled &= output_size[i] == 2 * input_size[first + i];
  if (all_doubled) {
    // Every dim doubled: one reduce_window over the 2x2 (2x2x2) blocks, each folded in row-major
    // order from 0 -- CPU's order, which adds an input element's gradients as it walks the output
    // -- in one pass where a window per dim took a pass each.
    WindowSpec w = WindowSpec::Of(Dims(b.TypeOf(g).dims.size(), int64_t{1}));
    for (int i = 0; i < n; ++i) w.dimensions[first + i] = w.strides[first + i] = 2;
    g = b.ReduceWindow(g, b.Constant(0, b.TypeOf(g).dtype), w, ReduceKind::kAdd);
  } else {
    for (int i = n - 1; i >= 0; --i)
      g = NearestDimBackward(l, g, first + i, input_size[first + i], output_size[i], scales[i]);
  }
  l.Output(g, result);
  l.Run();
}

void UpsampleLinearInto(const char* op, const at::Tensor& self, at::IntArrayRef output_size,
                        bool align_corners, const UpsampleScales& scales,
                        const at::Tensor& result) {
  Lowering l(op);
  Builder& b = l.b();
  const int n = static_cast<int>(scales.size()), first = static_cast<int>(self.dim()) - n;
  const at::ScalarType ct = OpMath(self.scalar_type());
  int x = l.Input(self, ct);
  for (int i = 0; i < n; ++i) {
    int64_t in = self.size(first + i);
    x = LerpDim(b, x, first + i,
                LinearTaps(l, in, output_size[i], align_corners, scales[i], ToDType(ct)));
  }
  l.Output(x, result);
  l.Run();
}

void UpsampleLinearBackwardInto(const char* op, const at::Tensor& grad, at::IntArrayRef output_size,
                                at::IntArrayRef input_size, bool align_corners,
                                const UpsampleScales& scales, const at::Tensor& result) {
  Lowering l(op);
  Builder& b = l.b();
  const int n = static_cast<int>(scales.size()), first = static_cast<int>(input_size.size()) - n;
  const at::ScalarType ct = OpMath(grad.scalar_type());
  int g = l.Input(grad, ct);
  for (int i = n - 1; i >= 0; --i) {
    int64_t in = input_size[first + i];
    g = LerpDimBackward(b, g, first + i,
                        LinearTaps(l, in, output_size[i], align_corners, scales[i], ToDType(ct)),
                        in);
  }
  l.Output(g, result);
  l.Run();
}

namespace {

at::Tensor Nearest(const at::Tensor& self, at::IntArrayRef output_size, std::optional<double> sh,
                   std::optional<double> sw, const at::Tensor& out) {
  CheckSameDevice("upsample_nearest2d", {&self, &out});
  TORCH_CHECK_NOT_IMPLEMENTED(
      at::isFloatingType(self.scalar_type()) || self.scalar_type() == at::kByte,
      "\"upsample_nearest2d_channels_last\" not implemented for '", self.scalar_type(), "'");
  MetaOut<at::meta::structured_upsample_nearest2d> m(out);
  m.meta(self, output_size, sh, sw);
  at::Tensor result = m.out();
  if (result.numel() > 0)
    UpsampleNearestInto("aten::upsample_nearest2d", self, output_size, {sh, sw}, result);
  return result;
}

at::Tensor NearestBackward(const at::Tensor& grad, at::IntArrayRef output_size,
                           at::IntArrayRef input_size, std::optional<double> sh,
                           std::optional<double> sw, const at::Tensor& grad_input) {
  CheckSameDevice("upsample_nearest2d_backward", {&grad, &grad_input});
  MetaOut<at::meta::structured_upsample_nearest2d_backward> m(grad_input);
  m.meta(grad, output_size, input_size, sh, sw);
  at::Tensor result = m.out();
  if (result.numel() > 0)
    UpsampleNearestBackwardInto("aten::upsample_nearest2d_backward", grad, output_size, input_size,
                                {sh, sw}, result);
  return result;
}

at::Tensor Bilinear(const at::Tensor& self, at::IntArrayRef output_size, bool align_corners,
                    std::optional<double> sh, std::optional<double> sw, const at::Tensor& out) {
  CheckSameDevice("upsample_bilinear2d", {&self, &out});
  // CPU's uint8 kernel rounds through fixed-point weights, which this lowering does not mirror.
  TORCH_CHECK_NOT_IMPLEMENTED(
      self.scalar_type() != at::kByte,
      "upsample_bilinear2d: uint8 input is not supported on the tpu device");
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()),
                              "\"upsample_bilinear2d_channels_last\" not implemented for '",
                              self.scalar_type(), "'");
  MetaOut<at::meta::structured_upsample_bilinear2d> m(out);
  m.meta(self, output_size, align_corners, sh, sw);
  at::Tensor result = m.out();
  if (result.numel() > 0)
    UpsampleLinearInto("aten::upsample_bilinear2d", self, output_size, align_corners, {sh, sw},
                       result);
  return result;
}

at::Tensor BilinearBackward(const at::Tensor& grad, at::IntArrayRef output_size,
                            at::IntArrayRef input_size, bool align_corners,
                            std::optional<double> sh, std::optional<double> sw,
                            const at::Tensor& grad_input) {
  CheckSameDevice("upsample_bilinear2d_backward", {&grad, &grad_input});
  MetaOut<at::meta::structured_upsample_bilinear2d_backward> m(grad_input);
  m.meta(grad, output_size, input_size, align_corners, sh, sw);
  at::Tensor result = m.out();
  if (result.numel() > 0)
    UpsampleLinearBackwardInto("aten::upsample_bilinear2d_backward", grad, output_size, input_size,
                               align_corners, {sh, sw}, result);
  return result;
}

at::Tensor upsample_nearest2d(const at::Tensor& self, at::IntArrayRef output_size,
                              std::optional<double> sh, std::optional<double> sw) {
  return Nearest(self, output_size, sh, sw, at::Tensor());
}
at::Tensor& upsample_nearest2d_out(const at::Tensor& self, at::IntArrayRef output_size,
                                   std::optional<double> sh, std::optional<double> sw,
                                   at::Tensor& out) {
  Nearest(self, output_size, sh, sw, out);
  return out;
}
at::Tensor upsample_nearest2d_backward(const at::Tensor& grad, at::IntArrayRef output_size,
                                       at::IntArrayRef input_size, std::optional<double> sh,
                                       std::optional<double> sw) {
  return NearestBackward(grad, output_size, input_size, sh, sw, at::Tensor());
}
at::Tensor& upsample_nearest2d_backward_out(const at::Tensor& grad, at::IntArrayRef output_size,
                                            at::IntArrayRef input_size, std::optional<double> sh,
                                            std::optional<double> sw, at::Tensor& grad_input) {
  NearestBackward(grad, output_size, input_size, sh, sw, grad_input);
  return grad_input;
}
at::Tensor upsample_bilinear2d(const at::Tensor& self, at::IntArrayRef output_size,
                               bool align_corners, std::optional<double> sh,
                               std::optional<double> sw) {
  return Bilinear(self, output_size, align_corners, sh, sw, at::Tensor());
}
at::Tensor& upsample_bilinear2d_out(const at::Tensor& self, at::IntArrayRef output_size,
                                    bool align_corners, std::optional<double> sh,
                                    std::optional<double> sw, at::Tensor& out) {
  Bilinear(self, output_size, align_corners, sh, sw, out);
  return out;
}
at::Tensor upsample_bilinear2d_backward(const at::Tensor& grad, at::IntArrayRef output_size,
                                        at::IntArrayRef input_size, bool align_corners,
                                        std::optional<double> sh, std::optional<double> sw) {
  return BilinearBackward(grad, output_size, input_size, align_corners, sh, sw, at::Tensor());
}
at::Tensor& upsample_bilinear2d_backward_out(const at::Tensor& grad, at::IntArrayRef output_size,
                                             at::IntArrayRef input_size, bool align_corners,
                                             std::optional<double> sh, std::optional<double> sw,
                                             at::Tensor& grad_input) {
  BilinearBackward(grad, output_size, input_size, align_corners, sh, sw, grad_input);
  return grad_input;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("upsample_nearest2d", upsample_nearest2d);
  m.impl("upsample_nearest2d.out", upsample_nearest2d_out);
  m.impl("upsample_nearest2d_backward", upsample_nearest2d_backward);
  m.impl("upsample_nearest2d_backward.grad_input", upsample_nearest2d_backward_out);
  m.impl("upsample_bilinear2d", upsample_bilinear2d);
  m.impl("upsample_bilinear2d.out", upsample_bilinear2d_out);
  m.impl("upsample_bilinear2d_backward", upsample_bilinear2d_backward);
  m.impl("upsample_bilinear2d_backward.grad_input", upsample_bilinear2d_backward_out);
}

}  // namespace tpu::torch_bridge
