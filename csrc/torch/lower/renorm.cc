// renorm: each slice along `dim` whose p-norm exceeds maxnorm is scaled to norm maxnorm. As ATen's
// CPU implementation: the norms by linalg_vector_norm (in float for bfloat16/float16), the factor
// maxnorm / (norm + 1e-7) where norm > maxnorm else 1 (in the norms' dtype, then rounded to the
// input's), and the product self * factor.
#include <ATen/ops/renorm_meta.h>
#include <torch/library.h>

#include "torch/lower/pointwise_expr.h"
#include "torch/lower/structured.h"

namespace tpu::torch_bridge {
namespace {

at::Tensor& RenormInto(const at::Tensor& self, const at::Scalar& p, int64_t dim, const at::Scalar& maxnorm,
                       MetaOut<at::meta::structured_renorm>& m) {
  m.meta(self, p, dim, maxnorm);  // p > 0, maxnorm >= 0, at least 2 dims (ATen's messages)
  at::Tensor& out = m.out();
  dim = at::maybe_wrap_dim(dim, self.dim());
  std::vector<int64_t> reduce_dims;
  for (int64_t d = 0; d < self.dim(); ++d)
    if (d != dim) reduce_dims.push_back(d);
  const at::ScalarType t = self.scalar_type(), acc = OpMath(t);
  at::Tensor norm = acc != t ? at::linalg_vector_norm(self, p, reduce_dims, /*keepdim=*/true, acc)
                             : at::linalg_vector_norm(self, p, reduce_dims, /*keepdim=*/true);
  at::Tensor factor = LowerElementwise("aten::renorm", {norm}, Functional(), ResultKind::kCommon,
                                       [&](Lowering& l, const ValueList& v, DType dt) {
                                         Expr e(l, v[0]);
                                         int limit = e.P(maxnorm);
                                         int scaled = e.Div(limit, e.Add(v[0], e.K(1e-7)));
                                         return e.Select(e.Gt(v[0], limit), scaled, e.K(1));
                                       });
  at::mul_outf(self, factor.to(t), out);
  return out;
}

at::Tensor renorm(const at::Tensor& self, const at::Scalar& p, int64_t dim, const at::Scalar& maxnorm) {
  MetaOut<at::meta::structured_renorm> m;
  return RenormInto(self, p, dim, maxnorm, m);
}
at::Tensor& renorm_out(const at::Tensor& self, const at::Scalar& p, int64_t dim, const at::Scalar& maxnorm,
                       at::Tensor& out) {
  MetaOut<at::meta::structured_renorm> m(out);
  RenormInto(self, p, dim, maxnorm, m);
  return out;
}
at::Tensor& renorm_(at::Tensor& self, const at::Scalar& p, int64_t dim, const at::Scalar& maxnorm) {
  return renorm_out(self, p, dim, maxnorm, self);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("renorm", renorm);
  m.impl("renorm.out", renorm_out);
  m.impl("renorm_", renorm_);
}

}  // namespace tpu::torch_bridge
