#include "compiler/passes/remat.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

namespace tpu {
namespace {

// Note [Rematerialization]: a program keeps each value from the op that computes it to the last op
// that reads it. A fused window holding a training step computes some values in the forward and
// reads them again only in the backward -- GELU's output (for the next matmul's weight gradient),
// a dropout's output, a layer norm's output -- although what they are computed from stays alive
// for the backward anyway (GELU's input for its own gradient, the dropout mask, the norm's input
// and statistics). PyTorch's autograd saves them, so strict mode holds them too. This pass
// recomputes such a value just before its first use after a long stretch without one
// (Limits::min_gap ops), with a copy of the elementwise and layout ops that compute it, back to
// values live at that point (parameters, results, or values an op at or after it reads) -- at most
// Limits::max_chain ops. The later uses read the copy, and the original's memory is free in
// between (DCE removes the original if nothing read it before). Only elementwise values of at
// least Limits::min_bytes that are not results qualify, and only elementwise ops, layout ops,
// constants and iotas are copied (never a check, random bits or a kernel): a copy computes
// exactly what the original did, from the same values.
bool Copyable(OpCode c) {
  return IsElementwise(c) || c == OpCode::kBroadcastInDim || c == OpCode::kReshape || c == OpCode::kTranspose ||
         c == OpCode::kSlice || c == OpCode::kConstant || c == OpCode::kIota;
}

struct Plan {
  int v;                 // the value recomputed
  int at;                // before this op (original index); it and every later op read the copy
  std::vector<int> ops;  // the original ops that recompute it, ascending
};

}  // namespace

StatusOr<bool> RematPass::Run(Graph& g) {
  const int np = g.num_params(), nv = g.num_values(), nops = static_cast<int>(g.ops.size());
  std::vector<std::vector<int>> uses(nv);  // the ops reading each value, ascending
  for (int i = 0; i < nops; ++i)
    for (int o : g.ops[i].operands)
      if (uses[o].empty() || uses[o].back() != i) uses[o].push_back(i);
  std::vector<bool> is_result(nv, false);
  for (int r : g.results) is_result[r] = true;
  auto live_at = [&](int v, int u) {
    return g.IsParam(v) || is_result[v] || (!uses[v].empty() && uses[v].back() >= u);
  };
  // The ops that recompute v before op u from values live there; false past the chain limit or
  // at an op that cannot be copied.
  auto chain = [&](int v, int u, std::vector<int>* ops) {
    std::vector<int> todo{v};
    while (!todo.empty()) {
      int x = todo.back();
      todo.pop_back();
      int k = x - np;
      if (std::find(ops->begin(), ops->end(), k) != ops->end()) continue;
      if (!Copyable(g.ops[k].code) || static_cast<int>(ops->size()) >= limits_.max_chain) return false;
      ops->push_back(k);
      for (int o : g.ops[k].operands)
        if (!live_at(o, u)) todo.push_back(o);
    }
    std::sort(ops->begin(), ops->end());
    return true;
  };
  std::vector<Plan> plans;
  for (int i = 0; i < nops; ++i) {
    const int v = np + i;
    const Op& op = g.ops[i];
    if (!IsElementwise(op.code) || is_result[v] || op.type.ByteSize() < limits_.min_bytes) continue;
    int prev = i;
    for (int u : uses[v]) {
      if (u - prev >= limits_.min_gap) {  // one copy per value, at its first long gap
        Plan p{v, u, {}};
        if (chain(v, u, &p.ops)) plans.push_back(std::move(p));
        break;
      }
      prev = u;
    }
  }
  if (plans.empty()) return false;
  std::stable_sort(plans.begin(), plans.end(), [](const Plan& a, const Plan& b) { return a.at < b.at; });

  const std::vector<Op> src = std::move(g.ops);
  g.ops.clear();
  std::vector<int> remap(nv, -1), copy(nv, -1);  // copy[v]: what ops from its plan's `at` on read
  for (int p = 0; p < np; ++p) remap[p] = p;
  auto current = [&](int v) { return copy[v] >= 0 ? copy[v] : remap[v]; };
  auto emit = [&](Op op) {
    g.ops.push_back(std::move(op));
    return np + static_cast<int>(g.ops.size()) - 1;
  };
  size_t next = 0;
  for (int i = 0; i < nops; ++i) {
    for (; next < plans.size() && plans[next].at == i; ++next) {
      const Plan& p = plans[next];
      std::unordered_map<int, int> local;  // original value -> its copy in this chain
      for (int k : p.ops) {
        Op op = src[k];
        for (int& o : op.operands) {
          auto it = local.find(o);
          o = it != local.end() ? it->second : current(o);
        }
        local[np + k] = emit(std::move(op));
      }
      copy[p.v] = local[p.v];
    }
    Op op = src[i];
    for (int& o : op.operands) o = current(o);
    remap[np + i] = emit(std::move(op));
  }
  for (int& r : g.results) r = remap[r];
  return true;
}

}  // namespace tpu
