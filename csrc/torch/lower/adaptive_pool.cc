// Adaptive 2-d average pooling: _adaptive_avg_pool2d and its backward (adaptive_avg_pool2d to
// 1x1 is a mean in ATen itself). Output cell o of a dim of size n pooled to m covers input
// [floor(o n / m), ceil((o + 1) n / m)).
//   forward: when m divides n the windows are uniform: reduce_window(add); otherwise a sum of
//     k_max gathers per dim (the j-th element of every window, masked where a window is shorter).
//   backward: the cells covering input i are [floor(i m / n), ceil((i + 1) m / n)), the same
//     formula with n and m swapped, so the adjoint is the same windowed sum of grad / count.
// Averages divide by the window's height, then its width, as PyTorch's CPU kernel does.
//
// Adaptive 2-d max pooling: adaptive_max_pool2d (values and flat h * W + w indices) and its
// backward (max pooling's scatter-add). The maximum over each window is a running select over
// k_max gathers per dim, first along H, then along W (see Beats for why that order is free).
#include <ATen/ops/adaptive_max_pool2d_backward_meta.h>
#include <ATen/ops/adaptive_max_pool2d_meta.h>
#include <torch/library.h>

#include <algorithm>

#include "torch/lower/nn_util.h"
#include "torch/lower/structured.h"

namespace tpu::torch_bridge {
namespace {

// Window starts and sizes along one dim (i64 [out]), computed in the program from iotas.
struct Windows {
  int start, size;
  int64_t kmax;
};

Windows MakeWindows(Builder& b, int64_t in, int64_t out) {
  Dims d{out};
  auto c = [&](int64_t v) { return nn::Fill(b, static_cast<double>(v), DType::kI64, d); };
  int o = b.Iota(TensorType{DType::kI64, d}, 0);
  int start = b.Binary(OpCode::kDivide, b.Binary(OpCode::kMultiply, o, c(in)), c(out));
  int end_num = b.Binary(OpCode::kMultiply, b.Binary(OpCode::kAdd, o, c(1)), c(in));
  int end = b.Binary(OpCode::kDivide, b.Binary(OpCode::kAdd, end_num, c(out - 1)), c(out));
  int64_t kmax = 0;
  for (int64_t i = 0; i < out; ++i)
    kmax = std::max(kmax, ((i + 1) * in + out - 1) / out - i * in / out);
  return {start, b.Binary(OpCode::kSubtract, end, start), kmax};
}

// x[pos[o]] along `dim` for each output cell o (pos: i64 [out]).
int GatherAlong(Builder& b, int x, int dim, int pos) {
  const Dims xd = b.TypeOf(x).dims;
  const int64_t out = b.TypeOf(pos).dims[0];
  Dims offset_dims, slice = xd;
  for (int i = 0; i < static_cast<int>(xd.size()); ++i)
    if (i != dim) offset_dims.push_back(i);
  slice[dim] = 1;
  return b.Gather(x, b.Reshape(pos, {out, 1}), offset_dims, {dim}, {dim}, slice,
                  /*checked=*/false);
}

// The position of the j-th element of every window (clamped: past a short window's end it is
// masked by the caller).
int WindowPos(Builder& b, const Windows& w, int64_t j, int64_t in, int64_t out) {
  Dims od{out};
  return b.Binary(OpCode::kMinimum,
                  b.Binary(OpCode::kAdd, w.start, nn::Fill(b, j, DType::kI64, od)),
                  nn::Fill(b, in - 1, DType::kI64, od));
}

// Whether window element j is inside each window, broadcast to `rd` along `dim`.
int InWindow(Builder& b, const Windows& w, int64_t j, int64_t out, const Dims& rd, int dim) {
  Dims od{out};
  return b.BroadcastInDim(b.Compare(CompareDirection::kLT, nn::Fill(b, j, DType::kI64, od), w.size),
                          rd, {dim});
}

// Sum over the adaptive windows of dim `dim` (size `in` -> `out`).
int WindowSum(Builder& b, int x, int dim, int64_t in, int64_t out) {
  const Dims xd = b.TypeOf(x).dims;
  const DType t = b.TypeOf(x).dtype;
  Windows w = MakeWindows(b, in, out);
  Dims rd = xd;
  rd[dim] = out;
  int acc = -1;
  for (int64_t j = 0; j < w.kmax; ++j) {
    int pos = WindowPos(b, w, j, in, out);
    int g = GatherAlong(b, x, dim, pos);
    if (j == 0) {  // every window has at least one element
      acc = g;
      continue;
    }
    int valid = InWindow(b, w, j, out, rd, dim);
    acc = b.Binary(OpCode::kAdd, acc, b.Select(valid, g, nn::Fill(b, 0, t, rd)));
  }
  return acc;
}

// x / (window height) / (window width), the counts of the (in -> out) windows of the last dims.
int DivideByCounts(Builder& b, int x, int64_t in_h, int64_t in_w) {
  const Dims xd = b.TypeOf(x).dims;
  const DType t = b.TypeOf(x).dtype;
  int rank = static_cast<int>(xd.size());
  int64_t out_h = xd[rank - 2], out_w = xd[rank - 1];
  int hs = b.Convert(MakeWindows(b, in_h, out_h).size, t);
  int ws = b.Convert(MakeWindows(b, in_w, out_w).size, t);
  x = b.Binary(OpCode::kDivide, x, b.BroadcastInDim(hs, xd, {rank - 2}));
  return b.Binary(OpCode::kDivide, x, b.BroadcastInDim(ws, xd, {rank - 1}));
}

void CheckInput(const char* name, const at::Tensor& t) {
  int64_t ndim = t.dim();
  TORCH_CHECK(ndim == 3 || ndim == 4, name, "(): Expected 3D or 4D tensor, but got ", t.sizes());
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(t.scalar_type()),
                              "\"adaptive_avg_pool2d\" not implemented for '", t.scalar_type(),
                              "'");
}

at::Tensor adaptive_avg_pool2d(const at::Tensor& self, at::IntArrayRef output_size) {
  TORCH_CHECK(output_size.size() == 2, "adaptive_avg_pool2d: output_size must be 2");
  TORCH_CHECK(output_size[0] >= 0 && output_size[1] >= 0,
              "adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0 ",
              "but received {", output_size[0], ", ", output_size[1], "}");
  CheckInput("adaptive_avg_pool2d", self);
  int64_t ndim = self.dim();
  for (int64_t i : {ndim - 2, ndim - 1})
    TORCH_CHECK(self.size(i) > 0,
                "adaptive_avg_pool2d(): Expected input to have non-zero size for non-batch "
                "dimensions, but input has sizes ",
                self.sizes(), " with dimension ", i, " being empty");
  std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end() - 2);
  sizes.push_back(output_size[0]);
  sizes.push_back(output_size[1]);
  at::Tensor out = EmptyLike(sizes, self.scalar_type(), self);
  if (out.numel() == 0) return out;
  int64_t h = self.size(-2), w = self.size(-1), oh = output_size[0], ow = output_size[1];
  int r = static_cast<int>(ndim);
  Lowering l("aten::_adaptive_avg_pool2d");
  Builder& b = l.b();
  at::ScalarType ct = OpMath(self.scalar_type());
  int x = l.Input(self, ct);
  int sum;
  if (h % oh == 0 && w % ow == 0) {
    WindowSpec win = WindowSpec::Of(Dims(static_cast<size_t>(r), int64_t{1}));
    win.dimensions[r - 2] = win.strides[r - 2] = h / oh;
    win.dimensions[r - 1] = win.strides[r - 1] = w / ow;
    sum = b.ReduceWindow(x, b.Constant(0, ToDType(ct)), win, ReduceKind::kAdd);
  } else {
    sum = WindowSum(b, WindowSum(b, x, r - 2, h, oh), r - 1, w, ow);
  }
  l.Output(DivideByCounts(b, sum, h, w), out);
  l.Run();
  return out;
}

at::Tensor adaptive_avg_pool2d_backward(const at::Tensor& grad_output, const at::Tensor& self) {
  CheckSameDevice("adaptive_avg_pool2d_backward", {&grad_output, &self});
  CheckInput("adaptive_avg_pool2d_backward", self);
  int64_t ndim = grad_output.dim();
  TORCH_CHECK(ndim == self.dim(),
              "adaptive_avg_pool2d_backward(): Expected 3D or 4D tensor, but got ",
              grad_output.sizes());
  for (int64_t i = 1; i < ndim; ++i)
    TORCH_CHECK(grad_output.size(i) > 0,
                "adaptive_avg_pool2d_backward(): Expected grad_output to have non-zero size for "
                "non-batch dimensions, but grad_output has sizes ",
                grad_output.sizes(), " with dimension ", i, " being empty");
  TORCH_CHECK(self.scalar_type() == grad_output.scalar_type(), "expected dtype ", self.dtype(),
              " for `grad_output` but got dtype ", grad_output.dtype());
  at::Tensor gi = EmptyLike(self.sizes(), self.scalar_type(), self);
  if (gi.numel() == 0) return gi;
  int64_t h = self.size(-2), w = self.size(-1), oh = grad_output.size(-2),
          ow = grad_output.size(-1);
  int r = static_cast<int>(ndim);
  Lowering l("aten::_adaptive_avg_pool2d_backward");
  Builder& b = l.b();
  int g = DivideByCounts(b, l.Input(grad_output, OpMath(grad_output.scalar_type())), h, w);
  l.Output(WindowSum(b, WindowSum(b, g, r - 2, oh, h), r - 1, ow, w), gi);
  l.Run();
  return gi;
}

// ---- adaptive max pooling -----------------------------------------------------------------------
// Whether candidate (v, flat index i) beats the current best (cur, ci). PyTorch's CPU scan takes
// a larger value or any NaN: the first of equal values and the last NaN win. As an order on
// (value, index) that does not depend on the scan order, so H and W can be reduced in turn.
int Beats(Builder& b, int v, int i, int cur, int ci) {
  auto cmp = [&](CompareDirection d, int x, int y) { return b.Compare(d, x, y); };
  auto bin = [&](OpCode op, int x, int y) { return b.Binary(op, x, y); };
  int v_nan = cmp(CompareDirection::kNE, v, v), cur_nan = cmp(CompareDirection::kNE, cur, cur);
  int later = cmp(CompareDirection::kGT, i, ci);
  int nan_wins = bin(OpCode::kAnd, v_nan, bin(OpCode::kOr, b.Unary(OpCode::kNot, cur_nan), later));
  int larger =
      bin(OpCode::kOr, cmp(CompareDirection::kGT, v, cur),
          bin(OpCode::kAnd, cmp(CompareDirection::kEQ, v, cur), cmp(CompareDirection::kLT, i, ci)));
  return bin(OpCode::kOr, nan_wins, bin(OpCode::kAnd, b.Unary(OpCode::kNot, cur_nan), larger));
}

// The best (value, index) over the adaptive windows of `dim` (size `in` -> `out`).
void ArgMaxAlong(Builder& b, int& val, int& idx, int dim, int64_t in, int64_t out) {
  Windows w = MakeWindows(b, in, out);
  Dims rd = b.TypeOf(val).dims;
  rd[dim] = out;
  int best_v = -1, best_i = -1;
  for (int64_t j = 0; j < w.kmax; ++j) {
    int pos = WindowPos(b, w, j, in, out);
    int v = GatherAlong(b, val, dim, pos), i = GatherAlong(b, idx, dim, pos);
    if (j == 0) {
      best_v = v;
      best_i = i;
      continue;
    }
    int take =
        b.Binary(OpCode::kAnd, InWindow(b, w, j, out, rd, dim), Beats(b, v, i, best_v, best_i));
    best_v = b.Select(take, v, best_v);
    best_i = b.Select(take, i, best_i);
  }
  val = best_v;
  idx = best_i;
}

std::tuple<at::Tensor&, at::Tensor&> AdaptiveMaxPool2d(const at::Tensor& self,
                                                       at::IntArrayRef output_size, at::Tensor& out,
                                                       at::Tensor& indices) {
  CheckSameDevice("adaptive_max_pool2d", {&self, &out, &indices});
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()),
                              "\"adaptive_max_pool2d\" not implemented for '", self.scalar_type(),
                              "'");
  MetaOut2<at::meta::structured_adaptive_max_pool2d> m(out, indices);
  m.meta(self, output_size);
  out = m.out(0);
  indices = m.out(1);
  if (out.numel() == 0) return {out, indices};
  const int r = static_cast<int>(self.dim());
  const int64_t h = self.size(-2), w = self.size(-1);
  Lowering l("aten::adaptive_max_pool2d");
  Builder& b = l.b();
  int val = l.Input(self);
  TensorType plane{DType::kI64, {h, w}};
  int flat = b.Binary(
      OpCode::kAdd,
      b.Binary(OpCode::kMultiply, b.Iota(plane, 0), nn::Fill(b, w, DType::kI64, plane.dims)),
      b.Iota(plane, 1));
  int idx = b.BroadcastInDim(flat, ToDims(self.sizes()), {r - 2, r - 1});
  ArgMaxAlong(b, val, idx, r - 2, h, output_size[0]);
  ArgMaxAlong(b, val, idx, r - 1, w, output_size[1]);
  l.Output(val, out);
  l.Output(idx, indices);
  l.Run();
  return {out, indices};
}

std::tuple<at::Tensor&, at::Tensor&> adaptive_max_pool2d_out(const at::Tensor& self,
                                                             at::IntArrayRef output_size,
                                                             at::Tensor& out, at::Tensor& indices) {
  return AdaptiveMaxPool2d(self, output_size, out, indices);
}

std::tuple<at::Tensor, at::Tensor> adaptive_max_pool2d(const at::Tensor& self,
                                                       at::IntArrayRef output_size) {
  at::Tensor out, indices;
  AdaptiveMaxPool2d(self, output_size, out, indices);
  return {out, indices};
}

at::Tensor AdaptiveMaxPool2dBackward(const at::Tensor& grad_output, const at::Tensor& self,
                                     const at::Tensor& indices, const at::Tensor& grad_input) {
  CheckSameDevice("adaptive_max_pool2d_backward", {&grad_output, &self, &indices, &grad_input});
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()),
                              "\"adaptive_max_pool2d_backward\" not implemented for '",
                              self.scalar_type(), "'");
  MetaOut<at::meta::structured_adaptive_max_pool2d_backward> m(grad_input);
  m.meta(grad_output, self, indices);
  at::Tensor gi = m.out();
  if (gi.numel() > 0)
    MaxPoolBackwardInto("aten::adaptive_max_pool2d_backward", grad_output, self, indices, 2, gi);
  return gi;
}

at::Tensor adaptive_max_pool2d_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                        const at::Tensor& indices) {
  return AdaptiveMaxPool2dBackward(grad_output, self, indices, at::Tensor());
}

at::Tensor& adaptive_max_pool2d_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                             const at::Tensor& indices, at::Tensor& grad_input) {
  AdaptiveMaxPool2dBackward(grad_output, self, indices, grad_input);
  return grad_input;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("adaptive_max_pool2d", adaptive_max_pool2d);
  m.impl("adaptive_max_pool2d.out", adaptive_max_pool2d_out);
  m.impl("adaptive_max_pool2d_backward", adaptive_max_pool2d_backward);
  m.impl("adaptive_max_pool2d_backward.grad_input", adaptive_max_pool2d_backward_out);
  m.impl("_adaptive_avg_pool2d", adaptive_avg_pool2d);
  m.impl("_adaptive_avg_pool2d_backward", adaptive_avg_pool2d_backward);
}

}  // namespace tpu::torch_bridge
