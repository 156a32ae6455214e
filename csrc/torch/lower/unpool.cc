// max_unpool2d / max_unpool3d: each (batch, channel) plane of the output is zero except at the
// positions the indices name (a max pool's flat indices into that plane), which get the input's
// values: one checked scatter over [planes, plane size]. An index outside the plane is an error
// when the program runs, as the CPU kernel's "invalid max index". Duplicate indices (overlapping
// pool windows) carry the same value when they come from a max pool; otherwise which one lands is
// unspecified, as on the CPU (PyTorch marks the op nondeterministic).
#include <torch/library.h>

#include "torch/lower/elementwise_util.h"
#include "torch/lower/index_util.h"

namespace tpu::torch_bridge {
namespace {

// Checks shared by both ranks, after the dtype and rank checks (ATen's messages); `kernel` names
// the CPU function as ATen does.
void CheckUnpool(const at::Tensor& self, const at::Tensor& indices, const char* kernel, int64_t spatial) {
  TORCH_CHECK(self.sizes() == indices.sizes(), "Expected shape of indices to be same as that of the input tensor (",
              self.sizes(), ") but got indices tensor with shape: ", indices.sizes());
  for (int64_t i = 1; i < self.dim(); ++i)
    TORCH_CHECK(self.size(i) > 0, kernel, (spatial == 2 ? " " : ": "), "Expected input to have non-zero size for "
                "non-batch dimensions, but got ", self.sizes(), " with dimension ", i, " being empty.");
}

void UnpoolInto(const char* op, const at::Tensor& self, const at::Tensor& indices, at::IntArrayRef output_size,
                at::Tensor& out, at::MemoryFormat format) {
  int64_t spatial = static_cast<int64_t>(output_size.size());
  int64_t lead = self.dim() - spatial;  // 1 (channels) or 2 (batch, channels)
  std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().begin() + lead);
  int64_t plane = 1;
  for (int64_t s : output_size) {
    sizes.push_back(s);
    plane *= s;
  }
  out.resize_(sizes, format);
  if (out.numel() == 0) return;
  int64_t planes = 1, per_plane = 1;
  for (int64_t d = 0; d < self.dim(); ++d) (d < lead ? planes : per_plane) *= self.size(d);
  at::ScalarType ct = OpMath(self.scalar_type());
  Lowering l(op);
  Builder& b = l.b();
  int x = b.Reshape(l.Input(self, ct), {planes, per_plane});
  int idx = b.Reshape(l.Input(indices), {planes, per_plane});
  int row = b.Iota(TensorType{DType::kI64, {planes, per_plane}}, 0);
  int coords = b.Concatenate({AsIndexColumn(b, row), AsIndexColumn(b, idx)}, 2);
  int zeros = b.BroadcastTo(b.Constant(0, ToDType(ct)), {planes, plane});
  l.CaptureLocation();
  int r = b.Scatter(zeros, coords, x, {}, {0, 1}, {0, 1}, ReduceKind::kReplace, /*checked=*/true);
  l.Output(b.Reshape(r, ToDims(out.sizes())), out);
  l.Run();
}

at::Tensor& max_unpool2d_out(const at::Tensor& self, const at::Tensor& indices, c10::SymIntArrayRef output_size_s,
                             at::Tensor& out) {
  auto output_size = C10_AS_INTARRAYREF_SLOW(output_size_s);
  TORCH_CHECK(indices.scalar_type() == at::kLong, "elements in indices should be type int64 but got: ",
              indices.scalar_type());
  TORCH_CHECK(output_size.size() == 2, "There should be exactly two elements (height, width) in output_size, but got ",
              output_size.size(), " elements.");
  TORCH_CHECK(self.dim() == 3 || self.dim() == 4, "Input to max_unpooling2d should be a 3d or 4d Tensor, but got a "
              "tensor with ", self.dim(), " dimensions.");
  CheckUnpool(self, indices, "max_unpooling2d_forward_out_cpu():", 2);
  at::MemoryFormat format = self.dim() == 4 ? self.suggest_memory_format() : at::MemoryFormat::Contiguous;
  UnpoolInto("aten::max_unpool2d", self, indices, output_size, out, format);
  return out;
}

at::Tensor max_unpool2d(const at::Tensor& self, const at::Tensor& indices, c10::SymIntArrayRef output_size) {
  at::Tensor out = at::empty({0}, self.options());
  return max_unpool2d_out(self, indices, output_size, out);
}

at::Tensor& max_unpool3d_out(const at::Tensor& self, const at::Tensor& indices, c10::SymIntArrayRef output_size_s,
                             at::IntArrayRef stride, at::IntArrayRef padding, at::Tensor& out) {
  auto output_size = C10_AS_INTARRAYREF_SLOW(output_size_s);
  TORCH_CHECK(indices.scalar_type() == at::kLong, "elements in indices should be type int64");
  TORCH_CHECK(self.dim() == 4 || self.dim() == 5, "Input to max_unpooling3d should be a 4d or 5d Tensor, but got a "
              "tensor with ", self.dim(), " dimensions.");
  TORCH_CHECK(output_size.size() == 3, "There should be exactly three elements (depth, height, width) in "
              "output_size, but got ", output_size.size(), " elements.");
  TORCH_CHECK(stride.size() == 3, "There should be exactly three elements (depth, height, width) in stride, but "
              "got: ", stride.size(), " elements.");
  TORCH_CHECK(padding.size() == 3, "There should be exactly three elements (depth, height, width) in padding, but "
              "got: ", padding.size(), " elements.");
  CheckUnpool(self, indices, "max_unpooling3d_forward_out_cpu()", 3);
  TORCH_CHECK(stride[0] > 0 && stride[1] > 0 && stride[2] > 0, "strides should be greater than zero, but got "
              "stride: ", stride);
  UnpoolInto("aten::max_unpool3d", self, indices, output_size, out, at::MemoryFormat::Contiguous);
  return out;
}

at::Tensor max_unpool3d(const at::Tensor& self, const at::Tensor& indices, c10::SymIntArrayRef output_size,
                        at::IntArrayRef stride, at::IntArrayRef padding) {
  at::Tensor out = at::empty({0}, self.options());
  return max_unpool3d_out(self, indices, output_size, stride, padding, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("max_unpool2d", max_unpool2d);
  m.impl("max_unpool2d.out", max_unpool2d_out);
  m.impl("max_unpool3d", max_unpool3d);
  m.impl("max_unpool3d.out", max_unpool3d_out);
}

}  // namespace tpu::torch_bridge
