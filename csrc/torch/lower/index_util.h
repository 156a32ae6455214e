// Helpers shared by the lowerings that gather or scatter along one dimension (indexing.cc,
// sort.cc, index_ops.cc).
#pragma once

#include <ATen/ATen.h>

#include <limits>

#include "ir/builder.h"
#include "torch/lower/elementwise_util.h"

namespace tpu::torch_bridge {

// [*dims] i64 value -> [*dims, 1], ready to be concatenated into index vectors.
inline int AsIndexColumn(Builder& b, int v) {
  Dims d = b.TypeOf(v).dims;
  d.push_back(1);
  return b.Reshape(v, d);
}

// Index vectors for gather/scatter along `dim`: coordinate k is the position along k, except at
// `dim` where it is the index value. Result [*shape, rank].
inline int AlongDimCoords(Builder& b, int index_i64, int64_t dim) {
  const Dims shape = b.TypeOf(index_i64).dims;
  std::vector<int> cols;
  for (int64_t k = 0; k < static_cast<int64_t>(shape.size()); ++k)
    cols.push_back(AsIndexColumn(b, k == dim ? index_i64 : b.Iota(TensorType{DType::kI64, shape}, k)));
  return b.Concatenate(cols, static_cast<int64_t>(shape.size()));
}

inline Dims Range(int64_t n) {
  Dims d(n);
  for (int64_t i = 0; i < n; ++i) d[i] = i;
  return d;
}

// Every dim of a rank-`rank` tensor but `dim`: the batching dims of a gather / scatter along dim.
inline Dims AllBut(int64_t rank, int64_t dim) {
  Dims d;
  for (int64_t k = 0; k < rank; ++k)
    if (k != dim) d.push_back(k);
  return d;
}

// src[..., index[...], ...] along `dim` (torch.gather): src and the i64 index have one rank, the
// index no larger than src in the other dims. One gather whose other dims are batching dims: the
// index is read as it is, without index vectors of coordinates.
inline int GatherAlongDim(Builder& b, int src, int index_i64, int64_t dim, bool checked = true) {
  const Dims shape = b.TypeOf(index_i64).dims;
  const int64_t rank = static_cast<int64_t>(shape.size());
  Dims limit = b.TypeOf(src).dims;
  bool cut = false;
  for (int64_t k = 0; k < rank; ++k)
    if (k != dim && limit[k] != shape[k]) limit[k] = shape[k], cut = true;
  if (cut) src = b.Slice(src, Dims(rank, 0), limit, Dims(rank, 1));  // batching dims pair equal sizes
  const Dims batch = AllBut(rank, dim);
  return b.Gather(src, AsIndexColumn(b, index_i64), {}, {dim}, {dim}, Dims(rank, 1), checked, batch, batch);
}

// Scatters slices (the operand's shape with n at `dim`) into the operand at i64 indices [n, 1]
// along `dim` (index_add, index_copy, a gather's backward).
struct SliceScatter {
  Builder& b;
  int idx;  // [n, 1] i64
  int64_t dim;
  int operator()(int operand, int updates, ReduceKind kind) const {
    Dims window;
    for (int64_t d = 0; d < static_cast<int64_t>(b.TypeOf(updates).dims.size()); ++d)
      if (d != dim) window.push_back(d);
    return b.Scatter(operand, idx, updates, window, {dim}, {dim}, kind, /*checked=*/true);
  }
};

// Inclusive prefix sum of x along dim (scan.cc): positions of the set elements of a mask.
int PrefixSum(Builder& b, int x, int64_t dim);
// Inclusive running maximum of a floating-point x along dim (scan.cc).
int PrefixMax(Builder& b, int x, int64_t dim);

// Rank-0 tensors index like rank-1 tensors of one element.
inline Dims Dims1(const at::Tensor& t) { return t.dim() == 0 ? Dims{1} : ToDims(t.sizes()); }

// Where scatter combiners compute: the executor combines in f32/f64/i32/i64 only, and PyTorch
// accumulates reduced-precision floats in float.
inline at::ScalarType CombineType(at::ScalarType t) {
  if (at::isFloatingType(t)) return OpMath(t);
  if (t == at::kInt || t == at::kLong) return t;
  return at::kLong;
}

enum class Reduce { kNone, kSum, kProd, kMean, kMax, kMin };

inline Reduce ParseScatterReduceTwo(c10::string_view reduce) {
  if (reduce == "sum") return Reduce::kSum;
  if (reduce == "prod") return Reduce::kProd;
  if (reduce == "mean") return Reduce::kMean;
  if (reduce == "amax") return Reduce::kMax;
  if (reduce == "amin") return Reduce::kMin;
  TORCH_CHECK(false, "reduce argument must be either sum, prod, mean, amax or amin, got ", reduce);
}

inline ReduceKind Combiner(Reduce r) {
  switch (r) {
    case Reduce::kNone: return ReduceKind::kReplace;
    case Reduce::kSum: case Reduce::kMean: return ReduceKind::kAdd;
    case Reduce::kProd: return ReduceKind::kMul;
    case Reduce::kMax: return ReduceKind::kMax;
    case Reduce::kMin: return ReduceKind::kMin;
  }
  return ReduceKind::kReplace;
}

// The value a reduction starts from where include_self=False drops self's element.
inline at::Scalar Identity(Reduce r, at::ScalarType t) {
  bool fp = at::isFloatingType(t);
  double inf = std::numeric_limits<double>::infinity();
  switch (r) {
    case Reduce::kProd: return 1;
    case Reduce::kMax:
      return fp ? at::Scalar(-inf) : at::Scalar(t == at::kInt ? int64_t{INT32_MIN} : INT64_MIN);
    case Reduce::kMin:
      return fp ? at::Scalar(inf) : at::Scalar(t == at::kInt ? int64_t{INT32_MAX} : INT64_MAX);
    default: return 0;
  }
}

// base combined with `upd` by `reduce` through scatter(operand, updates, ReduceKind), which
// scatters values shaped as upd into values shaped as base. include_self=False: positions that
// receive an element start from the reduction's identity; mean divides by the count received
// (plus one with include_self), flooring for integers, as PyTorch does.
template <typename Scatter>
int ReduceScatter(Lowering& l, int base, int upd, Reduce reduce, bool include_self, at::ScalarType ct,
                  Scatter&& scatter) {
  Builder& b = l.b();
  Dims self_dims = b.TypeOf(base).dims;
  if (!include_self) {
    // Positions that receive an element start from the reduction's identity instead of self.
    base = scatter(base, b.BroadcastTo(l.Scalar(Identity(reduce, ct), ct), b.TypeOf(upd).dims), ReduceKind::kReplace);
  }
  int r = scatter(base, upd, Combiner(reduce));
  if (reduce == Reduce::kMean) {
    int count = b.BroadcastTo(b.Constant(include_self ? 1 : 0, ToDType(ct)), self_dims);
    count = scatter(count, b.ScalarLike(1, upd), ReduceKind::kAdd);
    count = b.Select(b.Compare(CompareDirection::kEQ, count, b.ScalarLike(0, count)), b.ScalarLike(1, count), count);
    int q = b.Binary(OpCode::kDivide, r, count);
    if (!at::isFloatingType(ct)) {  // PyTorch floors integer means (counts are positive)
      int rem = b.Binary(OpCode::kRemainder, r, count);
      int adjust = b.Compare(CompareDirection::kLT, rem, b.ScalarLike(0, rem));
      q = b.Select(adjust, b.Binary(OpCode::kSubtract, q, b.ScalarLike(1, q)), q);
    }
    r = q;
  }
  return r;
}

}  // namespace tpu::torch_bridge
