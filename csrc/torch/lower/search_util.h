// The binary search of PyTorch's CPU searchsorted, shared by searchsorted/bucketize (search.cc)
// and multinomial's sampling with replacement (sampling.cc).
#pragma once

#include "torch/lower/index_util.h"

namespace tpu::torch_bridge {

// For each value of `values` [rows, k], the position in row r of `seq` [rows, n] that CPU's loop
//   start = 0, end = n; while (start < end) { mid = start + (end - start) / 2;
//                                             if (go_right(seq[mid], value)) start = mid + 1;
//                                             else end = mid; }
// ends at, as i64 [rows, k]. The loop runs bit_length(n) rounds (the most it can take) with the
// finished lanes masked, so every lane makes CPU's comparisons: the results agree for any data,
// NaN and unsorted rows included. go_right(Builder&, seq_value, value) -> bool value.
template <typename GoRight>
int BinarySearch(Builder& b, int seq, int values, GoRight&& go_right) {
  Dims dims = b.TypeOf(values).dims;
  int64_t n = b.TypeOf(seq).dims[1];
  int start = b.BroadcastTo(b.Constant(0, DType::kI64), dims);
  int end = b.BroadcastTo(b.Constant(static_cast<double>(n), DType::kI64), dims);
  int one = b.ScalarLike(1, start), two = b.ScalarLike(2, start);
  int last = b.ScalarLike(static_cast<double>(n - 1), start);
  for (int64_t w = n; w > 0; w >>= 1) {
    int active = b.Compare(CompareDirection::kLT, start, end);
    int mid = b.Binary(OpCode::kAdd, start, b.Binary(OpCode::kDivide, b.Binary(OpCode::kSubtract, end, start), two));
    int probe = GatherAlongDim(b, seq, b.Binary(OpCode::kMinimum, mid, last), 1, /*checked=*/false);
    int right = go_right(b, probe, values);
    start = b.Select(b.Binary(OpCode::kAnd, active, right), b.Binary(OpCode::kAdd, mid, one), start);
    end = b.Select(b.Binary(OpCode::kAnd, active, b.Unary(OpCode::kNot, right)), mid, end);
  }
  return start;
}

}  // namespace tpu::torch_bridge
