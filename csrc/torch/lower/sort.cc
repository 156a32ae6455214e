// Sorting and selection: sort (argsort, msort), topk, kthvalue, median, nanmedian. All are one IR
// sort (the positions of a stable sort along a dim; NaN sorts greatest, as on CPU) followed by
// gathers of the positions wanted and of the values at them.
//
// CPU's non-stable sort, topk, kthvalue and median may order equal elements differently (their
// index results for ties are unspecified); ours are always those of the stable sort.
#include <ATen/MemoryOverlap.h>
#include <ATen/native/ReduceOpsUtils.h>
#include <ATen/native/SortingUtils.h>
#include <ATen/ops/sort_meta.h>
#include <ATen/ops/topk_meta.h>
#include <torch/library.h>

#include <limits>

#include "torch/lower/index_util.h"
#include "torch/lower/structured.h"

namespace tpu::torch_bridge {
namespace {

// Writes values = x gathered at `pos` along dim and indices = pos, shaped as the outputs.
void OutputSelected(Lowering& l, int x, int pos, int64_t dim, const at::Tensor& values, const at::Tensor& indices) {
  Builder& b = l.b();
  l.Output(b.Reshape(GatherAlongDim(b, x, pos, dim), ToDims(values.sizes())), values);
  l.Output(b.Reshape(pos, ToDims(indices.sizes())), indices);
}

// ---- sort ------------------------------------------------------------------------------------
std::tuple<at::Tensor&, at::Tensor&> sort_values_stable(const at::Tensor& self, std::optional<bool> stable,
                                                        int64_t dim, bool descending, at::Tensor& values,
                                                        at::Tensor& indices) {
  MetaOut2<at::meta::structured_sort_stable> m(values, indices);
  m.meta(self, stable, dim, descending);
  if (self.numel() == 0) return {values, indices};
  dim = at::maybe_wrap_dim(dim, self.dim(), /*wrap_scalar=*/true);
  Lowering l("aten::sort");
  Builder& b = l.b();
  int x = b.Reshape(l.Input(self), Dims1(self));
  OutputSelected(l, x, b.Sort(x, dim, descending), dim, values, indices);
  l.Run();
  return {values, indices};
}

// ---- topk ------------------------------------------------------------------------------------
std::tuple<at::Tensor&, at::Tensor&> topk_values(const at::Tensor& self, int64_t k, int64_t dim, bool largest,
                                                 bool sorted, at::Tensor& values, at::Tensor& indices) {
  MetaOut2<at::meta::structured_topk> m(values, indices);
  m.meta(self, k, dim, largest, sorted);
  if (values.numel() == 0) return {values, indices};
  dim = at::maybe_wrap_dim(dim, self.dim(), /*wrap_scalar=*/true);
  // sorted=False leaves the order to the implementation: ours is sorted.
  Lowering l("aten::topk");
  Builder& b = l.b();
  Dims dims = Dims1(self);
  int x = b.Reshape(l.Input(self), dims);
  int pos = b.Sort(x, dim, largest);
  Dims limit = dims;
  limit[dim] = k;
  pos = b.Slice(pos, Dims(dims.size(), 0), limit, Dims(dims.size(), 1));
  OutputSelected(l, x, pos, dim, values, indices);
  l.Run();
  return {values, indices};
}

// ---- kthvalue, median, nanmedian -------------------------------------------------------------
// values/indices along `dim` (a reduction with indices, ATen's output rules). `pick(b, x, sorted_positions, dims)` gives the position within the
// sorted row to select, [..., 1, ...] i64.
template <typename Pick>
std::tuple<at::Tensor&, at::Tensor&> SelectAlongDim(const char* op, const char* name, const at::Tensor& self,
                                                    int64_t dim, bool keepdim, at::Tensor& values,
                                                    at::Tensor& indices, Pick&& pick) {
  dim = at::maybe_wrap_dim(dim, self.dim(), /*wrap_scalar=*/true);
  at::native::zero_numel_check_dims(self, dim, name);
  at::native::_reduction_with_indices_allocate_or_resize_output(values, indices, self, dim, keepdim);
  if (!keepdim && self.dim() > 0) {
    values.squeeze_(dim);
    indices.squeeze_(dim);
  }
  if (values.numel() > 0) {
    Lowering l(op);
    Builder& b = l.b();
    Dims dims = Dims1(self);
    int x = b.Reshape(l.Input(self), dims);
    int sorted = b.Sort(x, dim, /*descending=*/false);
    int pos = GatherAlongDim(b, sorted, pick(l, x, dims), dim);
    OutputSelected(l, x, pos, dim, values, indices);
    l.Run();
  }
  return {values, indices};
}

// A position along `dim` as an i64 value of dims with dims[dim] = 1.
Dims Kept(Dims dims, int64_t dim) {
  dims[dim] = 1;
  return dims;
}

std::tuple<at::Tensor&, at::Tensor&> kthvalue_values(const at::Tensor& self, int64_t k, int64_t dim, bool keepdim,
                                                     at::Tensor& values, at::Tensor& indices) {
  int64_t wrapped = at::maybe_wrap_dim(dim, self.dim(), /*wrap_scalar=*/true);
  int64_t slice = self.dim() == 0 ? 1 : self.size(wrapped);
  at::native::zero_numel_check_dims(self, wrapped, "kthvalue()");
  TORCH_CHECK(k >= 1 && k <= slice, "kthvalue(): selected number k out of range for dimension ", wrapped);
  at::assert_no_overlap(self, values);
  return SelectAlongDim("aten::kthvalue", "kthvalue()", self, dim, keepdim, values, indices,
                        [&](Lowering& l, int, const Dims& dims) {
                          return l.b().BroadcastTo(l.Scalar(k - 1, at::kLong), Kept(dims, wrapped));
                        });
}

// The median's position in each sorted row: NaN sorts last, so a row with n_num numbers of n
// has them at [0, n_num). median: the first NaN if there is one (CPU returns it and its index),
// else (n - 1) / 2. nanmedian: (n_num - 1) / 2 (0 for an all-NaN row: its first NaN).
int MedianPosition(Builder& b, int x, const Dims& dims, int64_t dim, bool ignore_nan) {
  Dims kept = Kept(dims, dim);
  int n = b.Constant(static_cast<double>(dims[dim]), DType::kI64);
  int numbers = b.Convert(b.Compare(CompareDirection::kEQ, x, x), DType::kI64);
  int n_num = b.Reshape(b.Reduce(numbers, b.Constant(0, DType::kI64), {dim}, ReduceKind::kAdd), kept);
  int one = b.ScalarLike(1, n_num), two = b.ScalarLike(2, n_num);
  if (ignore_nan) {
    int m = b.Binary(OpCode::kMaximum, b.Binary(OpCode::kSubtract, n_num, one), b.ScalarLike(0, n_num));
    return b.Binary(OpCode::kDivide, m, two);
  }
  int nb = b.BroadcastTo(n, kept);
  int mid = b.Binary(OpCode::kDivide, b.Binary(OpCode::kSubtract, nb, one), two);
  return b.Select(b.Compare(CompareDirection::kLT, n_num, nb), n_num, mid);
}

std::tuple<at::Tensor&, at::Tensor&> MedianDim(const char* op, const char* name, const at::Tensor& self, int64_t dim,
                                               bool keepdim, at::Tensor& values, at::Tensor& indices, bool ignore_nan) {
  int64_t wrapped = at::maybe_wrap_dim(dim, self.dim(), /*wrap_scalar=*/true);
  return SelectAlongDim(op, name, self, dim, keepdim, values, indices, [&](Lowering& l, int x, const Dims& dims) {
    return MedianPosition(l.b(), x, dims, wrapped, ignore_nan);
  });
}

std::tuple<at::Tensor&, at::Tensor&> median_dim_values(const at::Tensor& self, int64_t dim, bool keepdim,
                                                       at::Tensor& values, at::Tensor& indices) {
  return MedianDim("aten::median", "median()", self, dim, keepdim, values, indices, false);
}
std::tuple<at::Tensor&, at::Tensor&> nanmedian_dim_values(const at::Tensor& self, int64_t dim, bool keepdim,
                                                          at::Tensor& values, at::Tensor& indices) {
  return MedianDim("aten::nanmedian", "nanmedian()", self, dim, keepdim, values, indices, true);
}

// The median of all elements (NaN for an empty tensor, as on CPU).
at::Tensor MedianAll(const char* op, const at::Tensor& self, bool ignore_nan) {
  at::Tensor out = at::empty({}, self.options());
  Lowering l(op);
  Builder& b = l.b();
  if (self.numel() == 0) {
    l.Output(b.Constant(std::numeric_limits<double>::quiet_NaN(), ToDType(self.scalar_type())), out);
  } else {
    int64_t n = self.numel();
    int x = b.Reshape(l.Input(self), {n});
    int pos = GatherAlongDim(b, b.Sort(x, 0, false), MedianPosition(b, x, {n}, 0, ignore_nan), 0);
    l.Output(b.Reshape(GatherAlongDim(b, x, pos, 0), {}), out);
  }
  l.Run();
  return out;
}

at::Tensor median(const at::Tensor& self) { return MedianAll("aten::median", self, false); }
at::Tensor nanmedian(const at::Tensor& self) { return MedianAll("aten::nanmedian", self, true); }

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // Functional and in-place forms reach the out= kernels through ATen's structured wrappers.
  m.impl("sort.values_stable", sort_values_stable);
  m.impl("topk.values", topk_values);
  m.impl("kthvalue.values", kthvalue_values);
  m.impl("median.dim_values", median_dim_values);
  m.impl("nanmedian.dim_values", nanmedian_dim_values);
  m.impl("median", median);
  m.impl("nanmedian", nanmedian);
}

}  // namespace tpu::torch_bridge
