// Indexing: index_select, gather, scatter / scatter_add / scatter_reduce, advanced indexing
// (index.Tensor), index_put_ and embedding's backward, lowered to IR gather / scatter.
//
// An out-of-range index is a data-dependent error: every gather/scatter here is built `checked`
// and records the user's source line, so strict mode raises at the next sync point and debug
// mode at the op itself, naming both ("index 10 is out of bounds for dimension 0 with size 5").
#include <ATen/MemoryOverlap.h>
#include <ATen/native/IndexingUtils.h>
#include <ATen/ops/gather_meta.h>
#include <ATen/ops/scatter_add_meta.h>
#include <ATen/ops/scatter_meta.h>
#include <ATen/ops/scatter_reduce_meta.h>
#include <torch/library.h>

#include <limits>
#include <sstream>

#include "torch/lower/complex_util.h"
#include "torch/lower/elementwise_util.h"
#include "torch/lower/index_util.h"
#include "torch/lower/structured.h"

namespace tpu::torch_bridge {
namespace {

// ---- index_select ----------------------------------------------------------------------------
at::Tensor& IndexSelectInto(const at::Tensor& self, int64_t dim, const at::Tensor& index, at::Tensor& out) {
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_select(): Expected dtype int32 or int64 for index");
  TORCH_CHECK(self.scalar_type() == out.scalar_type(), "index_select(): self and result must have the same scalar type");
  dim = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK(self.dim() > 0 || index.numel() == 1, "index_select(): Index to scalar can have only 1 value, got ",
              index.numel(), " value(s)");
  at::DimVector sizes(self.sizes());
  if (self.dim() > 0) sizes[dim] = index.numel();
  ResizeOut(out, sizes);
  if (out.numel() == 0) return out;
  Lowering l("aten::index_select");
  Builder& b = l.b();
  Dims src_dims = Dims1(self);
  int src = b.Reshape(l.Input(self), src_dims);
  int idx = b.Reshape(l.Input(index, at::kLong), {index.numel(), 1});
  Dims slice = src_dims, offset_dims;
  slice[dim] = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(src_dims.size()); ++d)
    if (d != dim) offset_dims.push_back(d);
  int r = b.Gather(src, idx, offset_dims, {dim}, {dim}, slice, /*checked=*/true);
  l.Output(b.Reshape(r, ToDims(out.sizes())), out);
  l.CaptureLocation();
  l.Run();
  return out;
}

at::Tensor index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  CheckSameDevice("index_select", {&self, &index});  // before the result takes self's device
  at::Tensor out = at::empty({0}, self.options());
  return IndexSelectInto(self, dim, index, out);
}
at::Tensor& index_select_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, at::Tensor& out) {
  // ATen's checks: out must not write one element twice nor overlap the inputs.
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, self);
  at::assert_no_overlap(out, index);
  return IndexSelectInto(self, dim, index, out);
}

// ---- gather ----------------------------------------------------------------------------------
at::Tensor& GatherInto(const at::Tensor& self, int64_t dim, const at::Tensor& index, at::Tensor& out) {
  if (out.numel() == 0) return out;
  dim = at::maybe_wrap_dim(dim, self.dim());
  if (IsComplex(self.scalar_type())) {
    // Note [Complex tensors]: the gather of the float pairs, the pair one more dim of the index.
    std::vector<int64_t> pairs = index.sizes().vec();
    pairs.push_back(2);
    at::Tensor real_out = at::view_as_real(out);
    GatherInto(ResolvedRealView(self), dim, index.unsqueeze(-1).expand(pairs), real_out);
    return out;
  }
  Lowering l("aten::gather");
  Builder& b = l.b();
  int src = b.Reshape(l.Input(self), Dims1(self));
  int idx = b.Reshape(l.Input(index, at::kLong), Dims1(index));
  int r = GatherAlongDim(b, src, idx, dim);
  l.Output(b.Reshape(r, ToDims(out.sizes())), out);
  l.CaptureLocation();
  l.Run();
  return out;
}

at::Tensor gather(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad) {
  MetaOut<at::meta::structured_gather> m;
  m.meta(self, dim, index, sparse_grad);
  return GatherInto(self, dim, index, m.out());
}
at::Tensor& gather_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad, at::Tensor& out) {
  MetaOut<at::meta::structured_gather> m(out);
  m.meta(self, dim, index, sparse_grad);
  return GatherInto(self, dim, index, out);
}

// ---- scatter family --------------------------------------------------------------------------
Reduce ParseScatterReduce(c10::string_view reduce) {
  if (reduce == "add") return Reduce::kSum;
  if (reduce == "multiply") return Reduce::kProd;
  TORCH_CHECK(false, "reduce argument must be either add or multiply.");
}

// out = scatter of `src` (a tensor, or `value` when src is undefined) into self along dim.
void ScatterInto(const char* op, const at::Tensor& self, int64_t dim, const at::Tensor& index,
                 const at::Tensor& src, const at::Scalar& value, Reduce reduce, bool include_self,
                 const at::Tensor& out) {
  if (out.numel() == 0) return;
  if (index.numel() == 0) {
    if (!out.is_same(self)) out.copy_(self);
    return;
  }
  dim = at::maybe_wrap_dim(dim, self.dim());
  at::ScalarType t = self.scalar_type();
  at::ScalarType ct = reduce == Reduce::kNone ? t : CombineType(t);
  Lowering l(op);
  Builder& b = l.b();
  Dims self_dims = Dims1(self), idx_dims = Dims1(index);
  int64_t rank = static_cast<int64_t>(self_dims.size());
  int base = b.Reshape(l.Input(self, ct), self_dims);
  int idx = b.Reshape(l.Input(index, at::kLong), idx_dims);
  // Where the index spans self in every other dim, those are batching dims and the index is read
  // as it is; otherwise index vectors of coordinates (a smaller index).
  bool batched = c10::elementSize(ct) <= 8;
  for (int64_t k = 0; k < rank; ++k) batched &= k == dim || idx_dims[k] == self_dims[k];
  int coords = batched ? AsIndexColumn(b, idx) : AlongDimCoords(b, idx, dim);
  int upd;
  if (src.defined()) {
    upd = b.Reshape(l.Input(src, ct), Dims1(src));
    upd = b.Slice(upd, Dims(rank, 0), idx_dims, Dims(rank, 1));  // only src[:index.shape] is used
  } else {
    upd = b.BroadcastTo(l.Scalar(value, ct), idx_dims);
  }
  auto scatter = [&](int operand, int updates, ReduceKind kind) {
    if (batched) {
      const Dims batch = AllBut(rank, dim);
      return b.Scatter(operand, coords, updates, {}, {dim}, {dim}, kind, /*checked=*/true, batch, batch);
    }
    return b.Scatter(operand, coords, updates, {}, Range(rank), Range(rank), kind, /*checked=*/true);
  };
  int r = ReduceScatter(l, base, upd, reduce, include_self, ct, scatter);
  l.Output(b.Reshape(r, ToDims(out.sizes())), out);
  l.CaptureLocation();
  l.Run();
}

at::Tensor& scatter_src_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src, at::Tensor& out) {
  MetaOut<at::meta::structured_scatter_src> m(out);
  m.meta(self, dim, index, src);
  ScatterInto("aten::scatter", self, dim, index, src, 0, Reduce::kNone, true, out);
  return out;
}
at::Tensor& scatter_value_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Scalar& value, at::Tensor& out) {
  MetaOut<at::meta::structured_scatter_value> m(out);
  m.meta(self, dim, index, value);
  ScatterInto("aten::scatter", self, dim, index, at::Tensor(), value, Reduce::kNone, true, out);
  return out;
}
at::Tensor& scatter_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                               c10::string_view reduce, at::Tensor& out) {
  MetaOut<at::meta::structured_scatter_reduce> m(out);
  m.meta(self, dim, index, src, reduce);
  ScatterInto("aten::scatter", self, dim, index, src, 0, ParseScatterReduce(reduce), true, out);
  return out;
}
at::Tensor& scatter_value_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Scalar& value,
                                     c10::string_view reduce, at::Tensor& out) {
  MetaOut<at::meta::structured_scatter_value_reduce> m(out);
  m.meta(self, dim, index, value, reduce);
  ScatterInto("aten::scatter", self, dim, index, at::Tensor(), value, ParseScatterReduce(reduce), true, out);
  return out;
}
at::Tensor& scatter_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src, at::Tensor& out) {
  MetaOut<at::meta::structured_scatter_add> m(out);
  m.meta(self, dim, index, src);
  ScatterInto("aten::scatter_add", self, dim, index, src, 0, Reduce::kSum, true, out);
  return out;
}
at::Tensor& scatter_reduce_two_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                                   c10::string_view reduce, bool include_self, at::Tensor& out) {
  MetaOut<at::meta::structured_scatter_reduce_two> m(out);
  m.meta(self, dim, index, src, reduce, include_self);
  ScatterInto("aten::scatter_reduce", self, dim, index, src, 0, ParseScatterReduceTwo(reduce), include_self, out);
  return out;
}

// ---- advanced indexing: index.Tensor and index_put_ ------------------------------------------
// The index tensors after masks became their nonzero() coordinates, broadcast together; the
// gathered result has the broadcast shape in place of the indexed dims when those are adjacent,
// else in front (NumPy's rule).
struct AdvIndex {
  std::vector<at::Tensor> tensors;  // one per indexed dim, on self's device
  std::vector<int64_t> dims;        // the indexed dims of self, increasing
  Dims bshape;                      // broadcast shape of the index tensors
  Dims result;                      // shape of self[indices]
  Dims offset_dims;                 // where self's non-indexed dims sit in `result`
};

AdvIndex PrepareIndex(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  at::native::checkIndexTensorTypes(indices, /*allow_int=*/true);
  std::vector<at::Tensor> expanded = at::native::expandTensors(self, indices, /*ensure_same_device=*/true);
  TORCH_CHECK_INDEX(static_cast<int64_t>(expanded.size()) <= self.dim(), "too many indices for tensor of dimension ",
                    self.dim(), " (got ", expanded.size(), ")");
  AdvIndex a;
  std::vector<at::IntArrayRef> shapes;
  for (size_t d = 0; d < expanded.size(); ++d) {
    if (!expanded[d].defined()) continue;
    a.tensors.push_back(expanded[d]);
    a.dims.push_back(static_cast<int64_t>(d));
    shapes.push_back(expanded[d].sizes());
  }
  // Broadcast the index shapes, failing with PyTorch's message.
  at::DimVector bshape;
  bool ok = true;
  for (at::IntArrayRef s : shapes) {
    size_t n = std::max(bshape.size(), s.size());
    at::DimVector next(n, 1);
    for (size_t i = 0; i < n; ++i) {
      int64_t x = i + bshape.size() >= n ? bshape[i + bshape.size() - n] : 1;
      int64_t y = i + s.size() >= n ? s[i + s.size() - n] : 1;
      if (x != y && x != 1 && y != 1) ok = false;
      next[i] = x == 1 ? y : x;
    }
    bshape = next;
  }
  if (!ok) {
    std::ostringstream msg;
    msg << "shape mismatch: indexing tensors could not be broadcast together with shapes ";
    for (size_t i = 0; i < shapes.size(); ++i) msg << (i ? ", " : "") << shapes[i];
    TORCH_CHECK_INDEX(false, msg.str());
  }
  a.bshape = ToDims(bshape);
  bool adjacent = a.dims.empty() || a.dims.back() - a.dims.front() + 1 == static_cast<int64_t>(a.dims.size());
  int64_t pos = adjacent && !a.dims.empty() ? a.dims.front() : 0;
  int64_t nb = static_cast<int64_t>(a.bshape.size());
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (std::find(a.dims.begin(), a.dims.end(), d) != a.dims.end()) continue;
    int64_t at_pos = static_cast<int64_t>(a.offset_dims.size());
    a.offset_dims.push_back(at_pos < pos ? at_pos : at_pos + nb);
  }
  a.result.assign(self.dim() - a.dims.size() + nb, 0);
  for (int64_t i = 0; i < nb; ++i) a.result[pos + i] = a.bshape[i];
  int64_t k = 0;
  for (int64_t d = 0; d < self.dim(); ++d)
    if (std::find(a.dims.begin(), a.dims.end(), d) == a.dims.end()) a.result[a.offset_dims[k++]] = self.size(d);
  return a;
}

// An index into a dim of size 0 cannot be valid; the device never sees such a gather.
void CheckNonEmptyIndexedDims(const at::Tensor& self, const AdvIndex& a) {
  int64_t n = 1;
  for (int64_t d : a.bshape) n *= d;
  if (n == 0) return;
  for (size_t i = 0; i < a.dims.size(); ++i)
    if (self.size(a.dims[i]) == 0)
      TORCH_CHECK_INDEX(false, "index ", a.tensors[i].reshape({-1})[0].item<int64_t>(), " is out of bounds for dimension ",
                        a.dims[i], " with size 0");
}

// The index vectors [*bshape, k] as i64, negative values wrapped as Python does. Values below
// -size stay as they are, so the checked op reports the index the user wrote.
int IndexVectors(Lowering& l, const at::Tensor& self, const AdvIndex& a) {
  Builder& b = l.b();
  std::vector<int> cols;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    int v = b.BroadcastTo(l.Input(a.tensors[i], at::kLong), a.bshape);
    int size = b.ScalarLike(static_cast<double>(self.size(a.dims[i])), v);
    int wrap = b.Binary(OpCode::kAnd, b.Compare(CompareDirection::kLT, v, b.ScalarLike(0, v)),
                        b.Compare(CompareDirection::kGE, v, b.Unary(OpCode::kNegate, size)));
    cols.push_back(AsIndexColumn(b, b.Select(wrap, b.Binary(OpCode::kAdd, v, size), v)));
  }
  return b.Concatenate(cols, static_cast<int64_t>(a.bshape.size()));
}

Dims WindowSlice(const at::Tensor& self, const AdvIndex& a) {
  Dims s = ToDims(self.sizes());
  for (int64_t d : a.dims) s[d] = 1;
  return s;
}

at::Tensor& IndexInto(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices, at::Tensor& out) {
  AdvIndex a = PrepareIndex(self, indices);
  ResizeOut(out, a.result);
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "index_out: self (", self.scalar_type(), ") and result (",
              out.scalar_type(), ") must have the same scalar type");
  if (a.dims.empty()) {
    out.copy_(self);
    return out;
  }
  if (out.numel() == 0) return out;
  CheckNonEmptyIndexedDims(self, a);
  Lowering l("aten::index");
  Builder& b = l.b();
  int src = l.Input(self);
  int r = b.Gather(src, IndexVectors(l, self, a), a.offset_dims, ToDims(a.dims), ToDims(a.dims), WindowSlice(self, a),
                   /*checked=*/true);
  l.Output(r, out);
  l.CaptureLocation();
  l.Run();
  return out;
}

at::Tensor index_tensor(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  at::Tensor out = at::empty({0}, self.options());
  return IndexInto(self, indices, out);
}
at::Tensor& index_tensor_out(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices, at::Tensor& out) {
  return IndexInto(self, indices, out);
}

at::Tensor& index_put_impl_(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                            const at::Tensor& values, bool accumulate, bool unsafe) {
  TORCH_CHECK(self.scalar_type() == values.scalar_type(), "Index put requires the source and destination dtypes match, got ",
              self.scalar_type(), " for the destination and ", values.scalar_type(), " for the source.");
  TORCH_CHECK(values.device() == self.device() || IsCpuScalar(values),
              "Index put requires values on the same device as self, got ", values.device(), " and ", self.device());
  AdvIndex a = PrepareIndex(self, indices);
  TORCH_CHECK(at::is_expandable_to(values.sizes(), a.result), "shape mismatch: value tensor of shape ", values.sizes(),
              " cannot be broadcast to indexing result of shape ", at::IntArrayRef(a.result));
  int64_t n = 1;
  for (int64_t d : a.result) n *= d;
  if (n == 0) return self;
  if (a.dims.empty()) {
    if (accumulate) self.add_(values);
    else self.copy_(values);
    return self;
  }
  CheckNonEmptyIndexedDims(self, a);
  at::ScalarType ct = accumulate ? CombineType(self.scalar_type()) : self.scalar_type();
  Lowering l("aten::index_put_");
  Builder& b = l.b();
  int base = l.Input(self, ct);
  int upd = b.BroadcastTo(TensorOrScalar(l, values, ct), a.result);
  int r = b.Scatter(base, IndexVectors(l, self, a), upd, a.offset_dims, ToDims(a.dims), ToDims(a.dims),
                    accumulate ? ReduceKind::kAdd : ReduceKind::kReplace, /*checked=*/true);
  l.Output(r, self);
  l.CaptureLocation();
  l.Run();
  return self;
}

// ---- embedding backward ----------------------------------------------------------------------
// grad_weight[indices[i]] += grad_output[i]; rows of padding_idx get nothing; with
// scale_grad_by_freq every row is divided by how often its index occurs.
at::Tensor embedding_dense_backward(const at::Tensor& grad_output, const at::Tensor& indices, int64_t num_weights,
                                    int64_t padding_idx, bool scale_grad_by_freq) {
  TORCH_CHECK(indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt,
              "embedding_backward: Expected indices to have type Long or Int, but got ", indices.scalar_type());
  int64_t n = indices.numel();
  int64_t width = grad_output.size(-1);
  at::Tensor grad_weight = at::empty({num_weights, width}, grad_output.options());
  if (grad_weight.numel() == 0) return grad_weight;
  at::ScalarType ct = OpMath(grad_output.scalar_type());
  Lowering l("aten::embedding_dense_backward");
  Builder& b = l.b();
  int zeros = b.BroadcastTo(b.Constant(0, ToDType(ct)), {num_weights, width});
  if (n == 0) {
    l.Output(zeros, grad_weight);
    l.Run();
    return grad_weight;
  }
  int idx = b.Reshape(l.Input(indices, at::kLong), {n});
  int rows = b.Reshape(l.Input(grad_output, ct), {n, width});
  int vec = b.Reshape(idx, {n, 1});
  // Without a padding row (padding_idx -1, or any value no valid index has: an index out of range
  // fails the checked scatter either way) and frequency scaling, the rows are added as they are:
  // the mask's multiply by one was a pass over the whole gradient.
  if (scale_grad_by_freq || (padding_idx >= 0 && padding_idx < num_weights)) {
    int keep = b.Compare(CompareDirection::kNE, idx, b.BroadcastTo(l.Scalar(padding_idx, at::kLong), {n}));
    int scale = b.Convert(keep, ToDType(ct));
    if (scale_grad_by_freq) {
      int counts = b.BroadcastTo(b.Constant(0, ToDType(ct)), {num_weights});
      counts = b.Scatter(counts, vec, b.ScalarLike(1, scale), {}, {0}, {0}, ReduceKind::kAdd, /*checked=*/true);
      int per_row = b.Gather(counts, vec, {}, {0}, {0}, {1}, /*checked=*/true);
      scale = b.Binary(OpCode::kDivide, scale, per_row);
    }
    rows = b.Binary(OpCode::kMultiply, rows, b.BroadcastInDim(scale, {n, width}, {0}));
  }
  int r = b.Scatter(zeros, vec, rows, {1}, {0}, {0}, ReduceKind::kAdd, /*checked=*/true);
  l.Output(r, grad_weight);
  l.CaptureLocation();
  l.Run();
  return grad_weight;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("index_select", index_select);
  m.impl("index_select.out", index_select_out);
  m.impl("gather", gather);
  m.impl("gather.out", gather_out);
  // Functional and in-place scatter forms reach these through ATen's structured wrappers.
  m.impl("scatter.src_out", scatter_src_out);
  m.impl("scatter.value_out", scatter_value_out);
  m.impl("scatter.reduce_out", scatter_reduce_out);
  m.impl("scatter.value_reduce_out", scatter_value_reduce_out);
  m.impl("scatter_add.out", scatter_add_out);
  m.impl("scatter_reduce.two_out", scatter_reduce_two_out);
  m.impl("index.Tensor", index_tensor);
  m.impl("index.Tensor_out", index_tensor_out);
  m.impl("_index_put_impl_", index_put_impl_);
  m.impl("embedding_dense_backward", embedding_dense_backward);
}

}  // namespace tpu::torch_bridge
