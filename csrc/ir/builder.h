// Builder: appends ops to a Graph with result-type inference. The first invalid use is recorded
// and reported by Finish(), so lowering code can chain calls without checking each one.
// Parameters may be added at any point; Finish() numbers them before the ops, as a Graph wants.
#pragma once

#include <vector>

#include "base/status.h"
#include "ir/graph.h"
#include "ir/window.h"

namespace tpu {

class Builder {
 public:
  Builder() {
    types_.reserve(16);
    param_index_.reserve(16);
    graph_.ops.reserve(12);
    graph_.params.reserve(4);
  }

  int Param(const TensorType& type);
  int Constant(double value, DType dtype);  // rank-0
  int Iota(const TensorType& type, int64_t dim);
  int Unary(OpCode code, int x);
  int Convert(int x, DType dtype);
  int Binary(OpCode code, int x, int y);
  int Compare(CompareDirection dir, int x, int y);
  int Select(int pred, int on_true, int on_false);
  int Clamp(int lo, int x, int hi);
  int BroadcastInDim(int x, const Dims& out_dims, const Dims& broadcast_dims);
  int Reshape(int x, const Dims& out_dims);
  int Transpose(int x, const Dims& perm);
  int Slice(int x, const Dims& start, const Dims& limit, const Dims& strides);
  // StableHLO dynamic_slice / dynamic_update_slice: `starts` are i64 scalars, one per dim of x.
  int DynamicSlice(int x, const std::vector<int>& starts, const Dims& sizes);
  int DynamicUpdateSlice(int x, int update, const std::vector<int>& starts);
  int Concatenate(const std::vector<int>& xs, int64_t dim);
  int Pad(int x, int pad_value, const Dims& low, const Dims& high, const Dims& interior);
  int Reduce(int x, int init, const Dims& dims, ReduceKind kind);
  int ArgReduce(int x, int64_t dim, ReduceKind kind);  // i64 indices of max/min along dim
  int DotGeneral(int lhs, int rhs, const Dims& lhs_batch, const Dims& rhs_batch,
                 const Dims& lhs_contract, const Dims& rhs_contract, DType out);
  // Gather/scatter with StableHLO dimension numbers; index_vector_dim is the last index dim.
  // `checked`: an out-of-range index is an error (PyTorch) rather than clamped/skipped (StableHLO).
  // Batching dims (operand_batching_dims / start_indices_batching_dims, and scatter's
  // input_batching_dims / scatter_indices_batching_dims) pair an operand dim with an index dim of
  // the same size: each index position reads (writes) only its own operand position along them.
  // They are stored in attrs.e, the operand's list followed by the indices' list.
  int Gather(int operand, int indices, const Dims& offset_dims, const Dims& collapsed,
             const Dims& start_index_map, const Dims& slice_sizes, bool checked = true,
             const Dims& operand_batching = {}, const Dims& index_batching = {});
  int Scatter(int operand, int indices, int updates, const Dims& update_window_dims,
              const Dims& inserted_window_dims, const Dims& scatter_dims_to_operand,
              ReduceKind combiner, bool checked = true, const Dims& operand_batching = {},
              const Dims& index_batching = {});
  // StableHLO convolution; `out` is the result element type (float32 for bfloat16 operands keeps
  // the accumulation unrounded until the caller converts).
  int Convolution(int lhs, int rhs, const ConvolutionSpec& spec, DType out);
  int ReduceWindow(int x, int init, const WindowSpec& window, ReduceKind kind);
  // For each window: the `index` element at the window's maximum of x (ties: the smallest index;
  // NaN wins, and of several NaNs the largest index: PyTorch's max-pool scan order). x and index
  // have one shape; index is i64. Padding takes part as (lowest value, INT64_MAX).
  int ArgReduceWindow(int x, int index, const WindowSpec& window);
  int Reverse(int x, const Dims& dims);
  // i64 positions of a stable sort of x along `dim` (PyTorch's order: NaN sorts greatest, so
  // last ascending and first descending; equal keys keep their order).
  int Sort(int x, int64_t dim, bool descending);
  int RngBits(int state, const Dims& dims);
  // Bounded dims (Note [Bounded dims in the IR], ir/types.h): x's dim `dim` read as a runtime i32
  // size; x with that dim bounded at its size and `size` (an i32 scalar) elements at run time. A
  // constant `size` equal to the bound makes the dim static again (the padded value).
  int GetDimensionSize(int x, int64_t dim);
  int SetDimensionSize(int x, int size, int64_t dim);  // ui32 Philox bits; state: ui64[2] {seed, offset}
  // x, once every element of `ok` (i1) is true; else the program fails with the kind's message
  // (Note [Check op]). Use the result in place of x.
  int Check(int x, int ok, CheckKind kind, const std::string& message = {});  // message: kAssert
  void Result(int v);
  // Copies `op` (type and attributes as they are) with `operands` in place of its own: how the
  // deferred engine splices an op's program into its window.
  int Append(const Op& op, SmallVector<int, 4> operands);
  int num_values() const { return static_cast<int>(types_.size()); }
  int num_ops() const { return static_cast<int>(graph_.ops.size()); }
  // Calls on_param(type) or on_op(op) for each value from id `first` on, in the order they were
  // added (op operands are builder ids): for fingerprints built as a graph grows.
  template <typename OnParam, typename OnOp>
  void ForEachValueFrom(int first, OnParam on_param, OnOp on_op) const {
    for (int v = first; v < num_values(); ++v) {
      int p = param_index_[v];
      if (p >= 0) on_param(graph_.params[p]);
      else on_op(graph_.ops[-p - 1]);
    }
  }

  // Convenience built from the ops above.
  int ScalarLike(double value, int like);           // constant broadcast to like's type
  int BroadcastTo(int x, const Dims& out_dims);     // numpy-style (trailing-aligned)
  int ConvertIfNeeded(int x, DType dtype);

  // The type of value v; an invalid id gets a placeholder type (the use is reported by Finish()).
  const TensorType& TypeOf(int v) const {
    static const TensorType kInvalid{};
    return v >= 0 && v < static_cast<int>(types_.size()) ? types_[v] : kInvalid;
  }
  const Status& status() const { return status_; }
  // The op that computes value v (null for a parameter), and v's parameter number (-1 for an op).
  const Op* ProducerOf(int v) const {
    return v >= 0 && v < num_values() && param_index_[v] < 0 ? &graph_.ops[-param_index_[v] - 1] : nullptr;
  }
  int ParamNumber(int v) const { return v >= 0 && v < num_values() ? param_index_[v] : -1; }
  // Records `what` as the builder's error unless `cond` holds (the first error is kept).
  bool Require(bool cond, const char* what) { return Check(cond, what); }
  StatusOr<Graph> Finish();
  // Like Finish(), but the graph stays in the builder (valid until Reset()), so a builder that is
  // reused across ops keeps its allocations: the eager path builds one small graph per op.
  StatusOr<const Graph*> FinishInPlace();
  // Empties the builder, keeping its capacity.
  void Reset();

 private:
  int Add(OpCode code, SmallVector<int, 4> operands, TensorType type, Attrs attrs = {});
  bool Check(bool cond, const char* what);
  Graph graph_;               // ops hold builder ids until Finish() renumbers them
  std::vector<TensorType> types_;  // per builder id
  std::vector<int> param_index_;   // per builder id: parameter number, or -1 - (op index) for an op
  std::vector<int> remap_;         // Finish()'s scratch, kept so a pooled builder never allocates
  Status status_;
};

}  // namespace tpu
