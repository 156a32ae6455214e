// linalg.cross (torch.cross reaches it): the cross product of 3-vectors along one dimension of two
// broadcast inputs, as the CPU kernel computes it: r0 = a1 b2 - a2 b1, r1 = a2 b0 - a0 b2,
// r2 = a0 b1 - a1 b0, each product and difference rounded to the dtype (bfloat16/float16 round
// after every operation, as the CPU kernel's scalar arithmetic does).
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/linalg_cross_meta.h>
#include <torch/library.h>

#include "torch/lower/elementwise_util.h"
#include "torch/lower/structured.h"

namespace tpu::torch_bridge {
namespace {

at::Tensor& CrossInto(const at::Tensor& self, const at::Tensor& other, int64_t dim,
                      MetaOut<at::meta::structured_linalg_cross>& m) {
  m.meta(self, other, dim);  // ranks, length 3 at dim, the broadcast shape
  at::Tensor& out = m.out();
  TORCH_CHECK_NOT_IMPLEMENTED(!self.is_complex(), "linalg.cross: complex tensors are not supported on the tpu "
                              "device; move them to the CPU for it (tensor.cpu())");
  TORCH_CHECK(other.scalar_type() == self.scalar_type(), "expected scalar type ", self.scalar_type(),
              " but found ", other.scalar_type());
  if (out.numel() == 0) return out;
  dim = at::maybe_wrap_dim(dim, self.dim());
  const at::ScalarType t = self.scalar_type(), ct = OpMath(t);
  const bool round = ct != t;
  Lowering l("aten::linalg_cross");
  Builder& b = l.b();
  Dims dims = ToDims(out.sizes());
  int a = b.BroadcastTo(l.Input(self, ct), dims);
  int c = b.BroadcastTo(l.Input(other, ct), dims);
  auto part = [&](int x, int64_t k) {
    Dims start(dims.size(), 0), limit = dims, strides(dims.size(), 1);
    start[dim] = k;
    limit[dim] = k + 1;
    return b.Slice(x, start, limit, strides);
  };
  auto r = [&](int v) { return round ? b.ConvertIfNeeded(b.Convert(v, ToDType(t)), ToDType(ct)) : v; };
  auto term = [&](int64_t i, int64_t j) {  // a_i b_j - a_j b_i
    return r(b.Binary(OpCode::kSubtract, r(b.Binary(OpCode::kMultiply, part(a, i), part(c, j))),
                      r(b.Binary(OpCode::kMultiply, part(a, j), part(c, i)))));
  };
  int x = term(1, 2);
  int y = term(2, 0);
  int z = term(0, 1);
  l.Output(b.Concatenate({x, y, z}, dim), out);
  l.Run();
  return out;
}

at::Tensor linalg_cross(const at::Tensor& self, const at::Tensor& other, int64_t dim) {
  MetaOut<at::meta::structured_linalg_cross> m;
  return CrossInto(self, other, dim, m);
}

at::Tensor& linalg_cross_out(const at::Tensor& self, const at::Tensor& other, int64_t dim, at::Tensor& out) {
  MetaOut<at::meta::structured_linalg_cross> m(out);
  CrossInto(self, other, dim, m);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("linalg_cross", linalg_cross);
  m.impl("linalg_cross.out", linalg_cross_out);
}

}  // namespace tpu::torch_bridge
