// Note [Row chains]: the lowerings emit softmax and log-softmax as chains of reduce and
// elementwise ops (csrc/torch/lower/softmax.cc): forward, a max reduce, a broadcast back, a
// subtract, an exp, a sum reduce and a divide (or a log and a subtract); backward, a sum of g * y
// (or of g) broadcast back into y * (g - s) (or g - exp(y) * s). Layer norm (norm.cc) is two group
// means, a subtract, a square, an rsqrt and the scaling by weight and bias; RMS norm (norm.cc
// fused_rms_norm) the mean of the squares, an rsqrt and the scaling. Planned op by op such
// a chain is several passes over the tensor plus the reductions' strided reads; a row kernel
// (row_kernels.h) computes it in one pass per row with the same vector pieces, so its float32
// results equal the chain's along the last dim (along another dim the reduce kernel's column sums
// add in another order: both within float32 rounding of float64). The planner replaces a chain
// with one row step only when it finds it exactly: every intermediate used only inside the chain
// (none a result, except a layer norm's mean and rstd, which the step writes), the reduced dims
// the kernel takes (one for softmax, the trailing ones for layer norm), float32 compute. Anything
// else keeps the chain, so a near miss costs speed, never correctness. The backends that lower the
// IR themselves (PJRT) see the chain unchanged.
#include <cmath>

#include "base/options.h"
#include "runtime/host/graph_uses.h"
#include "runtime/host/plan.h"

namespace tpu::host {
namespace {

class Matcher : public GraphUses {
 public:
  explicit Matcher(const Graph& g) : GraphUses(g) {}

  static bool Narrow(DType t) { return t == DType::kBF16 || t == DType::kF16; }

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

  // A rank-0 float32 eps added to the statistics (`add` op's second operand), possibly through a
  // broadcast only the chain reads: sets eps and the broadcast's op (or -1).
  bool Eps(int add, int* eps, int* eps_bcast) const {
    *eps = g_.ops[add].operands[1];
    *eps_bcast = -1;
    if (const Op* p = Producer(*eps); p && p->code == OpCode::kBroadcastInDim && p->attrs.a.empty() && Inner(*eps, 1)) {
      *eps_bcast = *eps - np_;
      *eps = p->operands[0];
    }
    return g_.TypeOf(*eps).rank() == 0 && g_.TypeOf(*eps).dtype == DType::kF32;
  }

  // softmax / log_softmax anchored at the max reduce `i` (Note [Row chains]).
  bool Softmax(int i, RowStep* out) const {
    int x, dim;
    if (!IsReduce(i, ReduceKind::kMax, -INFINITY, &x, &dim)) return false;
    const TensorType& xt = g_.TypeOf(x);
    // float32 compute only: a chain computed in bf16 rounds after every op, the kernel once.
    if (xt.dtype != DType::kF32) return false;
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
    for (int r : {i, z}) Absorb(g_.ops[r].operands[1], &ops);
    int fill = -1;
    if (!log)
      if (int sel = SafeGuard(x, y, full, dim, &ops, &fill); sel >= 0) y = sel;
    int yv = Value(y);
    Narrowed(&x, &yv, &ops);
    out->kind = log ? RowKind::kLogSoftmax : RowKind::kSoftmax;
    out->fill = fill;
    out->x = x;
    out->out = yv;
    out->dim = dim;
    out->ops = std::move(ops);
    return true;
  }

  // The safe-softmax guard after the softmax `y` of x along dim (PyTorch's _safe_softmax, which
  // SDPA's math path calls): select(P, bcast(fill), y) with P = all(x == -inf) along dim,
  // broadcast back directly or through a reshape that keeps dim as size 1 -- every op but the
  // select read only inside the guard. Appends the guard's ops to `ops`, sets the rank-0 float32
  // fill and returns the select; -1 (nothing appended) when y is not guarded so (Note [Safe
  // softmax rows], row_kernels.cc).
  int SafeGuard(int x, int y, const Dims& full, int dim, std::vector<int>* ops, int* fill) const {
    const int sel = Sole(Value(y));
    if (sel < 0) return -1;
    const Op& s = g_.ops[sel];
    if (s.code != OpCode::kSelect || s.operands[2] != Value(y) || s.type.dtype != DType::kF32) return -1;
    const Op* fb = Producer(s.operands[1]);
    if (!fb || fb->code != OpCode::kBroadcastInDim || !fb->attrs.a.empty()) return -1;
    const TensorType& ft = g_.TypeOf(fb->operands[0]);
    if (ft.rank() != 0 || ft.dtype != DType::kF32) return -1;
    std::vector<int> mine;
    const int pv = s.operands[0];
    const Op* pb = Producer(pv);
    if (!pb || pb->code != OpCode::kBroadcastInDim || pb->type.dims != full || !Inner(pv, 1)) return -1;
    mine.push_back(pv - np_);
    int rv = pb->operands[0];
    if (const Op* rs = Producer(rv); rs && rs->code == OpCode::kReshape) {
      Dims kept_one = full, identity;
      kept_one[dim] = 1;
      for (int d = 0; d < static_cast<int>(full.size()); ++d) identity.push_back(d);
      if (rs->type.dims != kept_one || pb->attrs.a != identity || !Inner(rv, 1)) return -1;
      mine.push_back(rv - np_);
      rv = rs->operands[0];
    } else if (!IsUnreduce(pv - np_, rv, full, dim)) {
      return -1;
    }
    int c, rdim;
    if (!Producer(rv) || !Inner(rv, 1) || !IsReduce(rv - np_, ReduceKind::kAnd, 1.0, &c, &rdim) || rdim != dim)
      return -1;
    mine.push_back(rv - np_);
    const Op* cmp = Producer(c);
    if (!cmp || cmp->code != OpCode::kCompare || cmp->attrs.kind != static_cast<int64_t>(CompareDirection::kEQ) ||
        cmp->operands[0] != x || !Inner(c, 1) || !IsConstantLike(cmp->operands[1], -INFINITY))
      return -1;
    mine.push_back(c - np_);
    mine.push_back(sel);
    if (Inner(s.operands[1], 1)) mine.push_back(s.operands[1] - np_);
    ops->insert(ops->end(), mine.begin(), mine.end());
    Absorb(cmp->operands[1], ops);
    Absorb(g_.ops[rv - np_].operands[1], ops);
    *fill = fb->operands[0];
    return sel;
  }

  // A broadcast of the constant `value` to the type of v, or that constant itself (rank 0).
  bool IsConstantLike(int v, double value) const {
    const Op* p = Producer(v);
    if (p && p->code == OpCode::kBroadcastInDim && p->attrs.a.empty()) return IsConstant(p->operands[0], value);
    return IsConstant(v, value);
  }
  // Op `i` is reduce-add from 0 over exactly the dims [axis, rank) of its input; returns the input.
  bool IsTrailingSum(int i, int* in, int* axis) const {
    const Op& op = g_.ops[i];
    if (op.code != OpCode::kReduce || op.attrs.kind != static_cast<int64_t>(ReduceKind::kAdd) || op.attrs.a.empty() ||
        !IsConstant(op.operands[1], 0.0))
      return false;
    const int rank = g_.TypeOf(op.operands[0]).rank();
    const int first = static_cast<int>(op.attrs.a[0]);
    for (size_t k = 0; k < op.attrs.a.size(); ++k)
      if (op.attrs.a[k] != first + static_cast<int64_t>(k)) return false;
    if (first + static_cast<int>(op.attrs.a.size()) != rank) return false;
    *in = op.operands[0];
    *axis = first;
    return true;
  }
  // Op `i` sums the float32 value `in` over its trailing dims from `axis` (> 0), and its one
  // reader divides by their count: returns that divide (the group mean), or -1.
  int TrailingMean(int i, int* in, int* axis) const {
    if (!IsTrailingSum(i, in, axis) || *axis == 0) return -1;
    const TensorType& t = g_.TypeOf(*in);
    if (t.dtype != DType::kF32) return -1;
    int64_t n = 1;
    for (int d = *axis; d < t.rank(); ++d) n *= t.dims[d];
    const int d1 = Sole(Value(i));
    return d1 >= 0 && IsMean(d1, Value(i), n) ? d1 : -1;
  }
  // Op `i` is sum / n for the reduce `sum` over n elements per row (the group mean).
  bool IsMean(int i, int sum, int64_t n) const {
    const Op& op = g_.ops[i];
    return op.code == OpCode::kDivide && op.operands[0] == sum && IsConstantLike(op.operands[1], static_cast<double>(n));
  }
  // Op `i` broadcasts v (shape full[:axis] or full[axis:]) to `full` along the leading or trailing dims.
  bool IsBroadcastPart(int i, int v, const Dims& full, int axis, bool leading) const {
    const Op& op = g_.ops[i];
    if (op.code != OpCode::kBroadcastInDim || op.operands[0] != v || op.type.dims != full) return false;
    Dims want;
    for (int d = leading ? 0 : axis; d < (leading ? axis : static_cast<int>(full.size())); ++d) want.push_back(d);
    return op.attrs.a == want;
  }
  // The one user of v of kind `code` whose other operand is a broadcast of a row-shaped value
  // (full[axis:], its own shape: the kernel takes no stretched size-1 dim); returns the op, the
  // broadcast and that value. `either_side`: v may be the second operand too (a product's or a
  // sum's bits do not depend on the order).
  bool ScaledBy(int v, OpCode code, const Dims& full, int axis, int* op_out, int* bcast, int* src,
                bool either_side = false) const {
    int u = Sole(v);
    if (u < 0 || g_.ops[u].code != code) return false;
    const Op& m = g_.ops[u];
    if (m.operands[0] != v && !(either_side && m.operands[1] == v)) return false;
    int b = m.operands[0] == v ? m.operands[1] : m.operands[0];
    const Op* p = Producer(b);
    if (!p || !Inner(b, 1) || !IsBroadcastPart(b - np_, p->operands[0], full, axis, false)) return false;
    if (g_.TypeOf(p->operands[0]).dims != Dims(full.begin() + axis, full.end())) return false;
    *op_out = u;
    *bcast = b - np_;
    *src = p->operands[0];
    return true;
  }

  // layer norm anchored at the first sum (Note [Row chains]; norm.cc layer_norm):
  //   mu = sum(x)/n; xc = x - bcast(mu); var = sum(xc * xc)/n; r = rsqrt(var + eps);
  //   y = xc * bcast(r) [* bcast(w)] [+ bcast(b)]; mu and r may also be read outside the chain.
  // The centering a layer norm and a variance begin with, anchored at the first sum `i`: mu =
  // sum(x)/n over the trailing dims from axis, xc = x - bcast(mu), the broadcast read only by the
  // subtract (mu itself may be read outside the chain).
  struct Centering {
    int x, axis, d1, mu, bmu, sub, xc;
  };
  bool Centered(int i, Centering* c) const {
    c->d1 = TrailingMean(i, &c->x, &c->axis);
    if (c->d1 < 0) return false;
    const Dims& full = g_.TypeOf(c->x).dims;
    c->mu = Value(c->d1);
    c->bmu = -1;
    for (int u : Users(c->mu))
      if (IsBroadcastPart(u, c->mu, full, c->axis, true)) c->bmu = u;
    if (c->bmu < 0 || !Inner(Value(c->bmu), 1)) return false;
    c->sub = Sole(Value(c->bmu));
    if (c->sub < 0 || !Is(c->sub, OpCode::kSubtract, c->x, Value(c->bmu))) return false;
    c->xc = Value(c->sub);
    return true;
  }

  bool LayerNorm(int i, RowStep* out) const {
    Centering c;
    if (!Centered(i, &c)) return false;
    int x = c.x;
    const int axis = c.axis, d1 = c.d1, mu = c.mu, bmu = c.bmu, sub = c.sub, xc = c.xc;
    const Dims& full = g_.TypeOf(x).dims;
    int64_t n = 1;
    for (int d = axis; d < static_cast<int>(full.size()); ++d) n *= full[d];
    if (result_[xc] || Users(xc).size() != 2) return false;
    int sq = -1, scale = -1;
    for (int u : Users(xc)) {
      if (Is(u, OpCode::kMultiply, xc, xc)) sq = u;
      else if (g_.ops[u].code == OpCode::kMultiply && g_.ops[u].operands[0] == xc) scale = u;
    }
    if (sq < 0 || scale < 0) return false;
    int r2 = Sole(Value(sq)), in2, axis2;
    if (r2 < 0 || !IsTrailingSum(r2, &in2, &axis2) || axis2 != axis) return false;
    int d2 = Sole(Value(r2));
    if (d2 < 0 || !IsMean(d2, Value(r2), n)) return false;
    int add = Sole(Value(d2));
    if (add < 0 || g_.ops[add].code != OpCode::kAdd || g_.ops[add].operands[0] != Value(d2)) return false;
    int eps, eps_bcast;
    if (!Eps(add, &eps, &eps_bcast)) return false;
    int rs = Sole(Value(add));
    if (rs < 0 || !Is(rs, OpCode::kRsqrt, Value(add))) return false;
    const int r = Value(rs);
    int br = -1;
    for (int u : Users(r))
      if (IsBroadcastPart(u, r, full, axis, true)) br = u;
    if (br < 0 || !Inner(Value(br), 1) || Sole(Value(br)) != scale || g_.ops[scale].operands[1] != Value(br))
      return false;
    std::vector<int> ops = {i, d1, bmu, sub, sq, r2, d2, add, rs, br, scale};
    if (eps_bcast >= 0) ops.push_back(eps_bcast);
    int y = scale, w = -1, b = -1, op, bc;
    if (ScaledBy(Value(y), OpCode::kMultiply, full, axis, &op, &bc, &w)) {
      ops.push_back(bc);
      ops.push_back(op);
      y = op;
    }
    if (ScaledBy(Value(y), OpCode::kAdd, full, axis, &op, &bc, &b)) {
      ops.push_back(bc);
      ops.push_back(op);
      y = op;
    }
    for (int k : ops)
      if (g_.ops[k].type.dtype != DType::kF32) return false;
    for (int v : {w, b})
      if (v >= 0 && g_.TypeOf(v).dtype != DType::kF32) return false;
    // The statistics are read outside the chain only after it (the step runs at its last op).
    const int last = y;
    for (int v : {mu, r})
      for (int u : Users(v))
        if (std::find(ops.begin(), ops.end(), u) == ops.end() && u < last) return false;
    // The divisors' and sums' constants go with the chain when only it reads them.
    for (int k : {d1, d2, i, r2}) Absorb(g_.ops[k].operands[1], &ops);
    int yv = Value(y);
    Narrowed(&x, &yv, &ops);
    out->kind = RowKind::kLayerNorm;
    out->x = x;
    out->out = yv;
    out->dim = axis;
    out->weight = w;
    out->bias = b;
    out->eps = eps;
    out->mean = Users(mu).size() > 1 || result_[mu] ? mu : -1;
    out->rstd = Users(r).size() > 1 || result_[r] ? r : -1;
    out->ops = std::move(ops);
    return true;
  }

  // A variance's sums anchored at the first sum (reduce_stats.cc LowerVar, over trailing dims):
  //   mu = sum(x)/n; ss = sum((x - bcast(mu)) * (x - bcast(mu))). The step writes ss (and mu when
  //   ops outside the chain read it: var_mean); the divide by n - correction and std's sqrt
  //   stay outside.
  bool Variance(int i, RowStep* out) const {
    Centering c;
    if (!Centered(i, &c)) return false;
    const int x = c.x, axis = c.axis, d1 = c.d1, mu = c.mu, bmu = c.bmu, sub = c.sub, xc = c.xc;
    int sq = Sole(xc);
    if (sq < 0 || result_[xc] || !Is(sq, OpCode::kMultiply, xc, xc) || result_[Value(sq)]) return false;
    int r2 = Sole(Value(sq)), in2, axis2;
    if (r2 < 0 || !IsTrailingSum(r2, &in2, &axis2) || axis2 != axis) return false;
    std::vector<int> ops = {i, d1, bmu, sub, sq, r2};
    for (int k : ops)
      if (g_.ops[k].type.dtype != DType::kF32) return false;
    // The mean is read outside the chain only after it (the step runs at its last op).
    for (int u : Users(mu))
      if (std::find(ops.begin(), ops.end(), u) == ops.end() && u < r2) return false;
    for (int k : {d1, i, r2}) Absorb(g_.ops[k].operands[1], &ops);
    out->kind = RowKind::kVariance;
    out->x = x;
    out->out = Value(r2);
    out->dim = axis;
    out->mean = Users(mu).size() > 1 || result_[mu] ? mu : -1;
    out->ops = std::move(ops);
    return true;
  }

  // softmax / log_softmax backward anchored at its sum (softmax.cc Backward):
  //   softmax: dx = y * (g - bcast(sum(g * y)));  log_softmax: dx = g - exp(y) * bcast(sum(g))
  bool SoftmaxBackward(int i, RowStep* out) const {
    int in, dim;
    if (!IsReduce(i, ReduceKind::kAdd, 0.0, &in, &dim)) return false;
    const TensorType& t = g_.TypeOf(in);
    if (t.dtype != DType::kF32) return false;
    const Dims& full = t.dims;
    int bz = Sole(Value(i));
    if (bz < 0 || !IsUnreduce(bz, Value(i), full, dim)) return false;
    int next = Sole(Value(bz));
    if (next < 0) return false;
    const Op& n1 = g_.ops[next];
    std::vector<int> ops = {i, bz};
    int gv, yv, dx;
    if (n1.code == OpCode::kSubtract && n1.operands[1] == Value(bz)) {  // softmax: in = g * y
      const Op* m = Producer(in);
      if (!m || m->code != OpCode::kMultiply || !Inner(in, 1)) return false;
      gv = m->operands[0];
      yv = m->operands[1];
      if (n1.operands[0] != gv) return false;
      dx = Sole(Value(next));
      if (dx < 0 || !Is(dx, OpCode::kMultiply, yv, Value(next))) return false;
      ops.insert(ops.begin(), in - np_);
      ops.push_back(next);
      out->kind = RowKind::kSoftmaxBackward;
    } else if (n1.code == OpCode::kMultiply && n1.operands[1] == Value(bz)) {  // log: in = g
      gv = in;
      const Op* e = Producer(n1.operands[0]);
      if (!e || e->code != OpCode::kExp || !Inner(n1.operands[0], 1)) return false;
      yv = e->operands[0];
      dx = Sole(Value(next));
      if (dx < 0 || !Is(dx, OpCode::kSubtract, gv, Value(next))) return false;
      ops.push_back(n1.operands[0] - np_);
      ops.push_back(next);
      out->kind = RowKind::kLogSoftmaxBackward;
    } else {
      return false;
    }
    if (g_.TypeOf(gv).dims != full || g_.TypeOf(yv).dims != full || g_.TypeOf(gv).dtype != DType::kF32 ||
        g_.TypeOf(yv).dtype != DType::kF32)
      return false;
    ops.push_back(dx);
    for (int k : ops)
      if (g_.ops[k].type.dtype != DType::kF32) return false;
    Absorb(g_.ops[i].operands[1], &ops);
    out->x = gv;
    out->y = yv;
    out->out = Value(dx);
    out->dim = dim;
    out->ops = std::move(ops);
    return true;
  }

  // a and b are one value, or reshapes of one value to one type (eager code that views a tensor
  // twice records two reshapes: a model's x.pow(2) and x * r read two views of one x).
  bool SameView(int a, int b) const {
    if (a == b) return true;
    const Op* pa = Producer(a);
    const Op* pb = Producer(b);
    return pa && pb && pa->code == OpCode::kReshape && pb->code == OpCode::kReshape &&
           pa->operands[0] == pb->operands[0] && pa->type == pb->type;
  }

  // Op `i` broadcasts v (shape full[:axis] + [1] * (rank - axis), a keepdim statistic) to `full`.
  bool IsStretch(int i, int v, const Dims& full, int axis) const {
    const Op& op = g_.ops[i];
    if (op.code != OpCode::kBroadcastInDim || op.operands[0] != v || op.type.dims != full) return false;
    const Dims& vd = g_.TypeOf(v).dims;
    if (vd.size() != full.size()) return false;
    for (int d = 0; d < static_cast<int>(full.size()); ++d)
      if (op.attrs.a[d] != d || vd[d] != (d < axis ? full[d] : 1)) return false;
    return true;
  }

  // RMS norm anchored at the sum of squares (Note [Row chains]; norm.cc fused_rms_norm, and the
  // keepdim form models write by hand: x * rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w):
  //   r = rsqrt(sum(x * x)/n [reshaped keepdim] + eps); y = x * bcast(r) [* bcast(w), either
  //   order]; r may also be read outside.
  bool RmsNorm(int i, RowStep* out) const {
    int sqv, axis;
    const int d1 = TrailingMean(i, &sqv, &axis);
    if (d1 < 0 || !Inner(sqv, 1)) return false;
    const Op* sq = Producer(sqv);
    if (!sq || sq->code != OpCode::kMultiply || sq->operands[0] != sq->operands[1]) return false;
    const int x = sq->operands[0];
    const Dims& full = g_.TypeOf(x).dims;
    int ms = Value(d1), keep = -1;  // the mean of squares, or its keepdim reshape
    if (int u = Sole(ms); u >= 0 && g_.ops[u].code == OpCode::kReshape) {
      Dims kd(full.begin(), full.begin() + axis);
      kd.resize(full.size(), 1);
      if (g_.ops[u].type.dims != kd) return false;
      keep = u;
      ms = Value(u);
    }
    int add = Sole(ms);
    if (add < 0 || g_.ops[add].code != OpCode::kAdd || g_.ops[add].operands[0] != ms) return false;
    int eps, eps_bcast;
    if (!Eps(add, &eps, &eps_bcast)) return false;
    int rs = Sole(Value(add));
    if (rs < 0 || !Is(rs, OpCode::kRsqrt, Value(add))) return false;
    const int r = Value(rs);
    // The first broadcast of r that scales x (a backward in the same program may broadcast r
    // again, and recompute x * r for the weight's gradient: those read r after the step).
    int br = -1, scale = -1;
    for (int u : Users(r)) {
      if (!(keep < 0 ? IsBroadcastPart(u, r, full, axis, true) : IsStretch(u, r, full, axis)) || !Inner(Value(u), 1))
        continue;
      const int m = Sole(Value(u));
      if (m >= 0 && g_.ops[m].code == OpCode::kMultiply && g_.ops[m].operands[1] == Value(u) &&
          SameView(g_.ops[m].operands[0], x)) {
        br = u, scale = m;
        break;
      }
    }
    if (br < 0) return false;
    std::vector<int> ops = {sqv - np_, i, d1, add, rs, br, scale};
    if (keep >= 0) ops.push_back(keep);
    if (eps_bcast >= 0) ops.push_back(eps_bcast);
    int y = scale, w = -1, op, bc;
    if (ScaledBy(Value(y), OpCode::kMultiply, full, axis, &op, &bc, &w, /*either_side=*/true)) {
      ops.push_back(bc);
      ops.push_back(op);
      y = op;
    }
    for (int k : ops)
      if (g_.ops[k].type.dtype != DType::kF32) return false;
    if (w >= 0 && g_.TypeOf(w).dtype != DType::kF32) return false;
    for (int u : Users(r))  // the statistic is read outside the chain only after it
      if (std::find(ops.begin(), ops.end(), u) == ops.end() && u < y) return false;
    for (int k : {d1, i}) Absorb(g_.ops[k].operands[1], &ops);
    out->kind = RowKind::kRmsNorm;
    out->x = x;
    out->out = Value(y);
    out->dim = axis;
    out->weight = w;
    out->eps = eps;
    out->rstd = Users(r).size() > 1 || result_[r] ? r : -1;
    out->ops = std::move(ops);
    return true;
  }

  // Adds v's op (a constant, or a broadcast of one: read by nothing else) to `ops`.
  void Absorb(int v, std::vector<int>* ops) const {
    const Op* p = Producer(v);
    if (!p || !AllIn(v, *ops) || std::find(ops->begin(), ops->end(), v - np_) != ops->end()) return;
    if (p->code == OpCode::kBroadcastInDim) {
      ops->push_back(v - np_);
      Absorb(p->operands[0], ops);
    } else if (p->code == OpCode::kConstant) {
      ops->push_back(v - np_);
    }
  }
  // A narrow (bf16/f16) chain computes in float32: the kernel reads the narrow input and rounds its
  // result once itself, so the widening and rounding converts (and their f32 temps) join the chain.
  void Narrowed(int* x, int* yv, std::vector<int>* ops) const {
    if (const Op* c = Producer(*x);
        c && c->code == OpCode::kConvert && Narrow(g_.TypeOf(c->operands[0]).dtype) && Inner(*x, 2)) {
      ops->push_back(*x - np_);
      *x = c->operands[0];
    }
    if (int c = Sole(*yv); c >= 0 && g_.ops[c].code == OpCode::kConvert && Narrow(g_.ops[c].type.dtype)) {
      ops->push_back(c);
      *yv = Value(c);
    }
  }

  // Every reader of v is one of `ops`, and v is no result.
  bool AllIn(int v, const std::vector<int>& ops) const {
    if (result_[v]) return false;
    for (int u : Users(v))
      if (std::find(ops.begin(), ops.end(), u) == ops.end()) return false;
    return true;
  }

};

}  // namespace

const char* RowKindName(RowKind k) {
  switch (k) {
    case RowKind::kSoftmax: return "softmax rows";
    case RowKind::kLogSoftmax: return "log_softmax rows";
    case RowKind::kLayerNorm: return "layer_norm rows";
    case RowKind::kRmsNorm: return "rms_norm rows";
    case RowKind::kSoftmaxBackward: return "softmax backward rows";
    case RowKind::kLogSoftmaxBackward: return "log_softmax backward rows";
    case RowKind::kVariance: return "variance rows";
  }
  return "rows";
}

std::vector<RowStep> MatchRowChains(const Graph& g) {
  std::vector<RowStep> rows;
  if (!Flags().host_row_kernels) return rows;
  bool any = false;
  for (const Op& op : g.ops) any |= op.code == OpCode::kReduce;
  if (!any) return rows;
  Matcher m(g);
  std::vector<bool> taken(g.ops.size(), false);
  for (int i = 0; i < static_cast<int>(g.ops.size()); ++i) {
    if (taken[i] || g.ops[i].code != OpCode::kReduce) continue;
    RowStep r;
    if (!m.Softmax(i, &r) && !m.LayerNorm(i, &r) && !m.RmsNorm(i, &r) && !m.SoftmaxBackward(i, &r) &&
        !m.Variance(i, &r))
      continue;
    bool overlaps = false;
    for (int k : r.ops) overlaps |= taken[k];
    if (overlaps) continue;  // (a constant two chains share is no one's)
    for (int k : r.ops) taken[k] = true;
    rows.push_back(std::move(r));
  }
  return rows;
}

}  // namespace tpu::host
