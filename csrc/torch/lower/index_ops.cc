// index_add / index_copy / index_fill / index_reduce (slices of self selected by a vector of
// indices along one dim), take / put_ (self as a flat vector) and masked_scatter_, lowered to IR
// scatter / gather. Index errors are data-dependent: the scatters and gathers are `checked` and
// record the user's line (see indexing.cc).
#include <ATen/MemoryOverlap.h>
#include <ATen/ops/index_add_meta.h>
#include <ATen/ops/index_copy_meta.h>
#include <ATen/ops/index_reduce_meta.h>
#include <torch/library.h>

#include "torch/lower/index_util.h"
#include "torch/lower/structured.h"

namespace tpu::torch_bridge {
namespace {

// i64 indices [n, 1] with negatives in [-size, 0) wrapped (others left for the checked op to
// report as the user wrote them).
int WrappedIndexColumn(Lowering& l, const at::Tensor& index, int64_t size) {
  Builder& b = l.b();
  int64_t n = index.numel();
  int v = b.Reshape(l.Input(index, at::kLong), {n});
  int sz = b.ScalarLike(static_cast<double>(size), v);
  int wrap = b.Binary(OpCode::kAnd, b.Compare(CompareDirection::kLT, v, b.ScalarLike(0, v)),
                      b.Compare(CompareDirection::kGE, v, b.Unary(OpCode::kNegate, sz)));
  return b.Reshape(b.Select(wrap, b.Binary(OpCode::kAdd, v, sz), v), {n, 1});
}

// ---- index_add / index_copy / index_reduce ---------------------------------------------------
// out = self with source's slices combined in at index along dim (`alpha` scales for index_add).
void IndexScatterInto(const char* op, const at::Tensor& self, int64_t dim, const at::Tensor& index,
                      const at::Tensor& source, Reduce reduce, bool include_self, const at::Scalar* alpha,
                      const at::Tensor& out, bool wrap_negative) {
  if (out.numel() == 0) return;
  if (index.numel() == 0) {
    if (!out.is_same(self)) out.copy_(self);
    return;
  }
  dim = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  at::ScalarType ct = reduce == Reduce::kNone ? self.scalar_type() : CombineType(self.scalar_type());
  Lowering l(op);
  Builder& b = l.b();
  Dims self_dims = Dims1(self);
  int base = b.Reshape(l.Input(self, ct), self_dims);
  int upd = b.Reshape(l.Input(source, ct), Dims1(source));
  if (alpha) upd = b.Binary(OpCode::kMultiply, upd, b.BroadcastTo(l.Scalar(*alpha, ct), b.TypeOf(upd).dims));
  int idx = wrap_negative ? WrappedIndexColumn(l, index, self_dims[dim])
                          : b.Reshape(l.Input(index, at::kLong), {index.numel(), 1});
  int r = ReduceScatter(l, base, upd, reduce, include_self, ct, SliceScatter{b, idx, dim});
  l.Output(b.Reshape(r, ToDims(out.sizes())), out);
  l.CaptureLocation();
  l.Run();
}

at::Tensor& index_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                          const at::Scalar& alpha, at::Tensor& out) {
  MetaOut<at::meta::structured_index_add> m(out);
  m.meta(self, dim, index, source, alpha);
  IndexScatterInto("aten::index_add", self, dim, index, source, Reduce::kSum, true, &alpha, out, false);
  return out;
}

at::Tensor& index_copy_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                           at::Tensor& out) {
  MetaOut<at::meta::structured_index_copy> m(out);
  m.meta(self, dim, index, source);
  IndexScatterInto("aten::index_copy", self, dim, index, source, Reduce::kNone, true, nullptr, out, false);
  return out;
}

at::Tensor& index_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                             c10::string_view reduce, bool include_self, at::Tensor& out) {
  MetaOut<at::meta::structured_index_reduce> m(out);
  m.meta(self, dim, index, source, reduce, include_self);
  IndexScatterInto("aten::index_reduce", self, dim, index, source, ParseScatterReduceTwo(reduce), include_self,
                   nullptr, out, false);
  return out;
}

// ---- index_fill_ -----------------------------------------------------------------------------
at::Tensor& IndexFill(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor* value_t,
                      const at::Scalar& value) {
  TORCH_CHECK_INDEX(index.scalar_type() == at::kLong, "index_fill_(): Expected dtype int64 for index.");
  at::assert_no_overlap(self, index);
  dim = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  TORCH_CHECK(index.dim() <= 1, "Index has to be a vector/scalar");
  if (self.numel() == 0 || index.numel() == 0) return self;
  at::ScalarType t = self.scalar_type();
  Lowering l("aten::index_fill_");
  Builder& b = l.b();
  Dims dims = Dims1(self);
  int base = b.Reshape(l.Input(self), dims);
  int idx = WrappedIndexColumn(l, index, dims[dim]);
  Dims upd_dims = dims;
  upd_dims[dim] = index.numel();
  int v = value_t ? TensorOrScalar(l, *value_t, t) : l.Scalar(value, t);
  int r = SliceScatter{b, idx, dim}(base, b.BroadcastTo(b.Reshape(v, {}), upd_dims), ReduceKind::kReplace);
  l.Output(b.Reshape(r, ToDims(self.sizes())), self);
  l.CaptureLocation();
  l.Run();
  return self;
}

at::Tensor& index_fill_scalar(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Scalar& value) {
  return IndexFill(self, dim, index, nullptr, value);
}
at::Tensor& index_fill_tensor(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "index_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
              value.dim(), " dimension(s).");
  return IndexFill(self, dim, index, &value, 0);
}

// ---- take / put_ -----------------------------------------------------------------------------
at::Tensor& TakeInto(const at::Tensor& self, const at::Tensor& index, at::Tensor& out) {
  TORCH_CHECK(index.scalar_type() == at::kLong, "take(): Expected a long tensor for index, but got ",
              index.scalar_type());
  TORCH_CHECK(self.scalar_type() == out.scalar_type(), "take(): self and out expected to have the same dtype, but got "
              "self.dtype = ", self.scalar_type(), " and out.dtype = ", out.scalar_type());
  CheckSameDevice("take", {&self, &index, &out});
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, index);
  at::assert_no_overlap(out, self);
  ResizeOut(out, index.sizes());
  if (index.numel() == 0) return out;
  TORCH_CHECK_INDEX(self.numel() != 0, "take(): tried to take from an empty tensor");
  Lowering l("aten::take");
  Builder& b = l.b();
  int flat = b.Reshape(l.Input(self), {self.numel()});
  int r = b.Gather(flat, WrappedIndexColumn(l, index, self.numel()), {}, {0}, {0}, {1}, /*checked=*/true);
  l.Output(b.Reshape(r, ToDims(out.sizes())), out);
  l.CaptureLocation();
  l.Run();
  return out;
}

at::Tensor take(const at::Tensor& self, const at::Tensor& index) {
  at::Tensor out = at::empty({0}, self.options());
  return TakeInto(self, index, out);
}
at::Tensor& take_out(const at::Tensor& self, const at::Tensor& index, at::Tensor& out) {
  return TakeInto(self, index, out);
}

at::Tensor& put_(at::Tensor& self, const at::Tensor& index, const at::Tensor& source, bool accumulate) {
  TORCH_CHECK_INDEX(index.scalar_type() == at::kLong, "put_(): Expected a long tensor for index, but got ",
                    index.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "put_(): self and source expected to have the same "
              "dtype, but got self.dtype = ", self.scalar_type(), " and source.dtype = ", source.scalar_type());
  TORCH_CHECK(source.numel() == index.numel(), "put_(): Expected source and index to have the same number of "
              "elements, but got source.numel() = ", source.numel(), ", index.numel() = ", index.numel());
  CheckSameDevice("put_", {&self, &index, &source});
  at::assert_no_internal_overlap(self);
  at::assert_no_overlap(self, index);
  if (at::has_internal_overlap(source) == at::MemOverlap::Yes) at::assert_no_overlap(self, source);
  if (index.numel() == 0) return self;
  TORCH_CHECK_INDEX(self.numel() != 0, "put_(): Tried to put elements into an empty tensor");
  at::ScalarType ct = accumulate ? CombineType(self.scalar_type()) : self.scalar_type();
  Lowering l("aten::put_");
  Builder& b = l.b();
  int flat = b.Reshape(l.Input(self, ct), {self.numel()});
  int upd = b.Reshape(l.Input(source, ct), {source.numel()});
  int idx = WrappedIndexColumn(l, index, self.numel());
  int r = b.Scatter(flat, idx, upd, {}, {0}, {0}, accumulate ? ReduceKind::kAdd : ReduceKind::kReplace,
                    /*checked=*/true);
  l.Output(b.Reshape(r, ToDims(self.sizes())), self);
  l.CaptureLocation();
  l.Run();
  return self;
}

// ---- masked_scatter_ -------------------------------------------------------------------------
// The k-th set element of the mask (row-major) takes source's k-th element: its position in the
// flat source is the prefix count of set elements before it.
at::Tensor& masked_scatter_(at::Tensor& self, const at::Tensor& mask, const at::Tensor& source) {
  at::assert_no_internal_overlap(self);
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "masked_scatter_: expected self and source to have same "
              "dtypes but got", self.scalar_type(), " and ", source.scalar_type());
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_scatter_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  CheckSameDevice("masked_scatter_", {&self, &mask, &source});
  at::Tensor m = mask.expand(self.sizes());  // PyTorch's broadcast (and its error message)
  int64_t n = self.numel();
  if (n == 0) return self;
  if (source.numel() == 0) {
    // Nothing to gather from: valid only for an all-false mask (a sync, on a rare path).
    TORCH_CHECK(!m.any().item<bool>(), "masked_scatter: expected source to have at least as many elements as the "
                "number of ones in mask");
    return self;
  }
  Lowering l("aten::masked_scatter_");
  Builder& b = l.b();
  int x = b.Reshape(l.Input(self), {n});
  int set = b.Reshape(l.Input(m), {n});
  int count = PrefixSum(b, b.Convert(set, DType::kI64), 0);
  int pos = b.Select(set, b.Binary(OpCode::kSubtract, count, b.ScalarLike(1, count)), b.ScalarLike(0, count));
  int src = b.Reshape(l.Input(source), {source.numel()});
  int taken = b.Gather(src, b.Reshape(pos, {n, 1}), {}, {0}, {0}, {1}, /*checked=*/true);
  l.Output(b.Reshape(b.Select(set, taken, x), ToDims(self.sizes())), self);
  l.CaptureLocation();
  l.Run();
  return self;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // Functional and in-place forms reach the out= kernels through ATen's structured wrappers.
  m.impl("index_add.out", index_add_out);
  m.impl("index_copy.out", index_copy_out);
  m.impl("index_reduce.out", index_reduce_out);
  m.impl("index_fill_.int_Scalar", index_fill_scalar);
  m.impl("index_fill_.int_Tensor", index_fill_tensor);
  m.impl("take", take);
  m.impl("take.out", take_out);
  m.impl("put_", put_);
  m.impl("masked_scatter_", masked_scatter_);
}

}  // namespace tpu::torch_bridge
