// Note [Row chains]: the lowerings emit softmax and log-softmax as a chain of reduce and
// elementwise ops (csrc/torch/lower/softmax.cc Forward): a max reduce, a broadcast back, a
// subtract, an exp, a sum reduce, and a divide (or a log and a subtract). Planned op by op that
// chain is five passes over the tensor plus two reductions' worth of strided reads; the row
// kernel (row_kernels.h SoftmaxRows) computes it in one pass per row, with the same vector pieces,
// so its float32 results equal the chain's along the last dim (along another dim the reduce
// kernel's column sums add in another order: both within float32 rounding of float64). The planner replaces a chain with one row step when it
// finds it exactly: every intermediate used only inside the chain (none a result), one reduced
// dim, the types the kernel takes. Anything else keeps the chain, so a near miss costs speed,
// never correctness. The backends that lower the IR themselves (PJRT) see the chain unchanged.
#include <cmath>

#include "base/options.h"
#include "runtime/host/plan.h"

namespace tpu::host {
namespace {

class Matcher {
 public:
  explicit Matcher(const Graph& g) : g_(g), np_(g.num_params()), users_(g.num_values()), result_(g.num_values()) {
    for (int i = 0; i < static_cast<int>(g.ops.size()); ++i)
      for (int o : g.ops[i].operands)
        if (users_[o].empty() || users_[o].back() != i) users_[o].push_back(i);
    for (int r : g.results) result_[r] = true;
  }

  static bool Narrow(DType t) { return t == DType::kBF16 || t == DType::kF16; }

  // The op that produces v, or null for a parameter.
  const Op* Producer(int v) const { return v < np_ ? nullptr : &g_.ops[v - np_]; }
  int Value(int op) const { return np_ + op; }

  // The op indices that read v (each once).
  const std::vector<int>& Users(int v) const { return users_[v]; }
  // v is an intermediate only `n` ops read, and no result.
  bool Inner(int v, size_t n) const { return !result_[v] && users_[v].size() == n; }

  bool IsConstant(int v, double value) const {
    const Op* p = Producer(v);
    if (!p || p->code != OpCode::kConstant) return false;
    return std::isinf(value) ? std::isinf(p->attrs.f) && (p->attrs.f < 0) == (value < 0) : p->attrs.f == value;
  }

  // Op `i` reduces with `kind` over exactly {dim}, from the constant `init`; returns its input.
  bool IsReduce(int i, ReduceKind kind, double init, int* in, int* dim) const {
    const Op& op = g_.ops[i];
    if (op.code != OpCode::kReduce || op.attrs.kind != static_cast<int64_t>(kind) || op.attrs.a.size() != 1)
      return false;
    if (!IsConstant(op.operands[1], init)) return false;
    *in = op.operands[0];
    *dim = static_cast<int>(op.attrs.a[0]);
    return true;
  }

  // Op `i` broadcasts the reduction `r` over `dim` back to `full` (every other dim kept in order).
  bool IsUnreduce(int i, int r, const Dims& full, int dim) const {
    const Op& op = g_.ops[i];
    if (op.code != OpCode::kBroadcastInDim || op.operands[0] != r || op.type.dims != full) return false;
    Dims kept;
    for (int d = 0; d < static_cast<int>(full.size()); ++d)
      if (d != dim) kept.push_back(d);
    return op.attrs.a == kept;
  }

  // The only reader of v when there is exactly one, else -1.
  int Sole(int v) const { return Inner(v, 1) ? users_[v][0] : -1; }

  bool Is(int i, OpCode code, int a, int b = -2) const {
    const Op& op = g_.ops[i];
    if (op.code != code || op.operands[0] != a) return false;
    return b == -2 || (op.operands.size() == 2 && op.operands[1] == b);
  }

  // softmax / log_softmax anchored at the max reduce `i` (Note [Row chains]).
  bool Softmax(int i, RowStep* out) const {
    int x, dim;
    if (!IsReduce(i, ReduceKind::kMax, -INFINITY, &x, &dim)) return false;
    const TensorType& xt = g_.TypeOf(x);
    if (xt.dtype != DType::kF32 && xt.dtype != DType::kBF16 && xt.dtype != DType::kF16) return false;
    const Dims& full = xt.dims;
    int m = Value(i);
    int bm = Sole(m);
    if (bm < 0 || !IsUnreduce(bm, m, full, dim)) return false;
    int s = Sole(Value(bm));
    if (s < 0 || !Is(s, OpCode::kSubtract, x, Value(bm))) return false;
    const int sv = Value(s);
    // softmax: s -> exp only; log_softmax: s -> exp and the final subtract.
    const std::vector<int>& su = Users(sv);
    if (result_[sv] || su.empty() || su.size() > 2) return false;
    int e = -1;
    for (int u : su)
      if (Is(u, OpCode::kExp, sv)) e = u;
    if (e < 0) return false;
    const bool log = su.size() == 2;
    const int ev = Value(e);
    if (result_[ev] || Users(ev).size() != (log ? 1u : 2u)) return false;
    int z = -1;
    for (int u : Users(ev)) {
      int in, d;
      if (IsReduce(u, ReduceKind::kAdd, 0.0, &in, &d) && in == ev && d == dim) z = u;
    }
    if (z < 0) return false;
    int y;
    std::vector<int> ops = {i, bm, s, e, z};
    if (!log) {
      int bz = Sole(Value(z));
      if (bz < 0 || !IsUnreduce(bz, Value(z), full, dim)) return false;
      y = Sole(Value(bz));
      if (y < 0 || !Is(y, OpCode::kDivide, ev, Value(bz))) return false;
      ops.push_back(bz);
    } else {
      int lz = Sole(Value(z));
      if (lz < 0 || !Is(lz, OpCode::kLog, Value(z))) return false;
      int bz = Sole(Value(lz));
      if (bz < 0 || !IsUnreduce(bz, Value(lz), full, dim)) return false;
      y = Sole(Value(bz));
      if (y < 0 || !Is(y, OpCode::kSubtract, sv, Value(bz))) return false;
      for (int u : su)
        if (u != e && u != y) return false;
      ops.push_back(lz);
      ops.push_back(bz);
    }
    for (int k : ops)
      if (g_.ops[k].type.dtype != xt.dtype) return false;
    if (g_.ops[y].type.dtype != xt.dtype) return false;
    ops.push_back(y);
    // The init constants go with the chain when nothing else reads them.
    for (int r : {i, z}) {
      int c = g_.ops[r].operands[1];
      if (Inner(c, 1)) ops.push_back(c - np_);
    }
    // bfloat16/float16 softmax computes in float32 (Note [Row chains]): the kernel reads the
    // narrow input and rounds its result once itself, so the widening and rounding converts
    // (and their float32 temps) go with the chain.
    int yv = Value(y);
    if (const Op* c = Producer(x); c && c->code == OpCode::kConvert && Narrow(g_.TypeOf(c->operands[0]).dtype) &&
                                    Inner(x, 2)) {
      ops.push_back(x - np_);
      x = c->operands[0];
    }
    if (int c = Sole(yv); c >= 0 && g_.ops[c].code == OpCode::kConvert && Narrow(g_.ops[c].type.dtype)) {
      ops.push_back(c);
      yv = Value(c);
    }
    out->kind = log ? RowKind::kLogSoftmax : RowKind::kSoftmax;
    out->x = x;
    out->out = yv;
    out->dim = dim;
    out->ops = std::move(ops);
    return true;
  }

 private:
  const Graph& g_;
  const int np_;
  std::vector<std::vector<int>> users_;
  std::vector<bool> result_;
};

}  // namespace

const char* RowKindName(RowKind k) {
  switch (k) {
    case RowKind::kSoftmax: return "softmax rows";
    case RowKind::kLogSoftmax: return "log_softmax rows";
  }
  return "rows";
}

std::vector<RowStep> MatchRowChains(const Graph& g) {
  std::vector<RowStep> rows;
  if (!Flags().host_row_kernels) return rows;
  bool any = false;
  for (const Op& op : g.ops) any |= op.code == OpCode::kReduce && op.attrs.kind == static_cast<int64_t>(ReduceKind::kMax);
  if (!any) return rows;
  Matcher m(g);
  for (int i = 0; i < static_cast<int>(g.ops.size()); ++i) {
    RowStep r;
    if (m.Softmax(i, &r)) rows.push_back(std::move(r));
  }
  return rows;
}

}  // namespace tpu::host
