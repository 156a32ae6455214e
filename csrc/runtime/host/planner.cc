// The host executor's code generation: groups a verified, optimized graph into steps (fused
// elementwise regions over one iteration space, layout ops that become views, kernels) and gives
// every intermediate a scratch slot.
#include "runtime/host/plan.h"

#include <algorithm>

namespace tpu::host {

namespace {

// Calls read(v, step, view_base) for every value each step reads, then read(r, steps.size(),
// false) for every result; `view_base`: the operand a view step makes its view of (whose memory it
// reads only when it copies).
template <typename F>
void ForEachRead(const HostExecutable& exe, F&& read) {
  const Graph& g = exe.graph;
  const int end = static_cast<int>(exe.steps.size());
  for (int s = 0; s < end; ++s) {
    const Step& st = exe.steps[s];
    if (st.kind == StepKind::kFused) {
      for (int v : exe.regions[st.index].inputs) read(v, s, false);
    } else if (st.kind == StepKind::kRows) {
      for (int v : exe.rows[st.index].Inputs()) read(v, s, false);
    } else {
      const Op& op = g.ops[st.index];
      for (size_t i = 0; i < op.operands.size(); ++i) read(op.operands[i], s, st.kind == StepKind::kView && i == 0);
    }
  }
  for (int r : g.results) read(r, end, false);
}

}  // namespace

std::vector<int> LastReads(const HostExecutable& exe, std::vector<int>* through_views) {
  const Graph& g = exe.graph;
  const int np = g.num_params(), nv = g.num_values();
  // The value whose memory a value's reads touch: itself, or the base of a chain of views.
  std::vector<int> root(nv);
  for (int v = 0; v < nv; ++v) {
    root[v] = v;
    if (v >= np && exe.slots[v].kind == SlotKind::kView) root[v] = root[g.Producer(v).operands[0]];
  }
  std::vector<int> last(nv, -1);
  if (through_views) through_views->assign(nv, -1);
  // A view reads nothing itself (its readers read its base), except the start indices of a
  // dynamic slice.
  ForEachRead(exe, [&](int v, int step, bool view_base) {
    if (view_base) return;
    last[root[v]] = std::max(last[root[v]], step);
    if (through_views && root[v] != v) (*through_views)[root[v]] = std::max((*through_views)[root[v]], step);
  });
  return last;
}

std::vector<int> ViewLastReads(const HostExecutable& exe) {
  const Graph& g = exe.graph;
  const int np = g.num_params(), nv = g.num_values();
  auto is_view = [&](int v) { return v >= np && exe.slots[v].kind == SlotKind::kView; };
  std::vector<int> last(nv, -1);
  // A view step reads its base's memory when it copies, at that same step.
  ForEachRead(exe, [&](int v, int step, bool) {
    if (is_view(v)) last[v] = std::max(last[v], step);
  });
  // A view of a view aliases its memory: its reads count for the one it was made from (ops are
  // in order, so walking them backwards sees every view before the view it derives from).
  for (int i = static_cast<int>(g.ops.size()) - 1; i >= 0; --i) {
    const int v = np + i;
    if (is_view(v) && !g.ops[i].operands.empty() && is_view(g.ops[i].operands[0]))
      last[g.ops[i].operands[0]] = std::max(last[g.ops[i].operands[0]], last[v]);
  }
  return last;
}

namespace {

// Note [Scratch reuse]: temps live from the step that writes them to the last step that reads them
// (directly, or through views of them, which alias their memory; results are read at the end).
// Each gets a 64-byte aligned range of scratch that no temp live at an overlapping step shares --
// placed largest first at the lowest offset that fits -- so a long program (a fused window) needs
// about its peak of live intermediates, not their sum. Lifetimes are inclusive: a step never
// writes over what it reads.
//
// Note [Result scratch]: a result is usually written straight into its binding (the executor's
// `direct` results), and then its temp is never touched. Results therefore get their own range
// after every other temp, [temp_bytes, scratch_bytes), which a launch takes only when one of them
// cannot be written directly -- else a fused training step would hold its gradients twice (once
// in their bindings, once reserved in scratch) in the device's memory accounting.
void PlanScratch(HostExecutable& exe, const std::vector<int>& last) {  // last: LastReads
  const Graph& g = exe.graph;
  const int np = g.num_params(), nv = g.num_values();
  std::vector<bool> is_result(nv, false);
  for (int r : exe.result_temps) is_result[r] = true;  // Note [Reshaped results]
  struct Temp {
    int v, first, last;
    int64_t size;
  };
  std::vector<Temp> temps[2];  // [0]: the other temps, [1]: results
  for (int v = np; v < nv; ++v) {
    if (exe.slots[v].kind != SlotKind::kTemp) continue;
    int first = exe.producer_step[v];
    temps[is_result[v]].push_back(Temp{v, first, std::max(last[v], first), (TempBytes(g, v) + 63) & ~int64_t{63}});
  }
  auto pack = [&](std::vector<Temp>& list, int64_t base) {
    std::sort(list.begin(), list.end(), [](const Temp& a, const Temp& b) {
      return a.size != b.size ? a.size > b.size : a.v < b.v;
    });
    std::vector<const Temp*> placed;
    std::vector<std::pair<int64_t, int64_t>> taken;  // [offset, end) of placed temps live alongside
    int64_t total = base;
    for (const Temp& t : list) {
      taken.clear();
      for (const Temp* p : placed)
        if (p->first <= t.last && t.first <= p->last)
          taken.emplace_back(exe.slots[p->v].offset, exe.slots[p->v].offset + p->size);
      std::sort(taken.begin(), taken.end());
      int64_t offset = base;
      for (const auto& [lo, hi] : taken) {
        if (offset + t.size <= lo) break;
        offset = std::max(offset, hi);
      }
      exe.slots[t.v].offset = offset;
      total = std::max(total, offset + t.size);
      placed.push_back(&t);
    }
    return total;
  };
  exe.temp_bytes = pack(temps[0], 0);
  exe.scratch_bytes = pack(temps[1], exe.temp_bytes);
}

}  // namespace

void AssignRegionSlots(const Graph& g, FusedRegion& region) {
  const int np = g.num_params();
  // Slots: inputs first, then one per op (a small map: regions have at most kMaxRegionValues).
  auto slot_of = [&](int v) {
    for (size_t k = 0; k < region.inputs.size(); ++k)
      if (region.inputs[k] == v) return static_cast<int>(k);
    for (size_t i = 0; i < region.ops.size(); ++i)
      if (np + region.ops[i] == v) return static_cast<int>(region.inputs.size() + i);
    return -1;
  };
  region.operand_slots.clear();
  for (int i : region.ops) {
    SmallVector<int, 4> s;
    for (int o : g.ops[i].operands) s.push_back(slot_of(o));
    region.operand_slots.push_back(s);
  }
  region.output_slots.clear();
  for (int v : region.outputs) region.output_slots.push_back(slot_of(v));
  MatchComposites(g, region);
}

Status PlanExecutable(HostExecutable& exe) {
  const Graph& g = exe.graph;
  int np = g.num_params();
  int nv = g.num_values();
  exe.regions.clear();
  exe.steps.clear();
  exe.slots.assign(nv, ValueSlot{});
  std::vector<int> region_of(nv, -1);
  // Note [Row chains]: each chain becomes one step at its last op; its other ops run nowhere.
  exe.rows = MatchRowChains(g);
  std::vector<int> row_of(g.ops.size(), -1), row_last(exe.rows.size(), -1);
  for (size_t r = 0; r < exe.rows.size(); ++r)
    for (int i : exe.rows[r].ops) {
      row_of[i] = static_cast<int>(r);
      row_last[r] = std::max(row_last[r], i);
    }

  // Note [Open regions]: an elementwise op joins the open region of its shape, and several
  // regions (one per shape) stay open at once. A region runs (its step is emitted) when a step
  // reads one of its values, when it is full, when it has gained nothing for a while, or at the
  // end. Kernels and views that do not read an open region are emitted before it. This is valid
  // because an open region only reads values of steps already emitted: an op whose operand lies
  // in another open region closes that region first. So the interleaved chains of a _foreach_
  // optimizer step (mul of every parameter, then add of every parameter, ...) become one region
  // per parameter shape instead of one region per op, and an elementwise chain split by an
  // unrelated matmul stays one pass.
  struct Open {
    int index;       // into exe.regions
    int last_step;   // work_steps() when it last gained an op
    // Its distinct outside inputs: with its ops, the register slots it needs.
    std::vector<int> counted;
  };
  // A region idle for this many emitted steps is closed: keeping it open longer only stretches
  // its inputs' lifetimes (scratch) for no fusion.
  constexpr int kIdleSteps = 64;
  constexpr size_t kMaxOpen = 64;
  // Note [Regions by chain]: ops at least this large fuse along their operands' chains.
  constexpr int64_t kChainElements = 4096;
  std::vector<Open> open;
  // Steps that compute (views excepted: they take no memory and no time), for idleness: a
  // _foreach_ step's scalar broadcasts are a view per parameter per op (Note [Regions by chain]).
  int views_emitted = 0;
  auto work_steps = [&] { return static_cast<int>(exe.steps.size()) - views_emitted; };
  auto close_at = [&](size_t k) {
    exe.steps.push_back(Step{StepKind::kFused, open[k].index});
    open.erase(open.begin() + static_cast<std::ptrdiff_t>(k));
  };
  // Closes the open regions that `operands` reads, except `keep`.
  auto close_read = [&](const SmallVector<int, 4>& operands, int keep) {
    for (size_t k = 0; k < open.size();) {
      bool reads = false;
      for (int o : operands) reads |= region_of[o] == open[k].index;
      if (reads && open[k].index != keep) close_at(k);
      else ++k;
    }
  };
  auto close_idle = [&] {
    const int now = work_steps();
    for (size_t k = 0; k < open.size();) {
      if (now - open[k].last_step > kIdleSteps) close_at(k);
      else ++k;
    }
  };
  for (int i = 0; i < static_cast<int>(g.ops.size()); ++i) {
    const Op& op = g.ops[i];
    int v = np + i;
    OpKind kind = GetOpKind(op.code);
    if (row_of[i] >= 0) {
      // The step runs at the chain's last op; what it writes besides goes to memory too.
      const RowStep& row = exe.rows[row_of[i]];
      const SmallVector<int, 4> outs = row.Outputs();
      if (std::find(outs.begin(), outs.end(), v) == outs.end())
        exe.slots[v].kind = SlotKind::kInRegion;  // computed inside the row kernel, never stored
      if (i != row_last[row_of[i]]) continue;
      close_read(row.Inputs(), -1);
      exe.steps.push_back(Step{StepKind::kRows, row_of[i]});
      close_idle();
      continue;
    }
    if (IsElementwise(op.code)) {
      // Note [Regions by chain]: an op of kChainElements elements or more joins the open region
      // of its shape that produced one of its operands, and starts a region of its own when none
      // did (or one that already reads one of its full-size inputs); smaller ops join any open
      // region of their shape. The ops of a _foreach_ optimizer
      // step come interleaved (the first op of every parameter, then the second, ...): joined in
      // that order, a large parameter's chain was cut across regions of kMaxRegionValues and
      // every value crossing a cut went through memory (AdamW over 16 parameters of 45056
      // elements: 9 regions writing 16 values each); by chain, each parameter's update is one
      // pass with its intermediates in tiles. Two open regions an op reads are merged into one
      // when the result still fits, so independent chains that meet later (x = f(a); y = g(b);
      // x + y) stay one pass as before.
      const bool by_chain = op.type.NumElements() >= kChainElements;
      // A full-size operand (not a broadcast) that an open region already reads: an op sharing
      // it joins that region, so the input is read once (a = x * 2; b = x + 1).
      auto shares_input = [&](const Open& r) {
        for (int o : op.operands) {
          if (o >= np && g.ops[o - np].code == OpCode::kBroadcastInDim) continue;
          if (std::find(r.counted.begin(), r.counted.end(), o) != r.counted.end()) return true;
        }
        return false;
      };
      // The open regions of the op's shape that produced one of its operands, in open order.
      auto producing = [&] {
        SmallVector<int, 4> reads;
        for (size_t j = 0; j < open.size(); ++j) {
          if (exe.regions[open[j].index].shape != op.type.dims) continue;
          for (int o : op.operands)
            if (region_of[o] == open[j].index) {
              reads.push_back(static_cast<int>(j));
              break;
            }
        }
        return reads;
      };
      auto open_of_shape = [&] {
        if (SmallVector<int, 4> reads = producing(); !reads.empty()) return reads[0];
        for (size_t j = 0; j < open.size(); ++j)
          if (exe.regions[open[j].index].shape == op.type.dims && (!by_chain || shares_input(open[j])))
            return static_cast<int>(j);
        return -1;
      };
      if (by_chain) {
        // Open regions of this shape that the op reads: merged into the first while they fit.
        const SmallVector<int, 4> reads = producing();
        for (size_t m = reads.size(); m-- > 1;) {
          Open& a = open[reads[0]];
          Open& b = open[reads[m]];
          FusedRegion& ra = exe.regions[a.index];
          FusedRegion& rb = exe.regions[b.index];
          std::vector<int> extra;  // b's inputs a does not count yet
          for (int o : b.counted)
            if (std::find(a.counted.begin(), a.counted.end(), o) == a.counted.end()) extra.push_back(o);
          if (ra.ops.size() + rb.ops.size() + a.counted.size() + extra.size() + 1 + op.operands.size() >
              static_cast<size_t>(kMaxRegionValues))
            continue;  // close_read below closes it instead
          a.counted.insert(a.counted.end(), extra.begin(), extra.end());
          for (int j : rb.ops) region_of[np + j] = a.index;
          ra.ops.insert(ra.ops.end(), rb.ops.begin(), rb.ops.end());
          std::sort(ra.ops.begin(), ra.ops.end());
          rb.ops.clear();  // dropped below, never emitted
          a.last_step = std::max(a.last_step, b.last_step);
          open.erase(open.begin() + reads[m]);
        }
      }
      // The op's outside inputs that region r has not counted yet.
      auto new_inputs = [&](const Open& r) {
        SmallVector<int, 4> in;
        for (int o : op.operands)
          if (region_of[o] != r.index && std::find(r.counted.begin(), r.counted.end(), o) == r.counted.end() &&
              std::find(in.begin(), in.end(), o) == in.end())
            in.push_back(o);
        return in;
      };
      // The executor holds a region's values in kMaxRegionValues register slots: a long chain
      // (e.g. a _foreach_ op over many same-shaped tensors) is split into several regions.
      int k = open_of_shape();
      if (k >= 0 && static_cast<int>(exe.regions[open[k].index].ops.size() + open[k].counted.size() + 1 +
                                     new_inputs(open[k]).size()) > kMaxRegionValues) {
        close_at(static_cast<size_t>(k));
        k = -1;
      }
      close_read(op.operands, k >= 0 ? open[k].index : -1);
      k = open_of_shape();  // closing others may have moved it
      if (k < 0) {
        if (open.size() >= kMaxOpen) close_at(0);
        exe.regions.emplace_back();
        exe.regions.back().shape = op.type.dims;
        open.push_back(Open{static_cast<int>(exe.regions.size()) - 1, 0, {}});
        k = static_cast<int>(open.size()) - 1;
      }
      Open& r = open[k];
      exe.regions[r.index].ops.push_back(i);
      for (int o : new_inputs(r)) r.counted.push_back(o);
      region_of[v] = r.index;
      r.last_step = work_steps();
      continue;
    }
    if (op.operands.empty()) {
      // Constants and iotas read nothing, so they can run before the open regions without
      // ending them (a constant in the middle of a chain must not split the fused pass).
      exe.steps.push_back(Step{StepKind::kKernel, i});
      continue;
    }
    close_read(op.operands, -1);
    if (kind == OpKind::Structural) {
      exe.steps.push_back(Step{StepKind::kView, i});
      exe.slots[v].kind = SlotKind::kView;
      ++views_emitted;
    } else {
      exe.steps.push_back(Step{StepKind::kKernel, i});
    }
    close_idle();
  }
  while (!open.empty()) close_at(0);
  {  // Regions merged into others (Note [Regions by chain]) are dropped; steps renumbered.
    std::vector<int> renumber(exe.regions.size(), -1);
    size_t kept = 0;
    for (size_t r = 0; r < exe.regions.size(); ++r) {
      if (exe.regions[r].ops.empty()) continue;
      renumber[r] = static_cast<int>(kept);
      if (kept != r) exe.regions[kept] = std::move(exe.regions[r]);
      ++kept;
    }
    exe.regions.resize(kept);
    for (Step& st : exe.steps)
      if (st.kind == StepKind::kFused) st.index = renumber[st.index];
    for (int& r : region_of)
      if (r >= 0) r = renumber[r];
  }

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
  for (auto& region : exe.regions) AssignRegionSlots(g, region);
  exe.producer_step.assign(nv, -1);
  for (size_t s = 0; s < exe.steps.size(); ++s) {
    const Step& st = exe.steps[s];
    if (st.kind == StepKind::kFused)
      for (int v : exe.regions[st.index].outputs) exe.producer_step[v] = static_cast<int>(s);
    else if (st.kind == StepKind::kRows)
      for (int v : exe.rows[st.index].Outputs()) exe.producer_step[v] = static_cast<int>(s);
    else
      exe.producer_step[np + st.index] = static_cast<int>(s);
  }

  for (int p = 0; p < np; ++p) exe.slots[p].kind = SlotKind::kParam;
  exe.last_read = LastReads(exe, &exe.last_view_read);
  exe.view_last_read = ViewLastReads(exe);
  exe.result_temps.clear();
  for (int r : exe.graph.results) exe.result_temps.push_back(ResultTemp(exe, r));
  PlanScratch(exe, exe.last_read);
  exe.last_read.resize(g.num_params());  // the executor reads the parameters' only
  exe.last_view_read.resize(g.num_params());
  return Status::Ok();
}

}  // namespace tpu::host
