#include "ir/builder.h"

#include <algorithm>

namespace tpu {

bool Builder::Check(bool cond, const char* what) {
  if (!cond && status_.ok()) status_ = InvalidArgument(std::string("IR builder: ") + what);
  return cond;
}

int Builder::Add(OpCode code, SmallVector<int, 4> operands, TensorType type, Attrs attrs) {
  // On the eager path for every op: operands live inline, and the op is built in place.
  for (int o : operands) {
    if (!Check(o >= 0 && o < static_cast<int>(types_.size()), "operand is not a value")) {
      operands.clear();
      break;
    }
    if (types_[o].bounded && !BoundedOperandsAllowed(code) && status_.ok())
      status_ = InvalidArgument(std::string("IR builder: ") + OpName(code) +
                                " does not take an operand with a bounded dim (Note [Bounded dims in the IR])");
  }
  types_.push_back(type);
  param_index_.push_back(-1 - static_cast<int>(graph_.ops.size()));
  Op& op = graph_.ops.emplace_back();
  op.code = code;
  op.operands = std::move(operands);
  op.type = std::move(type);
  op.attrs = std::move(attrs);
  return static_cast<int>(types_.size()) - 1;
}

int Builder::Param(const TensorType& type) {
  Check(!type.bounded, "a parameter is a dense buffer: it has no bounded dim");
  types_.push_back(type);
  param_index_.push_back(graph_.num_params());
  graph_.params.push_back(type);
  return static_cast<int>(types_.size()) - 1;
}

int Builder::Constant(double value, DType dtype) {
  Attrs a;
  a.f = value;
  return Add(OpCode::kConstant, {}, TensorType{dtype, {}}, std::move(a));
}

int Builder::Iota(const TensorType& type, int64_t dim) {
  Check(dim >= 0 && dim < type.rank(), "iota dimension out of range");
  Check(!type.bounded, "an iota is static (set_dimension_size bounds it)");
  Attrs a;
  a.i = dim;
  return Add(OpCode::kIota, {}, type, std::move(a));
}

int Builder::Unary(OpCode code, int x) {
  Check(GetOpKind(code) == OpKind::Unary && code != OpCode::kConvert, "not a unary op");
  TensorType t = TypeOf(x);
  if (code == OpCode::kIsFinite) t.dtype = DType::kBool;
  return Add(code, {x}, std::move(t));
}

int Builder::Convert(int x, DType dtype) {
  TensorType t = TypeOf(x);
  t.dtype = dtype;
  return Add(OpCode::kConvert, {x}, std::move(t));
}

int Builder::ConvertIfNeeded(int x, DType dtype) {
  return TypeOf(x).dtype == dtype ? x : Convert(x, dtype);
}

int Builder::Binary(OpCode code, int x, int y) {
  Check(GetOpKind(code) == OpKind::Binary && code != OpCode::kCompare, "not a binary op");
  Check(TypeOf(x) == TypeOf(y), "binary operands must have the same type");
  return Add(code, {x, y}, TypeOf(x));
}

int Builder::Compare(CompareDirection dir, int x, int y) {
  Check(TypeOf(x) == TypeOf(y), "compare operands must have the same type");
  Attrs a;
  a.kind = static_cast<int64_t>(dir);
  return Add(OpCode::kCompare, {x, y}, TensorType{DType::kBool, TypeOf(x).dims, TypeOf(x).bounded}, std::move(a));
}

int Builder::Select(int pred, int on_true, int on_false) {
  Check(TypeOf(pred).dtype == DType::kBool, "select predicate must be i1");
  Check(TypeOf(pred).dims == TypeOf(on_true).dims && TypeOf(pred).bounded == TypeOf(on_true).bounded,
        "select predicate shape mismatch");
  Check(TypeOf(on_true) == TypeOf(on_false), "select branches must have the same type");
  return Add(OpCode::kSelect, {pred, on_true, on_false}, TypeOf(on_true));
}

int Builder::Clamp(int lo, int x, int hi) {
  Check(TypeOf(lo) == TypeOf(x) && TypeOf(hi) == TypeOf(x), "clamp operands must match");
  return Add(OpCode::kClamp, {lo, x, hi}, TypeOf(x));
}

int Builder::BroadcastInDim(int x, const Dims& out_dims, const Dims& bdims) {
  const TensorType& in = TypeOf(x);
  if (Check(static_cast<int>(bdims.size()) == in.rank(), "broadcast_dimensions size != rank")) {
    for (int i = 0; i < in.rank(); ++i) {
      Check(bdims[i] >= 0 && bdims[i] < static_cast<int64_t>(out_dims.size()) &&
                (in.dims[i] == 1 || in.dims[i] == out_dims[bdims[i]]),
            "broadcast_in_dim dimension mismatch");
    }
  }
  TensorType t{in.dtype, out_dims};
  for (int i = 0; i < in.rank() && i < static_cast<int>(bdims.size()); ++i)
    if (in.IsBounded(i) && bdims[i] >= 0 && bdims[i] < 64) t.bounded |= uint64_t{1} << bdims[i];
  Attrs a;
  a.a = bdims;
  return Add(OpCode::kBroadcastInDim, {x}, std::move(t), std::move(a));
}

int Builder::BroadcastTo(int x, const Dims& out_dims) {
  const TensorType& in = TypeOf(x);
  if (in.dims == out_dims) return x;
  int offset = static_cast<int>(out_dims.size()) - in.rank();
  if (!Check(offset >= 0, "cannot broadcast to a lower rank")) return x;
  Dims bdims(in.rank());
  for (int i = 0; i < in.rank(); ++i) bdims[i] = i + offset;
  return BroadcastInDim(x, out_dims, bdims);
}

int Builder::ScalarLike(double value, int like) {
  const TensorType t = TypeOf(like);  // a copy: Constant() grows the type table
  int c = Constant(value, t.dtype);
  return t.rank() == 0 ? c : BroadcastInDim(c, t.dims, {});
}

int Builder::Reshape(int x, const Dims& out_dims) {
  TensorType t{TypeOf(x).dtype, out_dims};
  Check(t.NumElements() == TypeOf(x).NumElements(), "reshape changes the element count");
  return Add(OpCode::kReshape, {x}, std::move(t));
}

int Builder::Transpose(int x, const Dims& perm) {
  const TensorType& in = TypeOf(x);
  TensorType t{in.dtype, {}};
  if (Check(static_cast<int>(perm.size()) == in.rank(), "permutation size != rank")) {
    for (int64_t p : perm) {
      if (!Check(p >= 0 && p < in.rank(), "permutation out of range")) break;
      if (in.IsBounded(static_cast<int>(p))) t.bounded |= uint64_t{1} << t.dims.size();
      t.dims.push_back(in.dims[p]);
    }
  }
  Attrs a;
  a.a = perm;
  return Add(OpCode::kTranspose, {x}, std::move(t), std::move(a));
}

int Builder::Slice(int x, const Dims& start, const Dims& limit, const Dims& strides) {
  const TensorType& in = TypeOf(x);
  TensorType t{in.dtype, {}};
  if (Check(static_cast<int>(start.size()) == in.rank() && limit.size() == start.size() &&
                strides.size() == start.size(),
            "slice attribute sizes != rank")) {
    for (int i = 0; i < in.rank(); ++i) {
      bool ok = Check(start[i] >= 0 && start[i] <= limit[i] && limit[i] <= in.dims[i] && strides[i] > 0,
                      "slice bounds out of range");
      t.dims.push_back(ok ? (limit[i] - start[i] + strides[i] - 1) / strides[i] : 0);
    }
  }
  Attrs a;
  a.a = start;
  a.b = limit;
  a.c = strides;
  return Add(OpCode::kSlice, {x}, std::move(t), std::move(a));
}

int Builder::Concatenate(const std::vector<int>& xs, int64_t dim) {
  if (!Check(!xs.empty(), "concatenate needs an operand")) return Add(OpCode::kConcatenate, xs, {});
  TensorType t = TypeOf(xs[0]);
  if (!Check(dim >= 0 && dim < t.rank(), "concatenate dimension out of range"))
    return Add(OpCode::kConcatenate, xs, std::move(t));
  t.dims[dim] = 0;
  for (int x : xs) {
    const TensorType& o = TypeOf(x);
    if (!Check(o.dtype == t.dtype && o.rank() == t.rank(), "concatenate operands differ")) continue;
    for (int i = 0; i < t.rank(); ++i)
      if (i != dim) Check(o.dims[i] == TypeOf(xs[0]).dims[i], "concatenate shape mismatch");
    t.dims[dim] += o.dims[dim];
  }
  Attrs a;
  a.i = dim;
  return Add(OpCode::kConcatenate, xs, std::move(t), std::move(a));
}

int Builder::Pad(int x, int pad_value, const Dims& low, const Dims& high, const Dims& interior) {
  const TensorType& in = TypeOf(x);
  TensorType t{in.dtype, in.dims};
  Check(TypeOf(pad_value).rank() == 0 && TypeOf(pad_value).dtype == in.dtype, "pad value type");
  if (Check(static_cast<int>(low.size()) == in.rank() && high.size() == low.size() &&
                interior.size() == low.size(),
            "pad attribute sizes != rank")) {
    for (int i = 0; i < in.rank(); ++i) {
      t.dims[i] = low[i] + high[i] + in.dims[i] + std::max<int64_t>(in.dims[i] - 1, 0) * interior[i];
      Check(t.dims[i] >= 0 && interior[i] >= 0, "pad gives a negative size");
    }
  }
  Attrs a;
  a.a = low;
  a.b = high;
  a.c = interior;
  return Add(OpCode::kPad, {x, pad_value}, std::move(t), std::move(a));
}

int Builder::Reduce(int x, int init, const Dims& dims, ReduceKind kind) {
  const TensorType& in = TypeOf(x);
  Check(TypeOf(init).rank() == 0 && TypeOf(init).dtype == in.dtype, "reduce init type");
  TensorType t{in.dtype, {}};
  std::vector<bool> reduced(in.rank(), false);
  for (int64_t d : dims) {
    if (Check(d >= 0 && d < in.rank() && !reduced[d], "reduce dimension invalid")) reduced[d] = true;
  }
  for (int i = 0; i < in.rank(); ++i) {
    if (reduced[i]) continue;
    if (in.IsBounded(i)) t.bounded |= uint64_t{1} << t.dims.size();
    t.dims.push_back(in.dims[i]);
  }
  Attrs a;
  a.a = dims;
  std::sort(a.a.begin(), a.a.end());
  a.kind = static_cast<int64_t>(kind);
  return Add(OpCode::kReduce, {x, init}, std::move(t), std::move(a));
}

int Builder::ArgReduce(int x, int64_t dim, ReduceKind kind) {
  const TensorType& in = TypeOf(x);
  Check(dim >= 0 && dim < in.rank() && in.dims[dim] > 0, "arg-reduce dimension invalid");
  Check(kind == ReduceKind::kMax || kind == ReduceKind::kMin, "arg-reduce kind");
  TensorType t{DType::kI64, {}};
  for (int i = 0; i < in.rank(); ++i)
    if (i != dim) t.dims.push_back(in.dims[i]);
  Attrs a;
  a.a = {dim};
  a.kind = static_cast<int64_t>(kind);
  return Add(OpCode::kArgReduce, {x}, std::move(t), std::move(a));
}

int Builder::DotGeneral(int lhs, int rhs, const Dims& lb, const Dims& rb, const Dims& lc,
                        const Dims& rc, DType out) {
  const TensorType& l = TypeOf(lhs);
  const TensorType& r = TypeOf(rhs);
  TensorType t{out, {}};
  Check(l.dtype == r.dtype, "dot_general operand types differ");
  Check(lb.size() == rb.size() && lc.size() == rc.size(), "dot_general dimension counts differ");
  // Every dimension number is in range and names a dim at most once per operand.
  auto valid = [](const TensorType& x, const Dims& batch, const Dims& contract) {
    SmallVector<char, 8> used(x.rank(), 0);  // inline: this runs on the eager path of every matmul
    for (const Dims* ds : {&batch, &contract})
      for (int64_t d : *ds) {
        if (d < 0 || d >= x.rank() || used[d]) return false;
        used[d] = true;
      }
    return true;
  };
  if (!Check(valid(l, lb, lc) && valid(r, rb, rc), "dot_general dimension numbers invalid"))
    return Add(OpCode::kDotGeneral, {lhs, rhs}, std::move(t));
  // A bounded dim of either side stays bounded in the result (a batch or free dim) or is one the
  // contraction ignores the padding of (a contracting dim; Note [Bounded dims in the IR]).
  auto add_dim = [&t](int64_t size, bool bounded) {
    if (bounded) t.bounded |= uint64_t{1} << t.dims.size();
    t.dims.push_back(size);
  };
  for (size_t i = 0; i < lb.size() && i < rb.size(); ++i) {
    Check(l.dims.at(lb[i]) == r.dims.at(rb[i]), "dot_general batch sizes differ");
    add_dim(l.dims[lb[i]], l.IsBounded(static_cast<int>(lb[i])) || r.IsBounded(static_cast<int>(rb[i])));
  }
  for (size_t i = 0; i < lc.size() && i < rc.size(); ++i)
    Check(l.dims.at(lc[i]) == r.dims.at(rc[i]), "dot_general contracting sizes differ");
  auto is_in = [](const Dims& v, int64_t d) { return std::find(v.begin(), v.end(), d) != v.end(); };
  for (int i = 0; i < l.rank(); ++i)
    if (!is_in(lb, i) && !is_in(lc, i)) add_dim(l.dims[i], l.IsBounded(i));
  for (int i = 0; i < r.rank(); ++i)
    if (!is_in(rb, i) && !is_in(rc, i)) add_dim(r.dims[i], r.IsBounded(i));
  Attrs a;
  a.a = lb;
  a.b = rb;
  a.c = lc;
  a.d = rc;
  return Add(OpCode::kDotGeneral, {lhs, rhs}, std::move(t), std::move(a));
}

namespace {
// Batching dims: as many of the operand's as of the indices', each pair of one size, none the
// index vector dim, none repeated.
bool BatchingOk(const TensorType& op, const TensorType& idx, const Dims& ob, const Dims& ib) {
  if (ob.size() != ib.size()) return false;
  for (size_t k = 0; k < ob.size(); ++k) {
    if (ob[k] < 0 || ob[k] >= op.rank() || ib[k] < 0 || ib[k] >= idx.rank() - 1) return false;
    if (op.dims[ob[k]] != idx.dims[ib[k]]) return false;
    if (std::count(ob.begin(), ob.end(), ob[k]) != 1 || std::count(ib.begin(), ib.end(), ib[k]) != 1) return false;
  }
  return true;
}

Dims Joined(const Dims& x, const Dims& y) {
  Dims r = x;
  r.insert(r.end(), y.begin(), y.end());
  return r;
}
}  // namespace

int Builder::Gather(int operand, int indices, const Dims& offset_dims, const Dims& collapsed,
                    const Dims& start_index_map, const Dims& slice_sizes, bool checked,
                    const Dims& operand_batching, const Dims& index_batching) {
  const TensorType& op = TypeOf(operand);
  const TensorType& idx = TypeOf(indices);
  Check(IsInteger(idx.dtype), "gather indices must be integers");
  Check(idx.rank() >= 1 && idx.dims.back() == static_cast<int64_t>(start_index_map.size()),
        "gather index vector size != start_index_map size");
  Check(static_cast<int>(slice_sizes.size()) == op.rank(), "gather slice_sizes size != rank");
  if (!status_.ok()) return Add(OpCode::kGather, {operand, indices}, TensorType{op.dtype, {}});
  bool dims_ok = offset_dims.size() + collapsed.size() + operand_batching.size() == slice_sizes.size() &&
                 BatchingOk(op, idx, operand_batching, index_batching);
  for (int i = 0; i < op.rank(); ++i) dims_ok &= slice_sizes[i] >= 0 && slice_sizes[i] <= op.dims[i];
  for (int64_t d : collapsed) dims_ok &= d >= 0 && d < op.rank() && slice_sizes[d] <= 1;
  for (int64_t d : operand_batching)
    dims_ok &= slice_sizes[d] <= 1 && std::find(collapsed.begin(), collapsed.end(), d) == collapsed.end();
  for (int64_t d : start_index_map) dims_ok &= d >= 0 && d < op.rank();
  if (!Check(dims_ok, "gather dimension numbers invalid"))
    return Add(OpCode::kGather, {operand, indices}, TensorType{op.dtype, {}});
  // Result: batch dims (indices without the index vector dim) interleaved with offset dims.
  Dims batch(idx.dims.begin(), idx.dims.end() - 1);
  Dims offsets;
  for (int i = 0; i < op.rank(); ++i)
    if (std::find(collapsed.begin(), collapsed.end(), i) == collapsed.end() &&
        std::find(operand_batching.begin(), operand_batching.end(), i) == operand_batching.end())
      offsets.push_back(slice_sizes.at(i));
  TensorType t{op.dtype, {}};
  size_t bi = 0, oi = 0;
  int rank = static_cast<int>(batch.size() + offsets.size());
  for (int d = 0; d < rank; ++d) {
    if (std::find(offset_dims.begin(), offset_dims.end(), d) != offset_dims.end())
      t.dims.push_back(oi < offsets.size() ? offsets[oi++] : 0);
    else
      t.dims.push_back(bi < batch.size() ? batch[bi++] : 0);
  }
  Attrs a;
  a.a = offset_dims;
  a.b = collapsed;
  a.c = start_index_map;
  a.d = slice_sizes;
  a.e = Joined(operand_batching, index_batching);
  a.i = idx.rank() - 1;
  a.kind = checked ? 1 : 0;
  return Add(OpCode::kGather, {operand, indices}, std::move(t), std::move(a));
}

int Builder::Scatter(int operand, int indices, int updates, const Dims& update_window_dims,
                     const Dims& inserted_window_dims, const Dims& scatter_dims_to_operand,
                     ReduceKind combiner, bool checked, const Dims& operand_batching,
                     const Dims& index_batching) {
  const TensorType& idx = TypeOf(indices);
  Check(IsInteger(idx.dtype), "scatter indices must be integers");
  Check(idx.rank() >= 1 && idx.dims.back() == static_cast<int64_t>(scatter_dims_to_operand.size()),
        "scatter index vector size mismatch");
  Check(TypeOf(updates).dtype == TypeOf(operand).dtype, "scatter updates dtype != operand dtype");
  Check(BatchingOk(TypeOf(operand), idx, operand_batching, index_batching), "scatter batching dims invalid");
  Attrs a;
  a.a = update_window_dims;
  a.b = inserted_window_dims;
  a.c = scatter_dims_to_operand;
  a.e = Joined(operand_batching, index_batching);
  a.i = idx.rank() - 1;
  a.kind = static_cast<int64_t>(combiner) | (checked ? 256 : 0);
  return Add(OpCode::kScatter, {operand, indices, updates}, TypeOf(operand), std::move(a));
}

int Builder::Convolution(int lhs, int rhs, const ConvolutionSpec& spec, DType out) {
  Check(TypeOf(lhs).dtype == TypeOf(rhs).dtype, "convolution operand types differ");
  TensorType t{out, {}};
  std::string err = ConvolutionShape(TypeOf(lhs), TypeOf(rhs), spec, &t.dims);
  if (!err.empty()) Check(false, ("convolution: " + err).c_str());
  return Add(OpCode::kConvolution, {lhs, rhs}, std::move(t), spec.ToAttrs());
}

int Builder::ReduceWindow(int x, int init, const WindowSpec& window, ReduceKind kind) {
  const TensorType& in = TypeOf(x);
  Check(TypeOf(init).rank() == 0 && TypeOf(init).dtype == in.dtype, "reduce_window init type");
  Check(kind != ReduceKind::kReplace, "reduce_window needs a reducer");
  TensorType t{in.dtype, {}};
  std::string err = ReduceWindowShape(in, window, &t.dims);
  if (!err.empty()) Check(false, ("reduce_window: " + err).c_str());
  Attrs a = window.ToAttrs();
  a.kind = static_cast<int64_t>(kind);
  return Add(OpCode::kReduceWindow, {x, init}, std::move(t), std::move(a));
}

int Builder::ArgReduceWindow(int x, int index, const WindowSpec& window) {
  const TensorType& in = TypeOf(x);
  Check(TypeOf(index).dtype == DType::kI64 && TypeOf(index).dims == in.dims,
        "arg_reduce_window index must be i64 of the operand's shape");
  Check(in.dtype != DType::kBool, "arg_reduce_window operand must be a number");
  TensorType t{DType::kI64, {}};
  std::string err = ReduceWindowShape(in, window, &t.dims);
  if (!err.empty()) Check(false, ("arg_reduce_window: " + err).c_str());
  Attrs a = window.ToAttrs();
  a.kind = static_cast<int64_t>(ReduceKind::kMax);
  return Add(OpCode::kArgReduceWindow, {x, index}, std::move(t), std::move(a));
}

int Builder::Check(int x, int ok, CheckKind kind, const std::string& message) {
  Check(TypeOf(ok).dtype == DType::kBool, "check: the condition must be i1");
  Check(kind >= CheckKind::kIntegerDivisionByZero && kind < CheckKind::kCount, "check: unknown kind");
  Check(message.empty() || kind == CheckKind::kAssert, "check: only an assert carries a message");
  Attrs a;
  a.kind = static_cast<int64_t>(kind);
  for (char c : message) a.a.push_back(static_cast<unsigned char>(c));
  return Add(OpCode::kCheck, {x, ok}, TypeOf(x), std::move(a));
}

int Builder::Reverse(int x, const Dims& dims) {
  std::vector<bool> seen(TypeOf(x).rank(), false);
  Attrs a;
  for (int64_t d : dims) {
    if (!Check(d >= 0 && d < TypeOf(x).rank() && !seen[d], "reverse dimension invalid")) return x;
    seen[d] = true;
    // Reversing a dim of size one (or zero) changes nothing: a 1x1 convolution kernel's spatial
    // dims, which the input gradient reverses, leave no op at all.
    if (TypeOf(x).dims[d] > 1) a.a.push_back(d);
  }
  if (a.a.empty()) return x;
  return Add(OpCode::kReverse, {x}, TypeOf(x), std::move(a));
}

int Builder::Sort(int x, int64_t dim, bool descending) {
  const TensorType& in = TypeOf(x);
  Check(dim >= 0 && dim < in.rank(), "sort dimension invalid");
  Attrs a;
  a.i = dim;
  a.kind = descending ? 1 : 0;
  return Add(OpCode::kSort, {x}, TensorType{DType::kI64, in.dims}, std::move(a));
}

int Builder::RngBits(int state, const Dims& dims) {
  Check(TypeOf(state) == (TensorType{DType::kU64, {2}}), "rng state must be tensor<2xui64>");
  return Add(OpCode::kRngBitGenerator, {state}, TensorType{DType::kU32, dims});
}

int Builder::DynamicSlice(int x, const std::vector<int>& starts, const Dims& sizes) {
  const TensorType& in = TypeOf(x);
  SmallVector<int, 4> operands{x};
  if (Check(static_cast<int>(starts.size()) == in.rank() && static_cast<int>(sizes.size()) == in.rank(),
            "dynamic_slice needs one start and one size per dimension")) {
    for (int i = 0; i < in.rank(); ++i) {
      Check(sizes[i] >= 0 && sizes[i] <= in.dims[i], "dynamic_slice size larger than the operand");
      Check(TypeOf(starts[i]) == (TensorType{DType::kI64, {}}), "dynamic_slice starts must be i64 scalars");
      operands.push_back(starts[i]);
    }
  }
  Attrs a;
  a.a = sizes;
  return Add(OpCode::kDynamicSlice, std::move(operands), TensorType{in.dtype, sizes}, std::move(a));
}

int Builder::DynamicUpdateSlice(int x, int update, const std::vector<int>& starts) {
  const TensorType& in = TypeOf(x);
  const TensorType& up = TypeOf(update);
  SmallVector<int, 4> operands{x, update};
  Check(up.dtype == in.dtype && up.rank() == in.rank(), "dynamic_update_slice update must match the operand's type and rank");
  if (Check(static_cast<int>(starts.size()) == in.rank(), "dynamic_update_slice needs one start per dimension")) {
    for (int i = 0; i < in.rank(); ++i) {
      Check(i >= up.rank() || up.dims[i] <= in.dims[i], "dynamic_update_slice update larger than the operand");
      Check(TypeOf(starts[i]) == (TensorType{DType::kI64, {}}), "dynamic_update_slice starts must be i64 scalars");
      operands.push_back(starts[i]);
    }
  }
  return Add(OpCode::kDynamicUpdateSlice, std::move(operands), in);
}

int Builder::GetDimensionSize(int x, int64_t dim) {
  Check(dim >= 0 && dim < TypeOf(x).rank(), "get_dimension_size dimension out of range");
  Attrs a;
  a.i = dim;
  return Add(OpCode::kGetDimensionSize, {x}, TensorType{DType::kI32, {}}, std::move(a));
}

int Builder::SetDimensionSize(int x, int size, int64_t dim) {
  TensorType t = TypeOf(x);
  Check(TypeOf(size) == (TensorType{DType::kI32, {}}), "set_dimension_size size must be an i32 scalar");
  if (Check(dim >= 0 && dim < t.rank() && dim < 64, "set_dimension_size dimension out of range")) {
    const Op* c = ProducerOf(size);
    const bool at_bound = c && c->code == OpCode::kConstant && c->attrs.f == static_cast<double>(t.dims[dim]);
    t.bounded = at_bound ? t.bounded & ~(uint64_t{1} << dim) : t.bounded | (uint64_t{1} << dim);
  }
  Attrs a;
  a.i = dim;
  return Add(OpCode::kSetDimensionSize, {x, size}, std::move(t), std::move(a));
}

int Builder::Append(const Op& op, SmallVector<int, 4> operands) {
  return Add(op.code, std::move(operands), op.type, op.attrs);
}

void Builder::Result(int v) {
  if (Check(v >= 0 && v < static_cast<int>(types_.size()), "result is not a value") &&
      Check(!types_[v].bounded, "a result is a dense buffer: set its bounded dims to their bounds first"))
    graph_.results.push_back(v);
}

StatusOr<Graph> Builder::Finish() {
  TPU_ASSIGN_OR_RETURN(const Graph* g, FinishInPlace());
  (void)g;
  return std::move(graph_);
}

void Builder::Reset() {
  graph_.params.clear();
  graph_.ops.clear();
  graph_.results.clear();
  types_.clear();
  param_index_.clear();
  status_ = Status::Ok();
}

StatusOr<const Graph*> Builder::FinishInPlace() {
  if (!status_.ok()) return status_;
  // Renumber: parameters first, then ops in the order they were added.
  int np = graph_.num_params();
  std::vector<int>& remap = remap_;
  remap.resize(types_.size());
  int next_op = np;
  for (size_t v = 0; v < types_.size(); ++v) remap[v] = param_index_[v] >= 0 ? param_index_[v] : next_op++;
  for (Op& op : graph_.ops)
    for (int& o : op.operands) o = remap[o];
  for (int& r : graph_.results) r = remap[r];
  types_.clear();
  param_index_.clear();
  return &graph_;
}

}  // namespace tpu
