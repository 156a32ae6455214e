// Reflection and replication padding (1d/2d/3d) and their backwards. Each padded dim is a gather
// along that dim: output position o copies input position src(o), with
//   replicate: clamp(o - lo, 0, n - 1)     reflect: (n - 1) - |(n - 1) - |o - lo||
// (one reflection suffices: PyTorch requires the padding to be smaller than the dim). Negative
// padding crops. The backward scatter-adds the gradient along the same indices, dim by dim.
#include <ATen/ops/reflection_pad1d_meta.h>
#include <ATen/ops/reflection_pad3d_meta.h>
#include <ATen/ops/replication_pad1d_meta.h>
#include <ATen/ops/replication_pad2d_meta.h>
#include <ATen/ops/replication_pad3d_meta.h>
#include <torch/library.h>

#include "torch/lower/index_util.h"
#include "torch/lower/structured.h"

namespace tpu::torch_bridge {
namespace {

// [out_n, 1] i64: the input position each output position along a dim copies.
int SourceIndex(Builder& b, int64_t out_n, int64_t n, int64_t lo, bool reflect) {
  int i = b.Binary(OpCode::kSubtract, b.Iota(TensorType{DType::kI64, {out_n}}, 0),
                   b.BroadcastTo(b.Constant(static_cast<double>(lo), DType::kI64), {out_n}));
  int last = b.BroadcastTo(b.Constant(static_cast<double>(n - 1), DType::kI64), {out_n});
  if (reflect) {
    i = b.Unary(OpCode::kAbs, i);
    i = b.Binary(OpCode::kSubtract, last, b.Unary(OpCode::kAbs, b.Binary(OpCode::kSubtract, last, i)));
  } else {
    i = b.Clamp(b.BroadcastTo(b.Constant(0, DType::kI64), {out_n}), i, last);
  }
  return b.Reshape(i, {out_n, 1});
}

// The padded dims: the last padding.size() / 2 dims of `sizes`, (lo, hi) pairs last dim first.
struct PadDim {
  int64_t dim, n, lo, hi;
};
std::vector<PadDim> PadDims(at::IntArrayRef sizes, at::IntArrayRef padding) {
  std::vector<PadDim> dims;
  int64_t k = static_cast<int64_t>(padding.size()) / 2;
  for (int64_t j = 0; j < k; ++j) {
    int64_t d = static_cast<int64_t>(sizes.size()) - 1 - j;
    dims.push_back({d, sizes[d], padding[2 * j], padding[2 * j + 1]});
  }
  return dims;
}

void PadForward(const char* op, const at::Tensor& self, at::IntArrayRef padding, bool reflect, const at::Tensor& out) {
  if (out.numel() == 0) return;
  Lowering l(op);
  Builder& b = l.b();
  int x = l.Input(self);
  for (const PadDim& p : PadDims(self.sizes(), padding)) {
    int64_t out_n = p.n + p.lo + p.hi;
    Dims slice = b.TypeOf(x).dims, offset;
    slice[p.dim] = 1;
    for (int64_t d = 0; d < static_cast<int64_t>(slice.size()); ++d)
      if (d != p.dim) offset.push_back(d);
    x = b.Gather(x, SourceIndex(b, out_n, p.n, p.lo, reflect), offset, {p.dim}, {p.dim}, slice, /*checked=*/false);
  }
  l.Output(x, out);
  l.Run();
}

void PadBackward(const char* op, const at::Tensor& grad, const at::Tensor& self, at::IntArrayRef padding, bool reflect,
                 const at::Tensor& grad_input) {
  if (grad_input.numel() == 0) return;
  at::ScalarType ct = CombineType(self.scalar_type());
  Lowering l(op);
  Builder& b = l.b();
  int g = l.Input(grad, ct);
  std::vector<PadDim> dims = PadDims(self.sizes(), padding);
  for (auto it = dims.rbegin(); it != dims.rend(); ++it) {  // the forward's gathers, undone in reverse
    const PadDim& p = *it;
    int64_t out_n = p.n + p.lo + p.hi;
    Dims in_dims = b.TypeOf(g).dims;
    in_dims[p.dim] = p.n;
    int zeros = b.BroadcastTo(b.Constant(0, ToDType(ct)), in_dims);
    g = SliceScatter{b, SourceIndex(b, out_n, p.n, p.lo, reflect), p.dim}(zeros, g, ReduceKind::kAdd);
  }
  l.Output(g, grad_input);
  l.Run();
}

// ---- forward ---------------------------------------------------------------------------------
template <class Meta>
at::Tensor& PadOut(const char* op, const at::Tensor& self, at::IntArrayRef padding, bool reflect, at::Tensor& out) {
  MetaOut<Meta> m(out);
  m.meta(self, padding);
  PadForward(op, self, padding, reflect, out);
  return out;
}

#define TPU_PAD_OUT(name, meta_class, reflect)                                                           \
  at::Tensor& name##_out(const at::Tensor& self, at::IntArrayRef padding, at::Tensor& out) {      \
    return PadOut<at::meta::meta_class>("aten::" #name, self, padding, reflect, out);                    \
  }
TPU_PAD_OUT(reflection_pad1d, structured_reflection_pad1d, true)
TPU_PAD_OUT(reflection_pad3d, structured_reflection_pad3d, true)
TPU_PAD_OUT(replication_pad1d, structured_replication_pad1d, false)
TPU_PAD_OUT(replication_pad2d, structured_replication_pad2d, false)
TPU_PAD_OUT(replication_pad3d, structured_replication_pad3d, false)
#undef TPU_PAD_OUT

// reflection_pad2d is not structured: CPU's checks, verbatim.
at::Tensor& ReflectionPad2dInto(const at::Tensor& self, at::IntArrayRef padding, at::Tensor& out) {
  TORCH_CHECK(padding.size() == 4, "padding size is expected to be 4");
  int64_t dim_w = self.dim() == 4 ? 3 : 2, dim_h = dim_w - 1;
  TORCH_CHECK((self.dim() == 3 && self.size(1) != 0 && self.size(2) != 0) ||
                  (self.dim() == 4 && self.size(1) != 0 && self.size(2) != 0 && self.size(3) != 0),
              "Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions for "
              "input, but got: ", self.sizes());
  int64_t h = self.size(dim_h), w = self.size(dim_w);
  TORCH_CHECK(padding[0] < w && padding[1] < w, "Argument #4: Padding size should be less than the corresponding "
              "input dimension, but got: padding (", padding[0], ", ", padding[1], ") at dimension ", dim_w,
              " of input ", self.sizes());
  TORCH_CHECK(padding[2] < h && padding[3] < h, "Argument #6: Padding size should be less than the corresponding "
              "input dimension, but got: padding (", padding[2], ", ", padding[3], ") at dimension ", dim_h,
              " of input ", self.sizes());
  int64_t oh = h + padding[2] + padding[3], ow = w + padding[0] + padding[1];
  TORCH_CHECK(ow >= 1 || oh >= 1, "input (H: ", h, ", W: ", w, ") is too small. Calculated output H: ", oh, " W: ", ow);
  std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end());
  sizes[dim_h] = oh;
  sizes[dim_w] = ow;
  ResizeOut(out, sizes);
  PadForward("aten::reflection_pad2d", self, padding, true, out);
  return out;
}
at::Tensor reflection_pad2d(const at::Tensor& self, at::IntArrayRef padding) {
  at::Tensor out = at::empty({0}, self.options());
  return ReflectionPad2dInto(self, padding, out);
}
at::Tensor& reflection_pad2d_out(const at::Tensor& self, at::IntArrayRef padding, at::Tensor& out) {
  return ReflectionPad2dInto(self, padding, out);
}

// ---- backward --------------------------------------------------------------------------------
at::Tensor& BackwardInto(const char* op, const at::Tensor& grad, const at::Tensor& self, at::IntArrayRef padding,
                         bool reflect, at::Tensor& grad_input) {
  int64_t k = static_cast<int64_t>(padding.size()) / 2;
  TORCH_CHECK(grad.dim() == self.dim() && self.dim() > k, op, ": grad_output and input ranks differ");
  for (const PadDim& p : PadDims(self.sizes(), padding))
    TORCH_CHECK(grad.size(p.dim) == p.n + p.lo + p.hi, "grad_output size ", p.dim, " expected ", p.n + p.lo + p.hi,
                ", got ", grad.size(p.dim));
  ResizeOut(grad_input, self.sizes());
  PadBackward(op, grad, self, padding, reflect, grad_input);
  return grad_input;
}

#define TPU_PAD_BACKWARD(name, reflect)                                                             \
  at::Tensor& name##_out(const at::Tensor& grad, const at::Tensor& self, at::IntArrayRef padding,  \
                         at::Tensor& grad_input) {                                                   \
    return BackwardInto("aten::" #name, grad, self, padding, reflect, grad_input);                  \
  }                                                                                                  \
  [[maybe_unused]] at::Tensor name(const at::Tensor& grad, const at::Tensor& self, at::IntArrayRef padding) {        \
    at::Tensor grad_input = at::empty({0}, self.options());                                          \
    return BackwardInto("aten::" #name, grad, self, padding, reflect, grad_input);                  \
  }
TPU_PAD_BACKWARD(reflection_pad1d_backward, true)
TPU_PAD_BACKWARD(reflection_pad2d_backward, true)
TPU_PAD_BACKWARD(reflection_pad3d_backward, true)
TPU_PAD_BACKWARD(replication_pad1d_backward, false)
TPU_PAD_BACKWARD(replication_pad2d_backward, false)
TPU_PAD_BACKWARD(replication_pad3d_backward, false)
#undef TPU_PAD_BACKWARD

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // Structured forward ops: the functional forms reach the out= kernels through ATen's wrappers.
  m.impl("reflection_pad1d.out", reflection_pad1d_out);
  m.impl("reflection_pad2d", reflection_pad2d);
  m.impl("reflection_pad2d.out", reflection_pad2d_out);
  m.impl("reflection_pad3d.out", reflection_pad3d_out);
  m.impl("replication_pad1d.out", replication_pad1d_out);
  m.impl("replication_pad2d.out", replication_pad2d_out);
  m.impl("replication_pad3d.out", replication_pad3d_out);
  // Backwards: registered in both forms (only some are structured).
  m.impl("reflection_pad1d_backward.grad_input", reflection_pad1d_backward_out);
  m.impl("reflection_pad2d_backward", reflection_pad2d_backward);
  m.impl("reflection_pad2d_backward.grad_input", reflection_pad2d_backward_out);
  m.impl("reflection_pad3d_backward.grad_input", reflection_pad3d_backward_out);
  m.impl("replication_pad1d_backward.grad_input", replication_pad1d_backward_out);
  m.impl("replication_pad2d_backward", replication_pad2d_backward);
  m.impl("replication_pad2d_backward.grad_input", replication_pad2d_backward_out);
  m.impl("replication_pad3d_backward", replication_pad3d_backward);
  m.impl("replication_pad3d_backward.grad_input", replication_pad3d_backward_out);
}

}  // namespace tpu::torch_bridge
