#include "compiler/passes/dce.h"

namespace tpu {

StatusOr<bool> DcePass::Run(Graph& g) {
  int np = g.num_params();
  std::vector<bool> live(g.num_values(), false);
  for (int r : g.results) live[r] = true;
  for (int i = static_cast<int>(g.ops.size()) - 1; i >= 0; --i) {
    if (!live[np + i]) continue;
    for (int o : g.ops[i].operands) live[o] = true;
  }
  bool changed = false;
  for (size_t i = 0; i < g.ops.size(); ++i) changed |= !live[np + i];
  if (!changed) return false;
  std::vector<int> remap(g.num_values(), -1);
  for (int p = 0; p < np; ++p) remap[p] = p;
  std::vector<Op> kept;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    if (!live[np + i]) continue;
    Op op = std::move(g.ops[i]);
    for (int& o : op.operands) o = remap[o];
    remap[np + i] = np + static_cast<int>(kept.size());
    kept.push_back(std::move(op));
  }
  g.ops = std::move(kept);
  for (int& r : g.results) r = remap[r];
  return true;
}

}  // namespace tpu
