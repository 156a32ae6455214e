// Helpers shared by the lowerings that gather or scatter along one dimension (indexing.cc,
// sort.cc, index_ops.cc).
#pragma once

#include <ATen/ATen.h>

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

// src[..., index[...], ...] along `dim` (torch.gather): src and the i64 index have one rank.
inline int GatherAlongDim(Builder& b, int src, int index_i64, int64_t dim, bool checked = true) {
  int64_t rank = static_cast<int64_t>(b.TypeOf(src).dims.size());
  return b.Gather(src, AlongDimCoords(b, index_i64, dim), {}, Range(rank), Range(rank), Dims(rank, 1), checked);
}

// Rank-0 tensors index like rank-1 tensors of one element.
inline Dims Dims1(const at::Tensor& t) { return t.dim() == 0 ? Dims{1} : ToDims(t.sizes()); }

}  // namespace tpu::torch_bridge
