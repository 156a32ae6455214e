// embedding_bag (sum / mean / max over bags of embedding rows) and its backward, lowered to IR
// gather / scatter.
//
// A bag is the run of indices from offsets[b] up to the next offset; the last bag runs to the end
// of the indices, or with include_last_offset to the terminal offset (the documented meaning;
// PyTorch 2.13's CPU kernel does this only on its fast path). Each index finds its bag by a
// running maximum of the bag numbers scattered to their offsets (BagOfEachIndex), and the rows are
// combined with one scatter into a (bags + 1, dim) buffer whose extra row swallows padding_idx
// entries.
//
// The auxiliary results have the shapes PyTorch's meta kernel gives a non-CPU device:
// offset2bag (n; -1 after a terminal offset), bag_size (offsets.size(0): the non-padding count
// per bag), max_indices (bags, dim) in max mode and empty otherwise. Only this file's backward
// reads them. scale_grad_by_freq divides each row's gradient by its index's count in the batch
// (the documented meaning; CPU 2.13 uses a wrong count when counts differ, pytorch#190063).
//
// Data-dependent errors come from the executor at the user's line: an index outside the weight
// ("index 12 is out of bounds for dimension 0 with size 10"), an offset past the end of the
// indices, or offsets[0] > 0 (its leading indices fall in bag -1). Offsets must be sorted, as
// PyTorch requires; unsorted offsets are not diagnosed.
#include <ATen/TensorUtils.h>
#include <torch/library.h>

#include <limits>

#include "torch/lower/elementwise_util.h"
#include "torch/lower/nn_util.h"

namespace tpu::torch_bridge {
namespace {

using nn::Fill;

constexpr int64_t kSum = 0, kMean = 1, kMax = 2;

void CheckTypes(const at::Tensor& weight, const at::Tensor& indices, const at::Tensor& offsets) {
  at::TensorArg weight_arg(weight, "weight", 1), indices_arg(indices, "indices", 1),
      offsets_arg(offsets, "offsets", 1);
  at::checkScalarTypes("embedding_bag", indices_arg, {at::kLong, at::kInt});
  at::checkScalarTypes("embedding_bag", offsets_arg, {at::kLong, at::kInt});
  at::checkScalarTypes("embedding_bag", weight_arg,
                       {at::kHalf, at::kBFloat16, at::kFloat, at::kDouble});
}

// PyTorch's argument checks (same messages as its CPU kernel).
void CheckArguments(const at::Tensor& weight, const at::Tensor& indices, const at::Tensor& offsets,
                    int64_t mode, const std::optional<at::Tensor>& per_sample_weights,
                    bool include_last_offset) {
  CheckTypes(weight, indices, offsets);
  TORCH_CHECK(weight.dim() == 2, "weight has to be a 2D Tensor, but got Tensor of dimension ",
              weight.dim());
  TORCH_CHECK(offsets.dim() == 1, "offsets has to be a 1D Tensor, but got Tensor of dimension ",
              offsets.dim());
  TORCH_CHECK(mode == kSum || mode == kMean || mode == kMax, "`mode` must be sum, mean, or max.");
  if (include_last_offset)
    TORCH_CHECK(offsets.size(0) >= 1, "include_last_offset: number of offset should be at least 1");
  if (per_sample_weights.has_value() && per_sample_weights->defined()) {
    const at::Tensor& psw = *per_sample_weights;
    TORCH_CHECK(mode == kSum, "embedding_bag: per_sample_weights only supported with mode='sum'");
    at::TensorArg weight_arg(weight, "weight", 1), psw_arg(psw, "per_sample_weights", 1);
    at::checkSameType("embedding_bag", weight_arg, psw_arg);
    TORCH_CHECK(psw.dim() == 1,
                "Expected per_sample_weights.value().dim() == 1 to be true, but got false.");
    TORCH_CHECK(psw.numel() == indices.numel(),
                "Expected per_sample_weights.value().numel() == indices.numel() to be true, but "
                "got false.");
  }
  CheckSameDevice("embedding_bag", {&weight, &indices, &offsets});
}

int I64(Builder& b, double v, const Dims& dims) { return Fill(b, v, DType::kI64, dims); }

// (n) i64 -> (n, 1): index vectors for a gather/scatter along dimension 0.
int Column(Builder& b, int v) {
  Dims d = b.TypeOf(v).dims;
  d.push_back(1);
  return b.Reshape(v, d);
}

// x[idx] for a rank-1 x and any-shaped idx.
int Take(Builder& b, int x, int idx, bool checked) {
  return b.Gather(x, Column(b, idx), {}, {0}, {0}, {1}, checked);
}

// Rows of a (rows, dim) matrix: (n) indices -> (n, dim).
int TakeRows(Builder& b, int m, int idx, bool checked) {
  return b.Gather(m, Column(b, idx), {1}, {0}, {0}, {1, b.TypeOf(m).dims[1]}, checked);
}

// rows (n, dim) combined into buffer (k, dim) at rows idx (n).
int ScatterRows(Builder& b, int buffer, int idx, int rows, ReduceKind kind) {
  return b.Scatter(buffer, Column(b, idx), rows, {1}, {0}, {0}, kind, /*checked=*/true);
}

// For every index position i in [0, n), the bag it belongs to: the largest b with
// starts[b] <= i (-1 before the first bag). Each bag's number is scattered to its start (max: of
// bags starting at one position, an empty bag before its successor, the last), and a running
// maximum carries it on: ceil(log2(n)) shifted maxima of an (n) vector. The (n, bags) table of
// `starts[b] <= i` this replaced cost a DLRM feature 34 of its 44 us; a binary search, ~11 ops per
// halving of the bags.
int BagOfEachIndex(Builder& b, int starts, int64_t bags, int64_t n) {
  int marks = b.Scatter(I64(b, -1, {n + 1}), Column(b, starts), b.Iota(TensorType{DType::kI64, {bags}}, 0), {}, {0},
                        {0}, ReduceKind::kMax, /*checked=*/true);  // (a start of n: past every index)
  int x = b.Slice(marks, {0}, {n}, {1});
  int none = b.Constant(-1, DType::kI64);
  for (int64_t shift = 1; shift < n; shift *= 2)
    x = b.Binary(OpCode::kMaximum, x, b.Pad(b.Slice(x, {0}, {n - shift}, {1}), none, {shift}, {0}, {0}));
  return x;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> EmbeddingBagForward(
    const at::Tensor& weight, const at::Tensor& indices_in, const at::Tensor& offsets, int64_t mode,
    const std::optional<at::Tensor>& per_sample_weights, bool include_last_offset,
    int64_t padding_idx) {
  CheckArguments(weight, indices_in, offsets, mode, per_sample_weights, include_last_offset);
  const at::Tensor indices = indices_in.reshape({-1});
  const int64_t n = indices.numel(), dim = weight.size(1), num_offsets = offsets.size(0);
  const int64_t bags = include_last_offset ? num_offsets - 1 : num_offsets;
  at::Tensor output = EmptyLike({bags, dim}, weight.scalar_type(), weight);
  at::Tensor offset2bag = EmptyLike({n}, indices.scalar_type(), weight);
  at::Tensor bag_size = EmptyLike({num_offsets}, indices.scalar_type(), weight);
  at::Tensor max_indices =
      EmptyLike({mode == kMax ? bags : 0, mode == kMax ? dim : 0}, indices.scalar_type(), weight);
  if (mode != kMax) max_indices = max_indices.view({0});
  if (bags == 0) {
    offset2bag.zero_();
    bag_size.zero_();
    return {output, offset2bag, bag_size, max_indices};
  }
  const at::ScalarType ct = OpMath(weight.scalar_type());
  const DType t = ToDType(ct);
  Lowering l("aten::_embedding_bag");
  Builder& b = l.b();
  l.CaptureLocation();
  if (n == 0) {  // every bag is empty: zeros
    l.Output(Fill(b, 0, t, {bags, dim}), output);
    l.Output(I64(b, 0, {num_offsets}), bag_size);
    if (mode == kMax) l.Output(I64(b, 0, {bags, dim}), max_indices);
    l.Run();
    return {output, offset2bag, bag_size, max_indices};
  }
  int idx = l.Input(indices, at::kLong);
  // Every offset must point into [0, n]: gathering iota(n + 1) at the offsets returns them
  // unchanged and raises for one that does not.
  int offs = Take(b, b.Iota(TensorType{DType::kI64, {n + 1}}, 0), l.Input(offsets, at::kLong),
                  /*checked=*/true);
  int starts = b.Slice(offs, {0}, {bags}, {1});
  int bag = BagOfEachIndex(b, starts, bags, n);
  int keep =
      b.Compare(CompareDirection::kNE, idx, b.BroadcastTo(l.Scalar(padding_idx, at::kLong), {n}));
  if (include_last_offset) {
    // The terminal offset ends the last bag: indices after it belong to no bag (bag -1).
    int end = b.BroadcastInDim(b.Reshape(b.Slice(offs, {bags}, {bags + 1}, {1}), {}), {n}, {});
    int inside = b.Compare(CompareDirection::kLT, b.Iota(TensorType{DType::kI64, {n}}, 0), end);
    bag = b.Select(inside, bag, I64(b, -1, {n}));
    keep = b.Binary(OpCode::kAnd, keep, inside);
  }
  int target =
      b.Select(keep, bag, I64(b, static_cast<double>(bags), {n}));  // padding -> the extra row
  int counts = b.Scatter(I64(b, 0, {bags + 1}), Column(b, target), I64(b, 1, {n}), {}, {0}, {0},
                         ReduceKind::kAdd,
                         /*checked=*/true);
  counts = b.Slice(counts, {0}, {bags}, {1});
  int nonempty = b.BroadcastInDim(b.Compare(CompareDirection::kGT, counts, I64(b, 0, {bags})),
                                  {bags, dim}, {0});
  int rows = TakeRows(b, l.Input(weight, ct), idx, /*checked=*/true);
  int out;
  if (mode == kMax) {
    double lowest = -std::numeric_limits<double>::infinity();
    int best = ScatterRows(b, Fill(b, lowest, t, {bags + 1, dim}), target, rows, ReduceKind::kMax);
    // The first position in each bag that holds the maximum (CPU's tie rule), then its row id.
    int is_best =
        b.Compare(CompareDirection::kEQ, rows, TakeRows(b, best, target, /*checked=*/true));
    is_best = b.Binary(OpCode::kAnd, is_best, b.BroadcastInDim(keep, {n, dim}, {0}));
    int pos = b.Select(is_best, b.Iota(TensorType{DType::kI64, {n, dim}}, 0),
                       I64(b, static_cast<double>(n), {n, dim}));
    int first = ScatterRows(b, I64(b, static_cast<double>(n), {bags + 1, dim}), target, pos,
                            ReduceKind::kMin);
    first = b.Slice(first, {0, 0}, {bags, dim}, {1, 1});
    int idx_or_zero = b.Concatenate({idx, I64(b, 0, {1})}, 0);  // empty bags report row 0, as CPU
    l.Output(Take(b, idx_or_zero, first, /*checked=*/true), max_indices);
    out = b.Slice(best, {0, 0}, {bags, dim}, {1, 1});
  } else {
    if (per_sample_weights.has_value() && per_sample_weights->defined())
      rows = b.Binary(OpCode::kMultiply, rows,
                      b.BroadcastInDim(l.Input(*per_sample_weights, ct), {n, dim}, {0}));
    out = ScatterRows(b, Fill(b, 0, t, {bags + 1, dim}), target, rows, ReduceKind::kAdd);
    out = b.Slice(out, {0, 0}, {bags, dim}, {1, 1});
    if (mode == kMean) {
      int denom = b.Convert(b.Binary(OpCode::kMaximum, counts, I64(b, 1, {bags})), t);
      out = b.Binary(OpCode::kDivide, out, b.BroadcastInDim(denom, {bags, dim}, {0}));
    }
  }
  out = b.Select(nonempty, out, Fill(b, 0, t, {bags, dim}));  // an empty bag is zeros
  l.Output(out, output);
  l.Output(bag, offset2bag);
  l.Output(num_offsets > bags
               ? b.Pad(counts, b.Constant(0, DType::kI64), {0}, {num_offsets - bags}, {0})
               : counts,
           bag_size);
  l.Run();
  return {output, offset2bag, bag_size, max_indices};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> embedding_bag(
    const at::Tensor& weight, const at::Tensor& indices, const at::Tensor& offsets,
    bool scale_grad_by_freq, int64_t mode, bool sparse,
    const std::optional<at::Tensor>& per_sample_weights, bool include_last_offset,
    int64_t padding_idx) {
  return EmbeddingBagForward(weight, indices, offsets, mode, per_sample_weights,
                             include_last_offset, padding_idx);
}

// ---- backward -----------------------------------------------------------------------------------
// Whether index position i contributes: not padding, and inside a bag (offset2bag -1 marks the
// indices after include_last_offset's terminal offset).
int InBag(Lowering& l, int idx, int bag, int64_t padding_idx) {
  Builder& b = l.b();
  Dims n = b.TypeOf(idx).dims;
  int keep =
      b.Compare(CompareDirection::kNE, idx, b.BroadcastTo(l.Scalar(padding_idx, at::kLong), n));
  return b.Binary(OpCode::kAnd, keep, b.Compare(CompareDirection::kGE, bag, I64(b, 0, n)));
}

at::Tensor embedding_bag_dense_backward(const at::Tensor& grad, const at::Tensor& indices_in,
                                        const at::Tensor& offset2bag, const at::Tensor& bag_size,
                                        const at::Tensor& maximum_indices,
                                        c10::SymInt num_weights_s, bool scale_grad_by_freq,
                                        int64_t mode,
                                        const std::optional<at::Tensor>& per_sample_weights,
                                        int64_t padding_idx) {
  const int64_t num_weights = num_weights_s.expect_int();
  TORCH_CHECK(grad.dim() == 2, "embedding_bag backward: expected a 2-D gradient, got ", grad.dim(),
              "-D");
  const at::Tensor indices = indices_in.reshape({-1});
  const int64_t n = indices.numel(), bags = grad.size(0), dim = grad.size(1);
  at::Tensor grad_weight = EmptyLike({num_weights, dim}, grad.scalar_type(), grad);
  if (grad_weight.numel() == 0) return grad_weight;
  const at::ScalarType ct = OpMath(grad.scalar_type());
  const DType t = ToDType(ct);
  Lowering l("aten::_embedding_bag_dense_backward");
  Builder& b = l.b();
  l.CaptureLocation();
  if (n == 0 || bags == 0) {
    l.Output(Fill(b, 0, t, {num_weights, dim}), grad_weight);
    l.Run();
    return grad_weight;
  }
  int g = l.Input(grad, ct);
  int sizes = b.Slice(l.Input(bag_size, at::kLong), {0}, {bags}, {1});
  int nonempty = b.Compare(CompareDirection::kGT, sizes, I64(b, 0, {bags}));
  int r;
  if (mode == kMax) {
    // grad_weight[max_indices[b, d], d] += grad[b, d] for every non-empty bag.
    int rows = l.Input(maximum_indices, at::kLong);
    int vec = b.Concatenate(
        {b.Reshape(rows, {bags, dim, 1}), b.Iota(TensorType{DType::kI64, {bags, dim, 1}}, 1)}, 2);
    int upd = b.Select(b.BroadcastInDim(nonempty, {bags, dim}, {0}), g, Fill(b, 0, t, {bags, dim}));
    r = b.Scatter(Fill(b, 0, t, {num_weights, dim}), vec, upd, {}, {0, 1}, {0, 1}, ReduceKind::kAdd,
                  true);
  } else {
    int idx = l.Input(indices, at::kLong);
    int bag = l.Input(offset2bag, at::kLong);
    int in_bag = InBag(l, idx, bag, padding_idx);
    bag = b.Binary(OpCode::kMaximum, bag, I64(b, 0, {n}));
    int rows = TakeRows(b, g, bag, /*checked=*/true);  // (n, dim): each index's bag gradient
    int scale = b.Convert(in_bag, t);
    if (mode == kMean) {
      int count = Take(b, sizes, bag, /*checked=*/true);
      scale = b.Binary(OpCode::kDivide, scale,
                       b.Convert(b.Binary(OpCode::kMaximum, count, I64(b, 1, {n})), t));
    }
    if (per_sample_weights.has_value() && per_sample_weights->defined())
      scale = b.Binary(OpCode::kMultiply, scale, l.Input(*per_sample_weights, ct));
    if (scale_grad_by_freq) {  // divided by how often each row is used in the whole batch
      int freq = b.Scatter(Fill(b, 0, t, {num_weights}), Column(b, idx), Fill(b, 1, t, {n}), {},
                           {0}, {0}, ReduceKind::kAdd, /*checked=*/true);
      scale = b.Binary(OpCode::kDivide, scale, Take(b, freq, idx, /*checked=*/true));
    }
    rows = b.Binary(OpCode::kMultiply, rows, b.BroadcastInDim(scale, {n, dim}, {0}));
    r = ScatterRows(b, Fill(b, 0, t, {num_weights, dim}), idx, rows, ReduceKind::kAdd);
  }
  l.Output(r, grad_weight);
  l.Run();
  return grad_weight;
}

at::Tensor embedding_bag_backward(const at::Tensor& grad, const at::Tensor& indices,
                                  const at::Tensor& offsets, const at::Tensor& offset2bag,
                                  const at::Tensor& bag_size, const at::Tensor& maximum_indices,
                                  c10::SymInt num_weights, bool scale_grad_by_freq, int64_t mode,
                                  bool sparse, const std::optional<at::Tensor>& per_sample_weights,
                                  int64_t padding_idx) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      !sparse,
      "embedding_bag: sparse gradients (sparse=True) are not supported on the "
      "tpu device; use sparse=False");
  return embedding_bag_dense_backward(grad, indices, offset2bag, bag_size, maximum_indices,
                                      std::move(num_weights), scale_grad_by_freq, mode,
                                      per_sample_weights, padding_idx);
}

// d per_sample_weights[i] = <grad[bag of i], weight[indices[i]]>, zero for padding entries.
at::Tensor embedding_bag_per_sample_weights_backward(
    const at::Tensor& grad, const at::Tensor& weight, const at::Tensor& indices_in,
    const at::Tensor& offsets, const at::Tensor& offset2bag, int64_t mode, int64_t padding_idx) {
  TORCH_CHECK(mode == kSum,
              "embedding_bag_backward: per_sample_weights only supported for mode='sum'");
  const at::Tensor indices = indices_in.reshape({-1});
  const int64_t n = indices.numel();
  at::Tensor out = EmptyLike({n}, grad.scalar_type(), grad);
  if (n == 0) return out;
  const at::ScalarType ct = OpMath(grad.scalar_type());
  Lowering l("aten::_embedding_bag_per_sample_weights_backward");
  Builder& b = l.b();
  l.CaptureLocation();
  int idx = l.Input(indices, at::kLong);
  int bag = l.Input(offset2bag, at::kLong);
  int in_bag = InBag(l, idx, bag, padding_idx);
  int g = TakeRows(b, l.Input(grad, ct), b.Binary(OpCode::kMaximum, bag, I64(b, 0, {n})),
                   /*checked=*/true);
  int w = TakeRows(b, l.Input(weight, ct), idx, /*checked=*/true);
  int dot = nn::Sum(b, b.Binary(OpCode::kMultiply, g, w), {1});
  l.Output(b.Select(in_bag, dot, Fill(b, 0, ToDType(ct), {n})), out);
  l.Run();
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_embedding_bag", embedding_bag);
  m.impl("_embedding_bag_forward_only", embedding_bag);
  m.impl("_embedding_bag_backward", embedding_bag_backward);
  m.impl("_embedding_bag_dense_backward", embedding_bag_dense_backward);
  m.impl("_embedding_bag_per_sample_weights_backward", embedding_bag_per_sample_weights_backward);
}

}  // namespace tpu::torch_bridge
