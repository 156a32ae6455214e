// nansum (so nanmean, which ATen composes from it), trace and equal: reductions over IR values.
#include <torch/library.h>

#include "torch/lower/pointwise_expr.h"
#include "torch/lower/reduce_util.h"

namespace tpu::torch_bridge {
namespace {

// ATen's nansum: the dtype rule of sum (integers and bool accumulate in int64), NaN counted as 0.
at::Tensor& nansum_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                       std::optional<at::ScalarType> dtype, at::Tensor& out) {
  TORCH_CHECK(!c10::isComplexType(self.scalar_type()), "nansum does not support complex inputs");
  CheckSameDevice("aten::nansum", {&self, &out});
  at::ScalarType rt = dtype.has_value() ? *dtype
                      : out.defined() && out.numel() > 0 ? out.scalar_type()
                      : at::isIntegralType(self.scalar_type(), /*includeBool=*/true) ? at::kLong
                                                                                       : self.scalar_type();
  if (dtype.has_value() && out.defined())
    TORCH_CHECK(out.scalar_type() == *dtype, "Expected out tensor to have dtype ", *dtype, ", but got ",
                out.scalar_type(), " instead");
  Dims axes = ReduceAxes(self, dim);
  ResizeOut(out, ReducedShape(self, axes, keepdim));
  if (out.numel() == 0) return out;
  if (self.numel() == 0) return out.zero_();
  Lowering l("aten::nansum");
  int x = l.b().ConvertIfNeeded(l.Input(self, rt), ToDType(OpMath(rt)));
  Expr e(l, x);
  if (e.is_float()) x = e.Select(e.IsNan(x), e.K(0), x);
  OutputReduced(l, ReduceAlong(l, x, axes, ReduceKind::kAdd), out);
  l.Run();
  return out;
}
at::Tensor nansum(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                  std::optional<at::ScalarType> dtype) {
  at::ScalarType rt = dtype.value_or(at::isIntegralType(self.scalar_type(), true) ? at::kLong : self.scalar_type());
  at::Tensor out = at::empty({0}, self.options().dtype(rt));
  return nansum_out(self, dim, keepdim, rt, out);
}

// trace: the sum of the main diagonal of a matrix, in sum's dtype (integers in int64).
at::Tensor trace(const at::Tensor& self) {
  TORCH_CHECK(self.dim() == 2, "trace: expected a matrix, but got tensor with dim ", self.dim());
  at::ScalarType rt = at::isIntegralType(self.scalar_type(), true) ? at::kLong : self.scalar_type();
  at::Tensor out = at::empty({}, self.options().dtype(rt));
  int64_t n = std::min(self.size(0), self.size(1));
  if (n == 0) return out.zero_();
  Lowering l("aten::trace");
  int x = l.b().ConvertIfNeeded(l.Input(self.diagonal(), rt), ToDType(OpMath(rt)));  // a strided view
  OutputReduced(l, ReduceAlong(l, x, Dims{0}, ReduceKind::kAdd), out);
  l.Run();
  return out;
}

// equal: same shape and every element equal (NaN != NaN), as one device program and a host read.
bool equal(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.device() == other.device(), "Cannot compare two tensors on different devices. Got: ",
              self.device(), " and ", other.device());
  TORCH_CHECK(self.scalar_type() == other.scalar_type(), "Expected object of scalar type ", self.scalar_type(),
              " but got scalar type ", other.scalar_type(), " for argument 'other'");
  if (!self.sizes().equals(other.sizes())) return false;
  if (self.numel() == 0) return true;
  if (self.is_same(other) && !at::isFloatingType(self.scalar_type())) return true;
  at::Tensor out = at::empty({}, self.options().dtype(at::kBool));
  Lowering l("aten::equal");
  int a = l.Input(self);
  int b = l.Input(other);
  int eq = l.b().Compare(CompareDirection::kEQ, a, b);
  Dims all;
  for (int64_t d = 0; d < self.dim(); ++d) all.push_back(d);
  OutputReduced(l, ReduceAlong(l, eq, all, ReduceKind::kAnd), out);
  l.Run();
  return out.item<bool>();
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("nansum", nansum);
  m.impl("nansum.out", nansum_out);
  m.impl("trace", trace);
  m.impl("equal", equal);
}

}  // namespace tpu::torch_bridge
