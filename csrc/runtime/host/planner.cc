// The host executor's code generation: groups a verified, optimized graph into steps (fused
// elementwise regions over one iteration space, layout ops that become views, kernels) and gives
// every intermediate a scratch slot.
#include "runtime/host/plan.h"

#include <algorithm>

namespace tpu::host {
namespace {

// Note [Scratch reuse]: temps live from the step that writes them to the last step that reads them
// (directly, or through views of them, which alias their memory; results are read at the end).
// Each gets a 64-byte aligned range of scratch that no temp live at an overlapping step shares --
// placed largest first at the lowest offset that fits -- so a long program (a fused window) needs
// about its peak of live intermediates, not their sum. Lifetimes are inclusive: a step never
// writes over what it reads.
int64_t PlanScratch(HostExecutable& exe) {
  const Graph& g = exe.graph;
  const int np = g.num_params(), nv = g.num_values();
  const int end = static_cast<int>(exe.steps.size());
  // The value whose memory a value's reads touch: itself, or the base of a chain of views.
  std::vector<int> root(nv);
  for (int v = 0; v < nv; ++v) {
    root[v] = v;
    if (v >= np && exe.slots[v].kind == SlotKind::kView) root[v] = root[g.Producer(v).operands[0]];
  }
  std::vector<int> last(nv, -1);
  auto read = [&](int v, int step) { last[root[v]] = std::max(last[root[v]], step); };
  for (int s = 0; s < end; ++s) {
    const Step& st = exe.steps[s];
    if (st.kind == StepKind::kFused) {
      for (int v : exe.regions[st.index].inputs) read(v, s);
    } else {
      const Op& op = g.ops[st.index];
      // A view reads nothing itself, except the start indices of a dynamic slice.
      for (size_t i = st.kind == StepKind::kView ? 1 : 0; i < op.operands.size(); ++i) read(op.operands[i], s);
    }
  }
  for (int r : g.results) read(r, end);
  struct Temp {
    int v, first, last;
    int64_t size;
  };
  std::vector<Temp> temps;
  for (int v = np; v < nv; ++v) {
    if (exe.slots[v].kind != SlotKind::kTemp) continue;
    int first = exe.producer_step[v];
    temps.push_back(Temp{v, first, std::max(last[v], first), (g.TypeOf(v).ByteSize() + 63) & ~int64_t{63}});
  }
  std::sort(temps.begin(), temps.end(), [](const Temp& a, const Temp& b) {
    return a.size != b.size ? a.size > b.size : a.v < b.v;
  });
  std::vector<const Temp*> placed;
  std::vector<std::pair<int64_t, int64_t>> taken;  // [offset, end) of placed temps live alongside
  int64_t total = 0;
  for (const Temp& t : temps) {
    taken.clear();
    for (const Temp* p : placed)
      if (p->first <= t.last && t.first <= p->last)
        taken.emplace_back(exe.slots[p->v].offset, exe.slots[p->v].offset + p->size);
    std::sort(taken.begin(), taken.end());
    int64_t offset = 0;
    for (const auto& [lo, hi] : taken) {
      if (offset + t.size <= lo) break;
      offset = std::max(offset, hi);
    }
    exe.slots[t.v].offset = offset;
    total = std::max(total, offset + t.size);
    placed.push_back(&t);
  }
  return total;
}

}  // namespace

Status PlanExecutable(HostExecutable& exe) {
  const Graph& g = exe.graph;
  int np = g.num_params();
  int nv = g.num_values();
  exe.regions.clear();
  exe.steps.clear();
  exe.slots.assign(nv, ValueSlot{});
  std::vector<int> region_of(nv, -1);

  int open = -1;  // index of the open region
  int open_values = 0;  // register slots the open region needs (its ops + distinct outside inputs)
  std::vector<int> counted;  // outside inputs already counted for the open region
  auto close = [&] {
    if (open >= 0) exe.steps.push_back(Step{StepKind::kFused, open});
    open = -1;
    open_values = 0;
    counted.clear();
  };
  for (int i = 0; i < static_cast<int>(g.ops.size()); ++i) {
    const Op& op = g.ops[i];
    int v = np + i;
    OpKind kind = GetOpKind(op.code);
    if (IsElementwise(op.code)) {
      if (open >= 0 && exe.regions[open].shape != op.type.dims) close();
      // The executor holds a region's values in kMaxRegionValues register slots: a long chain
      // (e.g. a _foreach_ op over many same-shaped tensors) is split into several regions.
      if (open >= 0) {
        int extra = 1;
        for (int o : op.operands)
          if (region_of[o] != open && std::find(counted.begin(), counted.end(), o) == counted.end()) ++extra;
        if (open_values + extra > kMaxRegionValues) close();
      }
      if (open < 0) {
        exe.regions.emplace_back();
        exe.regions.back().shape = op.type.dims;
        open = static_cast<int>(exe.regions.size()) - 1;
      }
      exe.regions[open].ops.push_back(i);
      region_of[v] = open;
      ++open_values;
      for (int o : op.operands)
        if (region_of[o] != open && std::find(counted.begin(), counted.end(), o) == counted.end()) {
          counted.push_back(o);
          ++open_values;
        }
      continue;
    }
    if (op.operands.empty()) {
      // Constants and iotas read nothing, so they can run before the open region without
      // ending it (a constant in the middle of a chain must not split the fused pass).
      exe.steps.push_back(Step{StepKind::kKernel, i});
      continue;
    }
    if (kind == OpKind::Structural) {
      bool reads_open = false;
      for (int o : op.operands) reads_open |= open >= 0 && region_of[o] == open;
      if (reads_open) close();
      exe.steps.push_back(Step{StepKind::kView, i});
      exe.slots[v].kind = SlotKind::kView;
      continue;
    }
    close();
    exe.steps.push_back(Step{StepKind::kKernel, i});
  }
  close();

  // Region inputs/outputs from the use lists.
  std::vector<bool> used_outside(nv, false);
  for (int r : g.results) used_outside[r] = true;
  for (int i = 0; i < static_cast<int>(g.ops.size()); ++i) {
    int my_region = region_of[np + i];
    for (int o : g.ops[i].operands) {
      if (region_of[o] >= 0 && region_of[o] != my_region) used_outside[o] = true;
      if (my_region >= 0 && region_of[o] != my_region) {
        auto& in = exe.regions[my_region].inputs;
        if (std::find(in.begin(), in.end(), o) == in.end()) in.push_back(o);
      }
    }
  }
  for (auto& region : exe.regions) {
    for (int i : region.ops) {
      int v = np + i;
      if (used_outside[v]) region.outputs.push_back(v);
      else exe.slots[v].kind = SlotKind::kInRegion;
    }
  }

  // Register slots of each region and the step that produces each value.
  for (auto& region : exe.regions) {
    std::vector<int> slot_of(nv, -1);
    int nin = static_cast<int>(region.inputs.size());
    for (int k = 0; k < nin; ++k) slot_of[region.inputs[k]] = k;
    for (size_t i = 0; i < region.ops.size(); ++i) slot_of[np + region.ops[i]] = nin + static_cast<int>(i);
    region.operand_slots.clear();
    for (int i : region.ops) {
      SmallVector<int, 4> s;
      for (int o : g.ops[i].operands) s.push_back(slot_of[o]);
      region.operand_slots.push_back(s);
    }
    region.output_slots.clear();
    for (int v : region.outputs) region.output_slots.push_back(slot_of[v]);
  }
  exe.producer_step.assign(nv, -1);
  for (size_t s = 0; s < exe.steps.size(); ++s) {
    const Step& st = exe.steps[s];
    if (st.kind == StepKind::kFused)
      for (int v : exe.regions[st.index].outputs) exe.producer_step[v] = static_cast<int>(s);
    else
      exe.producer_step[np + st.index] = static_cast<int>(s);
  }

  for (int p = 0; p < np; ++p) exe.slots[p].kind = SlotKind::kParam;
  exe.scratch_bytes = PlanScratch(exe);
  return Status::Ok();
}

}  // namespace tpu::host
