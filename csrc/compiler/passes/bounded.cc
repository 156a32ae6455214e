#include "compiler/passes/bounded.h"

#include <algorithm>
#include <string>

namespace tpu {
namespace {

// The static graph being built: ops appended with their types made static; each carries the
// source index of the op it serves.
class Emitter {
 public:
  explicit Emitter(Graph& out) : g_(out) {}

  int Emit(OpCode code, SmallVector<int, 4> operands, TensorType type, Attrs attrs, int32_t src) {
    Op& op = g_.ops.emplace_back();
    op.code = code;
    op.operands = std::move(operands);
    op.type = type.Static();
    op.attrs = std::move(attrs);
    op.src = src;
    return g_.num_values() - 1;
  }
  int I32(int64_t value, int32_t src) {
    Attrs a;
    a.f = static_cast<double>(value);
    return Emit(OpCode::kConstant, {}, TensorType{DType::kI32, {}}, std::move(a), src);
  }
  int Broadcast(int scalar, DType dtype, const Dims& dims, int32_t src) {
    return Emit(OpCode::kBroadcastInDim, {scalar}, TensorType{dtype, dims}, {}, src);
  }
  // x with the positions at or past `size` along `dim` replaced by the scalar `fill`.
  int Mask(int x, const TensorType& t, int dim, int size, int fill, int32_t src) {
    Attrs ia;
    ia.i = dim;
    int iota = Emit(OpCode::kIota, {}, TensorType{DType::kI32, t.dims}, std::move(ia), src);
    Attrs ca;
    ca.kind = static_cast<int64_t>(CompareDirection::kLT);
    int keep = Emit(OpCode::kCompare, {iota, Broadcast(size, DType::kI32, t.dims, src)},
                    TensorType{DType::kBool, t.dims}, std::move(ca), src);
    return Emit(OpCode::kSelect, {keep, x, Broadcast(fill, t.dtype, t.dims, src)}, t, {}, src);
  }

 private:
  Graph& g_;
};

bool HasBoundedDims(const Graph& g) {
  for (const Op& op : g.ops)
    if (op.type.bounded) return true;
  return false;
}

}  // namespace

StatusOr<bool> BoundedDimsPass::Run(Graph& g) {
  if (!HasBoundedDims(g)) return false;
  Graph out;
  out.params = g.params;  // static (Verify)
  out.ops.reserve(g.ops.size() * 2);
  Emitter e(out);
  const int np = g.num_params();
  std::vector<int> map(g.num_values());
  // Per value, per dim: the new graph's i32 value holding a bounded dim's runtime size (-1: static).
  std::vector<SmallVector<int, 6>> sizes(g.num_values());
  for (int p = 0; p < np; ++p) {
    map[p] = p;
    sizes[p].assign(static_cast<size_t>(g.params[p].rank()), -1);
  }
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    const int v = np + static_cast<int>(i);
    const int32_t src = op.src;
    SmallVector<int, 4> in;
    for (int o : op.operands) in.push_back(map[o]);
    SmallVector<int, 6>& sz = sizes[v];
    sz.assign(static_cast<size_t>(op.type.rank()), -1);
    auto operand_size = [&](int k, int64_t d) { return sizes[op.operands[k]][d]; };
    switch (op.code) {
      case OpCode::kSetDimensionSize:
        sz = sizes[op.operands[0]];
        sz[op.attrs.i] = op.type.IsBounded(static_cast<int>(op.attrs.i)) ? in[1] : -1;
        map[v] = in[0];  // the padded layout is the operand's; values past the size are padding
        continue;
      case OpCode::kGetDimensionSize: {
        int s = operand_size(0, op.attrs.i);
        map[v] = s >= 0 ? s : e.I32(g.TypeOf(op.operands[0]).dims[op.attrs.i], src);
        continue;
      }
      case OpCode::kBroadcastInDim:
        for (int d = 0; d < g.TypeOf(op.operands[0]).rank(); ++d)
          if (op.type.IsBounded(static_cast<int>(op.attrs.a[d]))) sz[op.attrs.a[d]] = operand_size(0, d);
        break;
      case OpCode::kTranspose:
        for (int d = 0; d < op.type.rank(); ++d) sz[d] = operand_size(0, op.attrs.a[d]);
        break;
      case OpCode::kReduce: {
        const TensorType& x = g.TypeOf(op.operands[0]);
        for (int64_t d : op.attrs.a)
          if (x.IsBounded(static_cast<int>(d))) in[0] = e.Mask(in[0], x.Static(), static_cast<int>(d), operand_size(0, d), in[1], src);
        for (int d = 0, k = 0; d < x.rank(); ++d) {
          bool reduced = false;
          for (int64_t r : op.attrs.a) reduced |= r == d;
          if (!reduced) sz[k++] = operand_size(0, d);
        }
        break;
      }
      case OpCode::kDotGeneral: {
        const Attrs& a = op.attrs;
        // Padding along a contracting dim becomes zero on both sides (0 * a NaN in the other
        // side's padding would be NaN).
        for (int side = 0; side < 2; ++side) {
          const TensorType& x = g.TypeOf(op.operands[side]);
          const Dims& contract = side == 0 ? a.c : a.d;
          const Dims& other = side == 0 ? a.d : a.c;
          for (size_t c = 0; c < contract.size(); ++c) {
            const int64_t d = contract[c];
            int s = operand_size(side, d);
            if (s < 0) s = operand_size(1 - side, other[c]);
            if (s < 0) continue;
            Attrs za;
            int zero = e.Emit(OpCode::kConstant, {}, TensorType{x.dtype, {}}, std::move(za), src);
            in[side] = e.Mask(in[side], x.Static(), static_cast<int>(d), s, zero, src);
          }
        }
        auto is_in = [](const Dims& v, int64_t d) { return std::find(v.begin(), v.end(), d) != v.end(); };
        int k = 0;
        for (size_t b = 0; b < a.a.size(); ++b) {
          int s = operand_size(0, a.a[b]);
          sz[k++] = s >= 0 ? s : operand_size(1, a.b[b]);
        }
        for (int d = 0; d < g.TypeOf(op.operands[0]).rank(); ++d)
          if (!is_in(a.a, d) && !is_in(a.c, d)) sz[k++] = operand_size(0, d);
        for (int d = 0; d < g.TypeOf(op.operands[1]).rank(); ++d)
          if (!is_in(a.b, d) && !is_in(a.d, d)) sz[k++] = operand_size(1, d);
        break;
      }
      default:
        if (IsElementwise(op.code)) {  // operands of one shape: a bounded dim's size from any of them
          for (size_t k = 0; k < op.operands.size(); ++k)
            for (int d = 0; d < op.type.rank(); ++d)
              if (sz[d] < 0) sz[d] = operand_size(static_cast<int>(k), d);
        } else if (op.type.bounded) {
          return Internal(std::string("bounded-dims pass: ") + OpName(op.code) + " gives a bounded dim");
        }
        break;
    }
    for (int d = 0; d < op.type.rank(); ++d)
      if (op.type.IsBounded(d) && sz[d] < 0)
        return Internal(std::string("bounded-dims pass: no runtime size for dim ") + std::to_string(d) + " of " +
                        OpName(op.code));
    map[v] = e.Emit(op.code, std::move(in), op.type, op.attrs, src);
  }
  for (int r : g.results) out.results.push_back(map[r]);
  g = std::move(out);
  return true;
}

}  // namespace tpu
