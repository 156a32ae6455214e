// Note [Region composites]: some lowerings emit a function as a chain of elementwise ops that the
// planner fuses into one region, where each op still makes its own pass over every tile. gelu's
// erf form (csrc/torch/lower/activation.cc) is seven: mul(x, 1/sqrt 2), erf, add 1, mul(x, 0.5),
// mul, compare x == -inf, select 0; its backward eleven (GeluErfBackward below; the kernel makes
// x * pdf + cdf one fused multiply-add). The host executor runs such a chain, when it finds it exactly
// inside a region, as one kernel at the chain's last op (elementwise_simd.cc GeluErf): one pass
// over the tile, no intermediate stores, and no 1 + erf cancellation for negative x. Found
// exactly means: every intermediate read only by the chain and no result, the constants the
// lowering uses (as float32), float32 compute (a bf16 gelu computes in float32 between its
// converts, which stay ops of the region). Anything else keeps the ops, so a near miss costs
// speed, never correctness. The chain's values are the region's slots as before; its covered ops
// simply do not run. silu (a logistic and a multiply) and its backward (six ops) run so too, with
// the chain's own operations and roundings: the same bits in one pass. Backends that lower the IR
// themselves (PJRT) see the chain unchanged; option
// host_composites turns the matching off, for comparing.
#include <cmath>

#include "base/options.h"
#include "runtime/host/elementwise_simd.h"
#include "runtime/host/graph_uses.h"
#include "runtime/host/plan.h"

namespace tpu::host {
namespace {

class RegionMatcher : public GraphUses {
 public:
  RegionMatcher(const Graph& g, const FusedRegion& r) : GraphUses(g), index_(g.ops.size(), -1) {
    for (size_t i = 0; i < r.ops.size(); ++i) index_[r.ops[i]] = static_cast<int>(i);
  }

  // The region position of the op producing v, or -1 (an input, a parameter).
  int InRegion(int v) const { return v < np_ ? -1 : index_[v - np_]; }

  // v is produced in the region, read by one op only, and no result.
  bool Inner(int v) const { return InRegion(v) >= 0 && GraphUses::Inner(v, 1); }

  // v is a float32 constant equal to `value` (as float32), or a broadcast of one.
  bool IsConstant(int v, double value) const {
    const Op* p = Producer(v);
    if (p && p->code == OpCode::kBroadcastInDim && p->attrs.a.empty()) p = Producer(p->operands[0]);
    if (!p || p->code != OpCode::kConstant || p->type.dtype != DType::kF32 || p->type.rank() != 0) return false;
    return static_cast<float>(p->attrs.f) == static_cast<float>(value);
  }

  // Op at v is `code` with operands {a, c} in either order, where c is the constant `value`; sets a.
  bool WithConstant(int v, OpCode code, double value, int* a) const {
    const Op* p = Producer(v);
    if (!p || p->code != code || p->operands.size() != 2) return false;
    for (int k : {0, 1})
      if (IsConstant(p->operands[1 - k], value)) {
        *a = p->operands[k];
        return true;
      }
    return false;
  }

  // gelu, erf form, ending at the select `s` (Note [Region composites]); sets the covered ops, the
  // compare (x == -inf) first.
  bool GeluErf(int s, std::vector<int>* covered) const {
    const Op& sel = g_.ops[s];
    if (sel.code != OpCode::kSelect || sel.type.dtype != DType::kF32) return false;
    const int q = sel.operands[0], r = sel.operands[2];
    if (!IsConstant(sel.operands[1], 0.0) || !Inner(q) || !Inner(r)) return false;
    const Op& cmp = *Producer(q);
    if (cmp.code != OpCode::kCompare || cmp.attrs.kind != static_cast<int64_t>(CompareDirection::kEQ) ||
        !IsConstant(cmp.operands[1], -INFINITY))
      return false;
    const int x = cmp.operands[0];
    if (g_.TypeOf(x).dtype != DType::kF32) return false;
    // r = h * a, h = x * 0.5, a = 1 + erf(m), m = x * (1/sqrt 2)
    const Op& mul = *Producer(r);
    if (mul.code != OpCode::kMultiply) return false;
    int h = mul.operands[0], a = mul.operands[1], hx, e, m, mx;
    if (!Inner(h) || !Inner(a) || !WithConstant(h, OpCode::kMultiply, 0.5, &hx) || hx != x) return false;
    if (!WithConstant(a, OpCode::kAdd, 1.0, &e) || !Inner(e) || Producer(e)->code != OpCode::kErf) return false;
    m = Producer(e)->operands[0];
    if (!Inner(m) || !WithConstant(m, OpCode::kMultiply, M_SQRT1_2, &mx) || mx != x) return false;
    for (int v : {r, h, a, e, m})  // (q is the compare's bool)
      if (g_.TypeOf(v).dtype != DType::kF32) return false;
    *covered = {q - np_, r - np_, h - np_, a - np_, e - np_, m - np_};
    return true;
  }

  // silu, ending at the multiply `r` = x * logistic(x) (activation.cc); sets the covered op (the
  // logistic) and x.
  bool Silu(int r, std::vector<int>* covered, int* x_out) const {
    const Op& mul = g_.ops[r];
    if (mul.code != OpCode::kMultiply || mul.type.dtype != DType::kF32) return false;
    for (int k : {0, 1}) {
      const int x = mul.operands[k], s = mul.operands[1 - k];
      const Op* lg = Inner(s) ? Producer(s) : nullptr;
      if (!lg || lg->code != OpCode::kLogistic || lg->operands[0] != x) continue;
      if (g_.TypeOf(x).dtype != DType::kF32 || g_.TypeOf(s).dtype != DType::kF32) continue;
      *covered = {s - np_};
      *x_out = x;
      return true;
    }
    return false;
  }

  // silu's backward, ending at the multiply `r` = (dy * s) * (1 + x * (1 - s)), s = logistic(x)
  // (activation.cc), s read by the chain's two ops only; sets the covered ops, x and dy.
  bool SiluBackward(int r, std::vector<int>* covered, int* x_out, int* dy_out) const {
    const Op& root = g_.ops[r];
    if (root.code != OpCode::kMultiply || root.type.dtype != DType::kF32) return false;
    const int t1 = root.operands[0], w = root.operands[1];
    const Op* m1 = Inner(t1) ? Producer(t1) : nullptr;
    if (!m1 || m1->code != OpCode::kMultiply) return false;
    const int dy = m1->operands[0], s = m1->operands[1];
    const Op* lg = Producer(s);
    if (!lg || lg->code != OpCode::kLogistic || InRegion(s) < 0 || !GraphUses::Inner(s, 2)) return false;
    const int x = lg->operands[0];
    int v, u;
    if (!Inner(w) || !WithConstant(w, OpCode::kAdd, 1.0, &v) || !Inner(v)) return false;
    const Op& xm = *Producer(v);
    if (xm.code != OpCode::kMultiply || xm.operands[0] != x) return false;
    u = xm.operands[1];
    if (!Inner(u)) return false;
    const Op& sub = *Producer(u);
    if (sub.code != OpCode::kSubtract || !IsConstant(sub.operands[0], 1.0) || sub.operands[1] != s) return false;
    for (int val : {x, dy, s, t1, w, v, u})
      if (g_.TypeOf(val).dtype != DType::kF32) return false;
    *covered = {s - np_, t1 - np_, u - np_, v - np_, w - np_};
    *x_out = x;
    *dy_out = dy;
    return true;
  }

  // The erf form of gelu's backward, ending at the multiply `r` = dy * (cdf + x * pdf) with
  // cdf = 0.5 * (1 + erf(x * (1/sqrt 2))), pdf = (1/sqrt(2 pi)) * exp((x * x) * -0.5) (activation.cc);
  // sets the covered ops, x and dy.
  bool GeluErfBackward(int r, std::vector<int>* covered, int* x_out, int* dy_out) const {
    const Op& root = g_.ops[r];
    if (root.code != OpCode::kMultiply || root.type.dtype != DType::kF32) return false;
    for (int k : {0, 1}) {
      const int sum = root.operands[k], dy = root.operands[1 - k];
      const Op* add = Inner(sum) ? Producer(sum) : nullptr;
      if (!add || add->code != OpCode::kAdd) continue;
      for (int j : {0, 1}) {
        const int cdf = add->operands[j], xp = add->operands[1 - j];
        int a, e, m, x, pdf, ex, sqh, sq;
        if (!Inner(cdf) || !WithConstant(cdf, OpCode::kMultiply, 0.5, &a) || !Inner(a)) continue;
        if (!WithConstant(a, OpCode::kAdd, 1.0, &e) || !Inner(e) || Producer(e)->code != OpCode::kErf) continue;
        m = Producer(e)->operands[0];
        if (!Inner(m) || !WithConstant(m, OpCode::kMultiply, M_SQRT1_2, &x)) continue;
        const Op* mul = Inner(xp) ? Producer(xp) : nullptr;
        if (!mul || mul->code != OpCode::kMultiply) continue;
        const int at = mul->operands[0] == x ? 1 : mul->operands[1] == x ? 0 : -1;
        if (at < 0) continue;
        pdf = mul->operands[at];
        if (!Inner(pdf) || !WithConstant(pdf, OpCode::kMultiply, M_2_SQRTPI * M_SQRT1_2 * 0.5, &ex)) continue;
        if (!Inner(ex) || Producer(ex)->code != OpCode::kExp) continue;
        sqh = Producer(ex)->operands[0];
        if (!Inner(sqh) || !WithConstant(sqh, OpCode::kMultiply, -0.5, &sq) || !Inner(sq)) continue;
        const Op& square = *Producer(sq);
        if (square.code != OpCode::kMultiply || square.operands[0] != x || square.operands[1] != x) continue;
        bool f32 = g_.TypeOf(x).dtype == DType::kF32 && g_.TypeOf(dy).dtype == DType::kF32;
        for (int v : {sum, cdf, a, e, m, xp, pdf, ex, sqh, sq}) f32 &= g_.TypeOf(v).dtype == DType::kF32;
        if (!f32) continue;
        *covered = {m - np_, e - np_, a - np_, cdf - np_, sq - np_, sqh - np_, ex - np_, pdf - np_, xp - np_, sum - np_};
        *x_out = x;
        *dy_out = dy;
        return true;
      }
    }
    return false;
  }

 private:
  std::vector<int> index_;  // graph op -> its position in the region (-1: not in it)
};

// Note [Composites from bfloat16] (elementwise.cc): the position of the region's composite when
// the region is exactly bfloat16 -> float32 of an input, a gelu or silu chain reading it, and
// float32 -> bfloat16 of its result as the one output; -1 otherwise.
int Bf16Composite(const Graph& g, const FusedRegion& region) {
  using C = FusedRegion::Composite;
  const int nin = static_cast<int>(region.inputs.size());
  if (region.outputs.size() != 1) return -1;
  int comp = -1, in_conv = -1, out_conv = -1;
  for (size_t i = 0; i < region.ops.size(); ++i) {
    const C c = region.composite[i];
    if (c == C::kCovered) continue;
    const int at = static_cast<int>(i);
    if ((c == C::kGeluErf || c == C::kSilu) && comp < 0) {
      comp = at;
      continue;
    }
    const Op& op = g.ops[region.ops[i]];
    if (c != C::kNone || op.code != OpCode::kConvert) return -1;
    const DType from = g.TypeOf(op.operands[0]).dtype, to = op.type.dtype;
    if (from == DType::kBF16 && to == DType::kF32 && in_conv < 0) in_conv = at;
    else if (from == DType::kF32 && to == DType::kBF16 && out_conv < 0) out_conv = at;
    else return -1;
  }
  if (comp < 0 || in_conv < 0 || out_conv < 0) return -1;
  const bool chained = region.operand_slots[in_conv][0] < nin && region.composite_input[comp] == nin + in_conv &&
                       region.operand_slots[out_conv][0] == nin + comp && region.output_slots[0] == nin + out_conv;
  return chained ? comp : -1;
}

// Note [Binary chains]: a chain of float32 add/sub/mul/div/max/min ops in a region, each one's
// value read only by the next (once) and by nothing else -- addcmul is x + (v * y) * z, an Adam
// update several -- ran op by op, each a pass over the tile that streamed one operand from memory
// and one value through L1; on a CPU with a 32 KiB L1 a three-op addcmul over (4096, 1024) ran at
// 0.42x PyTorch CPU on one thread. The chain's last op now computes the whole chain in one pass
// (elementwise_simd.cc BinaryChainF32), each vector going through every op in registers: the same
// operations in the same order on the same values, rounded after each (no contraction), so the
// same bits. Leaves are float32 values of the region -- or bfloat16 inputs widened as they are read
// where their converts to float32 only such ops read, and the chain's value may be rounded into a
// bfloat16 output as it is stored (Note [Widening reads], elementwise.cc), so a bfloat16 addcmul
// is one pass too. A chain is at most kMaxBinaryChain ops.

bool ChainableOp(const Graph& g, const Op& op) {
  if (op.type.dtype != DType::kF32 || op.operands.size() != 2) return false;
  for (int o : op.operands)
    if (g.TypeOf(o).dtype != DType::kF32) return false;
  // The float32 binary ops with a vector kernel (asked with no elements), the chain's steps.
  return BinaryF32WideningSimd(op.code, nullptr, false, nullptr, false, nullptr, false, 0);
}

void MatchBinaryChains(const Graph& g, const RegionMatcher& m, const FusedRegion& region,
                       std::vector<FusedRegion::Composite>& kind, std::vector<SmallVector<int, 4>>& chain) {
  using C = FusedRegion::Composite;
  const int np = g.num_params();
  const int nops = static_cast<int>(region.ops.size());
  std::vector<bool> used(nops, false);
  for (int i = 0; i < nops; ++i) {
    if (used[i] || kind[i] != C::kNone || !ChainableOp(g, g.ops[region.ops[i]])) continue;
    SmallVector<int, 4> steps{i};
    int cur = i;
    while (steps.size() < static_cast<size_t>(kMaxBinaryChain)) {
      const int v = np + region.ops[cur];
      if (!m.Inner(v)) break;
      const int j = m.InRegion(np + m.Users(v)[0]);
      if (j < 0 || used[j] || kind[j] != C::kNone) break;
      const Op& next = g.ops[region.ops[j]];
      if (!ChainableOp(g, next) || (next.operands[0] == v) == (next.operands[1] == v)) break;  // once
      steps.push_back(j);
      cur = j;
    }
    for (int k : steps) used[k] = true;
    if (steps.size() < 2) continue;
    for (size_t k = 0; k + 1 < steps.size(); ++k) kind[steps[k]] = C::kCovered;
    kind[cur] = C::kBinaryChain;
    chain[cur] = std::move(steps);
  }
}

void MatchChains(const Graph& g, FusedRegion& region) {
  region.composite.clear();
  region.composite_input.clear();
  region.composite_input2.clear();
  region.chain.clear();
  region.bf16_composite = -1;
  if (!Flags().host_composites) return;
  bool any = false;  // only regions with a candidate pay for the use counts
  int chainable = 0;
  for (int i : region.ops) {
    any |= g.ops[i].code == OpCode::kErf || g.ops[i].code == OpCode::kLogistic;
    chainable += ChainableOp(g, g.ops[i]);
  }
  if (!any && chainable < 2) return;
  RegionMatcher m(g, region);
  const int nin = static_cast<int>(region.inputs.size());
  const int np = g.num_params();
  std::vector<FusedRegion::Composite> kind(region.ops.size(), FusedRegion::Composite::kNone);
  std::vector<int> input(region.ops.size(), -1), input2(region.ops.size(), -1);
  bool found = false;
  // The slot from which the op producing value v reads its operand `operand`.
  auto slot_of = [&](int v, int operand) {
    const int at = m.InRegion(v);
    const Op& op = g.ops[region.ops[at]];
    for (size_t k = 0; k < op.operands.size(); ++k)
      if (op.operands[k] == operand) return region.operand_slots[at][k];
    return -1;
  };
  for (size_t i = 0; i < region.ops.size(); ++i) {
    using C = FusedRegion::Composite;
    std::vector<int> covered;
    C what = C::kNone;
    int x_slot = -1, dy_slot = -1, x = -1, dy = -1;
    if (m.GeluErf(region.ops[i], &covered)) {
      what = C::kGeluErf;
      x_slot = region.operand_slots[m.InRegion(np + covered[0])][0];  // as the compare reads x
    } else if (m.GeluErfBackward(region.ops[i], &covered, &x, &dy)) {
      what = C::kGeluErfBackward;
      x_slot = slot_of(np + covered[0], x);  // as x * (1/sqrt 2) reads it
      dy_slot = slot_of(np + region.ops[i], dy);
      if (x_slot < 0 || dy_slot < 0) continue;
    } else if (m.Silu(region.ops[i], &covered, &x)) {
      what = C::kSilu;
      x_slot = slot_of(np + covered[0], x);  // as the logistic reads it
      if (x_slot < 0) continue;
    } else if (m.SiluBackward(region.ops[i], &covered, &x, &dy)) {
      what = C::kSiluBackward;
      x_slot = slot_of(np + covered[0], x);   // as the logistic reads it
      dy_slot = slot_of(np + covered[1], dy);  // as dy * s reads it
      if (x_slot < 0 || dy_slot < 0) continue;
    } else {
      continue;
    }
    bool free = true;  // no op of the chain already in another composite
    for (int op : covered) free &= kind[m.InRegion(np + op)] == C::kNone;
    if (!free) continue;
    for (int op : covered) kind[m.InRegion(np + op)] = C::kCovered;
    kind[i] = what;
    input[i] = x_slot;
    input2[i] = dy_slot;
    found = true;
  }
  std::vector<SmallVector<int, 4>> chain(region.ops.size());
  if (chainable >= 2) {
    MatchBinaryChains(g, m, region, kind, chain);
    for (const auto& c : chain) found |= !c.empty();
  }
  if (!found) return;
  // A region output is never a covered op's value (each is read inside the chain only and is no
  // result); checked here too, so a planner change cannot make a composite drop a value.
  for (int s : region.output_slots)
    if (s >= nin && kind[s - nin] == FusedRegion::Composite::kCovered) return;
  region.composite = std::move(kind);
  region.composite_input = std::move(input);
  region.composite_input2 = std::move(input2);
  region.chain = std::move(chain);
  region.bf16_composite = Bf16Composite(g, region);
}

}  // namespace

void MatchComposites(const Graph& g, FusedRegion& region) {
  MatchChains(g, region);
  MatchWidening(g, region);
}

}  // namespace tpu::host
