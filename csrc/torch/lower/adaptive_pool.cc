// Adaptive 2-d average pooling: _adaptive_avg_pool2d and its backward (adaptive_avg_pool2d to
// 1x1 is a mean in ATen itself). Output cell o of a dim of size n pooled to m covers input
// [floor(o n / m), ceil((o + 1) n / m)).
//   forward: when m divides n the windows are uniform: reduce_window(add); otherwise a sum of
//     k_max gathers per dim (the j-th element of every window, masked where a window is shorter).
//   backward: the cells covering input i are [floor(i m / n), ceil((i + 1) m / n)), the same
//     formula with n and m swapped, so the adjoint is the same windowed sum of grad / count.
// Averages divide by the window's height, then its width, as PyTorch's CPU kernel does.
#include <torch/library.h>

#include <algorithm>

#include "torch/lower/nn_util.h"

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

// Sum over the adaptive windows of dim `dim` (size `in` -> `out`).
int WindowSum(Builder& b, int x, int dim, int64_t in, int64_t out) {
  const Dims xd = b.TypeOf(x).dims;
  const DType t = b.TypeOf(x).dtype;
  int rank = static_cast<int>(xd.size());
  Windows w = MakeWindows(b, in, out);
  Dims offset_dims, slice = xd;
  for (int i = 0; i < rank; ++i)
    if (i != dim) offset_dims.push_back(i);
  slice[dim] = 1;
  Dims rd = xd;
  rd[dim] = out;
  Dims od{out};
  int acc = -1;
  for (int64_t j = 0; j < w.kmax; ++j) {
    int pos =
        b.Binary(OpCode::kMinimum, b.Binary(OpCode::kAdd, w.start, nn::Fill(b, j, DType::kI64, od)),
                 nn::Fill(b, in - 1, DType::kI64, od));
    int g =
        b.Gather(x, b.Reshape(pos, {out, 1}), offset_dims, {dim}, {dim}, slice, /*checked=*/false);
    if (j == 0) {  // every window has at least one element
      acc = g;
      continue;
    }
    int valid = b.BroadcastInDim(
        b.Compare(CompareDirection::kLT, nn::Fill(b, j, DType::kI64, od), w.size), rd, {dim});
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

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_adaptive_avg_pool2d", adaptive_avg_pool2d);
  m.impl("_adaptive_avg_pool2d_backward", adaptive_avg_pool2d_backward);
}

}  // namespace tpu::torch_bridge
