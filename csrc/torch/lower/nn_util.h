// Small helpers shared by the non-elementwise nn lowerings (matmul, softmax, norm, loss).
#pragma once

#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>

#include <numeric>

#include "torch/lower/elementwise_util.h"

namespace tpu::torch_bridge {

// The backward of a max pooling (pooling.cc): scatter-adds grad_output at `indices` (flat within
// the last n dims of self) into gi.
void MaxPoolBackwardInto(const char* op, const at::Tensor& grad_output, const at::Tensor& self,
                         const at::Tensor& indices, int n, const at::Tensor& gi);

}  // namespace tpu::torch_bridge

namespace tpu::torch_bridge::nn {

// The result tensor of a structured op: a new tensor, or an out= tensor that must already have
// the result dtype (ATen's structured out= rule), must not overlap itself, and is resized.
inline at::Tensor ResultTensor(const at::Tensor* out, at::IntArrayRef sizes, at::ScalarType dtype,
                               const at::Tensor& like) {
  if (!out) return EmptyLike(sizes, dtype, like);
  TORCH_CHECK(out->scalar_type() == dtype, "Expected out tensor to have dtype ",
              c10::scalarTypeToTypeMeta(dtype), ", but got ", out->dtype(), " instead");
  at::assert_no_internal_overlap(*out);  // an expanded out= has no defined result: ATen refuses it
  ResizeOut(*out, sizes);
  return *out;
}

// A runtime scalar broadcast to `dims` (a parameter, so a changing value does not recompile).
inline int Splat(Lowering& l, const at::Scalar& s, DType t, const Dims& dims) {
  return l.b().BroadcastInDim(l.Scalar(s, ToScalarType(t)), dims, {});
}

// A structural constant broadcast to `dims`.
inline int Fill(Builder& b, double value, DType t, const Dims& dims) {
  return b.BroadcastInDim(b.Constant(value, t), dims, {});
}

// [first, first + n)
inline Dims Range(int64_t first, int64_t n) {
  Dims d(n);
  std::iota(d.begin(), d.end(), first);
  return d;
}

// `dims` without dimension `skip`.
inline Dims Without(const Dims& dims, int64_t skip) {
  Dims r;
  for (int64_t i = 0; i < static_cast<int64_t>(dims.size()); ++i)
    if (i != skip) r.push_back(dims[i]);
  return r;
}

// x (reduced over `dim` of `full`) broadcast back to `full`.
inline int Unreduce(Builder& b, int x, const Dims& full, int64_t dim) {
  return b.BroadcastInDim(x, full, Without(Range(0, full.size()), dim));
}

inline int Sum(Builder& b, int x, const Dims& dims) {
  return b.Reduce(x, b.Constant(0, b.TypeOf(x).dtype), dims, ReduceKind::kAdd);
}

}  // namespace tpu::torch_bridge::nn
