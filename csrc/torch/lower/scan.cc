// cumsum and cumprod (inclusive prefix sums/products along one dimension), cummax/cummin, and isin
// (membership test). cumsum and isin are the two ops a Hugging Face generate() loop needs besides the model
// itself (position ids from the attention mask, and the end-of-sequence check).
//
// The prefix sum is a log-step scan: x += x shifted by 1, 2, 4, ... positions (slice + pad, so
// no new IR op): ceil(log2(n)) fused adds; the product likewise. Floats are accumulated in
// float32 (float64 for double) in that tree order; PyTorch's CPU kernel accumulates sequentially
// in double, so float32 results agree to rounding. isin compares every element with every test
// element and reduces with `or`: its cost is numel(elements) x numel(test_elements), fine for the
// short lists it is used with.
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/cumprod_meta.h>
#include <ATen/ops/cumsum_meta.h>
#include <ATen/ops/isin_meta.h>
#include <torch/library.h>

#include <limits>

#include "torch/lower/elementwise_util.h"
#include "torch/lower/index_util.h"
#include "torch/lower/structured.h"

namespace tpu::torch_bridge {

namespace {

// The inclusive scan of x along dim with `op`, whose identity fills the shifted-in positions.
int PrefixScan(Builder& b, int x, int64_t dim, OpCode op, double identity) {
  const Dims dims = b.TypeOf(x).dims;
  const size_t rank = dims.size();
  const int64_t n = dims[dim];
  int fill = b.Constant(identity, b.TypeOf(x).dtype);
  for (int64_t shift = 1; shift < n; shift *= 2) {
    Dims start(rank, 0), limit = dims, strides(rank, 1), low(rank, 0), high(rank, 0),
                         interior(rank, 0);
    limit[dim] = n - shift;
    low[dim] = shift;  // x[i - shift] at i, the identity before
    int shifted = b.Pad(b.Slice(x, start, limit, strides), fill, low, high, interior);
    x = b.Binary(op, x, shifted);
  }
  return x;
}

void ScanInto(const char* name, const at::Tensor& self, int64_t dim, const at::Tensor& out,
              OpCode op, double identity) {
  if (out.numel() == 0) return;
  dim = at::maybe_wrap_dim(dim, self.dim());
  const at::ScalarType result = out.scalar_type();
  const at::ScalarType compute = at::isFloatingType(result) ? OpMath(result) : at::kLong;
  Lowering l(name);
  Builder& b = l.b();
  // PyTorch converts the input to the result dtype first, then accumulates.
  int x = b.ConvertIfNeeded(l.Input(self, result), ToDType(compute));
  if (self.dim() > 0) x = PrefixScan(b, x, dim, op, identity);
  l.Output(x, out);
  l.Run();
}

void CumsumInto(const at::Tensor& self, int64_t dim, const at::Tensor& out) {
  ScanInto("aten::cumsum", self, dim, out, OpCode::kAdd, 0);
}

}  // namespace

int PrefixSum(Builder& b, int x, int64_t dim) { return PrefixScan(b, x, dim, OpCode::kAdd, 0); }
int PrefixMax(Builder& b, int x, int64_t dim) {
  return PrefixScan(b, x, dim, OpCode::kMaximum, -std::numeric_limits<double>::infinity());
}

namespace {

at::Tensor cumsum(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype) {
  MetaOut<at::meta::structured_cumsum> m;
  m.meta(self, dim, dtype);
  CumsumInto(self, dim, m.out());
  return m.out();
}

at::Tensor& cumsum_out(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype,
                       at::Tensor& out) {
  MetaOut<at::meta::structured_cumsum> m(out);
  m.meta(self, dim, dtype);
  CumsumInto(self, dim, m.out());
  return out;
}

at::Tensor& cumsum_(at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype) {
  return cumsum_out(self, dim, dtype, self);
}

// ---- cumprod ------------------------------------------------------------------------------------
at::Tensor cumprod(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype) {
  MetaOut<at::meta::structured_cumprod> m;
  m.meta(self, dim, dtype);
  ScanInto("aten::cumprod", self, dim, m.out(), OpCode::kMultiply, 1);
  return m.out();
}

at::Tensor& cumprod_out(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype,
                        at::Tensor& out) {
  MetaOut<at::meta::structured_cumprod> m(out);
  m.meta(self, dim, dtype);
  ScanInto("aten::cumprod", self, dim, m.out(), OpCode::kMultiply, 1);
  return out;
}

at::Tensor& cumprod_(at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype) {
  return cumprod_out(self, dim, dtype, self);
}

// ---- cummax / cummin ------------------------------------------------------------------------------
// The inclusive scan of x along dim with an idempotent op (maximum, minimum): the positions before
// each shift combine with themselves, so no identity value is needed (int64's maximum is not a
// double).
int IdempotentScan(Builder& b, int x, int64_t dim, OpCode op) {
  const Dims dims = b.TypeOf(x).dims;
  const size_t rank = dims.size();
  const int64_t n = dims[dim];
  for (int64_t shift = 1; shift < n; shift *= 2) {
    Dims start(rank, 0), head = dims, tail = dims, strides(rank, 1);
    head[dim] = shift;
    tail[dim] = n - shift;  // x[i - shift] at i >= shift, x[i] itself before
    int shifted = b.Concatenate({b.Slice(x, start, head, strides), b.Slice(x, start, tail, strides)}, dim);
    x = b.Binary(op, x, shifted);
  }
  return x;
}

// ATen's _cummax_helper / _cummin_helper (cummax_out has resized values/indices and handled 0-dim
// and empty inputs). The CPU kernel keeps the running extreme `out` and its index, replacing both
// when x is NaN or (out is not NaN and x >= out; <= for cummin): so ties and NaNs take the latest
// index and NaN sticks. Here: the running extreme (NaN-propagating), then for each position the
// latest j <= i where x[j] equals the running extreme at j, or is NaN.
void CumExtremeInto(const char* op, bool max, const at::Tensor& self, at::Tensor& values, at::Tensor& indices,
                    int64_t dim) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  if (self.numel() == 0) return;
  const at::ScalarType t = self.scalar_type();
  const bool floating = at::isFloatingType(t);
  Lowering l(op);
  Builder& b = l.b();
  int x = l.Input(self, floating ? OpMath(t) : at::kLong);
  int v = IdempotentScan(b, x, dim, max ? OpCode::kMaximum : OpCode::kMinimum);
  int pos = b.Iota(TensorType{DType::kI64, b.TypeOf(x).dims}, dim);
  int hit = b.Compare(CompareDirection::kEQ, x, v);
  if (floating) hit = b.Binary(OpCode::kOr, hit, b.Compare(CompareDirection::kNE, x, x));
  int idx = IdempotentScan(b, b.Select(hit, pos, b.ScalarLike(-1, pos)), dim, OpCode::kMaximum);
  l.Output(v, values);
  l.Output(idx, indices);
  l.Run();
}

void cummax_helper(const at::Tensor& self, at::Tensor& values, at::Tensor& indices, int64_t dim) {
  CumExtremeInto("aten::cummax", true, self, values, indices, dim);
}
void cummin_helper(const at::Tensor& self, at::Tensor& values, at::Tensor& indices, int64_t dim) {
  CumExtremeInto("aten::cummin", false, self, values, indices, dim);
}

// ---- isin ---------------------------------------------------------------------------------------
// elements / test_elements: a device tensor, or a Python number.
void IsinInto(const at::Tensor& elements, const at::Tensor& test, bool invert,
              const at::Tensor& out) {
  if (out.numel() == 0) return;
  const at::ScalarType ct = at::result_type(elements, test);
  Lowering l("aten::isin");
  Builder& b = l.b();
  const int64_t ne = elements.numel(), nt = test.numel();
  int found;
  if (nt == 0) {
    found = b.BroadcastTo(b.Constant(0, DType::kBool), {ne});
  } else {
    int e = b.BroadcastInDim(b.Reshape(TensorOrScalar(l, elements, ct), {ne}), {ne, nt}, {0});
    int t = b.BroadcastInDim(b.Reshape(TensorOrScalar(l, test, ct), {nt}), {ne, nt}, {1});
    found = b.Reduce(b.Compare(CompareDirection::kEQ, e, t), b.Constant(0, DType::kBool), {1},
                     ReduceKind::kOr);
  }
  if (invert) found = b.Unary(OpCode::kNot, found);
  l.Output(b.Reshape(found, ToDims(out.sizes())), out);
  l.Run();
}

at::Tensor& isin_tensor_tensor_out(const at::Tensor& elements, const at::Tensor& test,
                                   bool assume_unique, bool invert, at::Tensor& out) {
  MetaOut<at::meta::structured_isin_Tensor_Tensor> m(out);
  m.meta(elements, test, assume_unique, invert);
  IsinInto(elements, test, invert, out);
  return out;
}

at::Tensor isin_tensor_tensor(const at::Tensor& elements, const at::Tensor& test,
                              bool assume_unique, bool invert) {
  MetaOut<at::meta::structured_isin_Tensor_Tensor> m;
  m.meta(elements, test, assume_unique, invert);
  IsinInto(elements, test, invert, m.out());
  return m.out();
}

at::Tensor& isin_tensor_scalar_out(const at::Tensor& elements, const at::Scalar& test,
                                   bool assume_unique, bool invert, at::Tensor& out) {
  MetaOut<at::meta::structured_isin_Tensor_Scalar> m(out);
  m.meta(elements, test, assume_unique, invert);
  IsinInto(elements, WrapScalar(test), invert, out);
  return out;
}

at::Tensor isin_tensor_scalar(const at::Tensor& elements, const at::Scalar& test,
                              bool assume_unique, bool invert) {
  MetaOut<at::meta::structured_isin_Tensor_Scalar> m;
  m.meta(elements, test, assume_unique, invert);
  IsinInto(elements, WrapScalar(test), invert, m.out());
  return m.out();
}

at::Tensor& isin_scalar_tensor_out(const at::Scalar& element, const at::Tensor& test,
                                   bool assume_unique, bool invert, at::Tensor& out) {
  MetaOut<at::meta::structured_isin_Scalar_Tensor> m(out);
  m.meta(element, test, assume_unique, invert);
  ResizeOut(out, {});  // the meta function leaves a 0-element output, resized like ATen's kernel
  IsinInto(WrapScalar(element), test, invert, out);
  return out;
}

at::Tensor isin_scalar_tensor(const at::Scalar& element, const at::Tensor& test, bool assume_unique,
                              bool invert) {
  MetaOut<at::meta::structured_isin_Scalar_Tensor> m;
  m.meta(element, test, assume_unique, invert);
  ResizeOut(m.out(), {});
  IsinInto(WrapScalar(element), test, invert, m.out());
  return m.out();
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("cumsum", cumsum);
  m.impl("cumsum.out", cumsum_out);
  m.impl("cumsum_", cumsum_);
  m.impl("cumprod", cumprod);
  m.impl("cumprod.out", cumprod_out);
  m.impl("cumprod_", cumprod_);
  m.impl("_cummax_helper", cummax_helper);
  m.impl("_cummin_helper", cummin_helper);
  m.impl("isin.Tensor_Tensor", isin_tensor_tensor);
  m.impl("isin.Tensor_Tensor_out", isin_tensor_tensor_out);
  m.impl("isin.Tensor_Scalar", isin_tensor_scalar);
  m.impl("isin.Tensor_Scalar_out", isin_tensor_scalar_out);
  m.impl("isin.Scalar_Tensor", isin_scalar_tensor);
  m.impl("isin.Scalar_Tensor_out", isin_scalar_tensor_out);
}

}  // namespace tpu::torch_bridge
