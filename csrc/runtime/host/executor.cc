// The host executor: runs an Executable's steps over the launch's bindings on the CPU.
#include "runtime/host/executor.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <cstring>
#include <memory>

#include "base/options.h"
#include "runtime/host/dynamic_slice.h"
#include "runtime/host/host_allocator.h"
#include "runtime/host/kernels.h"
#include "runtime/host/plan.h"
#include "runtime/host/row_kernels.h"

namespace tpu::host {
namespace {

// The byte ranges of a launch's parameters (or results), sorted, for its overlap queries: a
// training step's window binds hundreds of each, and testing every (result, parameter) and
// (result, result) pair -- building a View per result each time -- cost ~3 ms of a 12 ms ResNet-18
// fused step.
class Extents {
 public:
  void Add(const View& v) {
    Item item;
    ViewExtent(v, &item.lo, &item.hi);
    item.index = static_cast<int>(items_.size());
    items_.push_back(item);
  }
  void Index() {
    std::sort(items_.begin(), items_.end(), [](const Item& a, const Item& b) { return a.lo < b.lo; });
    max_hi_.resize(items_.size());
    for (size_t j = 0; j < items_.size(); ++j) max_hi_[j] = j ? std::max(max_hi_[j - 1], items_[j].hi) : items_[j].hi;
  }
  // Calls f(index) for every range that Overlaps [lo, hi) (the same test: a.lo < b.hi && b.lo < a.hi).
  template <typename F>
  void ForEachOverlap(const char* lo, const char* hi, F&& f) const {
    size_t end = std::lower_bound(items_.begin(), items_.end(), hi, [](const Item& a, const char* x) { return a.lo < x; }) -
                 items_.begin();
    for (size_t j = end; j-- > 0 && max_hi_[j] > lo;)
      if (items_[j].hi > lo) f(items_[j].index);
  }

 private:
  struct Item {
    const char *lo, *hi;
    int index;
  };
  SmallVector<Item, 8> items_;  // a one-op launch takes no heap memory for its few bindings
  SmallVector<const char*, 8> max_hi_;
};

bool SameView(const View& a, const View& b) {
  return a.data == b.data && a.dtype == b.dtype && a.dims == b.dims && a.strides == b.strides;
}

// One kernel step: `op` writes `out` from the views of its operands.
Status RunKernel(const Op& op, const std::vector<View>& views, const View& out) {
  auto in = [&](int i) -> const View& { return views[op.operands[i]]; };
  switch (op.code) {
    case OpCode::kConstant: return RunConstant(op, out);
    case OpCode::kIota: return RunIota(op, out);
    case OpCode::kReduce: return RunReduce(op, in(0), in(1), out);
    case OpCode::kArgReduce: return RunArgReduce(op, in(0), out);
    case OpCode::kDotGeneral: return RunDotGeneral(op, in(0), in(1), out);
    case OpCode::kConcatenate: {
      std::vector<View> ins;
      for (int o : op.operands) ins.push_back(views[o]);
      return RunConcatenate(op, ins, out);
    }
    case OpCode::kPad: return RunPad(op, in(0), in(1), out);
    case OpCode::kGather: return RunGather(op, in(0), in(1), out);
    case OpCode::kScatter: return RunScatter(op, in(0), in(1), in(2), out);
    case OpCode::kRngBitGenerator: return RunRngBits(op, in(0), out);
    case OpCode::kCheck: return RunCheck(op, in(0), in(1), out);
    case OpCode::kConvolution: return RunConvolution(op, in(0), in(1), out);
    case OpCode::kReduceWindow: return RunReduceWindow(op, in(0), in(1), out);
    case OpCode::kArgReduceWindow: return RunArgReduceWindow(op, in(0), in(1), out);
    case OpCode::kReverse: return RunReverse(op, in(0), out);
    case OpCode::kSort: return RunSort(op, in(0), out);
    case OpCode::kDynamicUpdateSlice: return RunDynamicUpdateSlice(op, views, out);
    case OpCode::kParameterPlaceholder:
    case OpCode::kAbs: case OpCode::kNegate: case OpCode::kSign: case OpCode::kExp:
    case OpCode::kExpm1: case OpCode::kLog: case OpCode::kLog1p: case OpCode::kSqrt:
    case OpCode::kRsqrt: case OpCode::kTanh: case OpCode::kLogistic: case OpCode::kSine:
    case OpCode::kCosine: case OpCode::kFloor: case OpCode::kCeil:
    case OpCode::kRoundNearestEven: case OpCode::kNot: case OpCode::kIsFinite:
    case OpCode::kErf: case OpCode::kConvert: case OpCode::kAdd: case OpCode::kSubtract:
    case OpCode::kMultiply: case OpCode::kDivide: case OpCode::kRemainder:
    case OpCode::kPower: case OpCode::kMaximum: case OpCode::kMinimum: case OpCode::kAtan2:
    case OpCode::kAnd: case OpCode::kOr: case OpCode::kXor: case OpCode::kCompare:
    case OpCode::kSelect: case OpCode::kClamp: case OpCode::kBroadcastInDim:
    case OpCode::kReshape: case OpCode::kTranspose: case OpCode::kSlice: case OpCode::kDynamicSlice:
    case OpCode::kGetDimensionSize: case OpCode::kSetDimensionSize:  // made static before planning
      break;
  }
  return Internal(std::string(OpName(op.code)) + " scheduled as a kernel step");
}

// Option host_profile: time per op code (and per fused region), printed at exit. The first run
// of each name is kept apart: it pays once-per-process costs (a oneDNN primitive's creation and
// JIT, first-touch page faults) that would otherwise read as a slow kernel in a short run.
struct StepProfile {
  struct Entry {
    int64_t count = 0, ns = 0, first_ns = 0;  // ns: every run after the first
  };
  std::mutex mu;
  std::map<std::string, Entry> by_op;
  ~StepProfile() {
    if (by_op.empty()) return;
    std::vector<std::pair<int64_t, std::string>> rows;
    int64_t total = 0, first = 0;
    for (auto& [name, e] : by_op) {
      rows.emplace_back(e.ns, name);
      total += e.ns;
      first += e.first_ns;
    }
    std::sort(rows.rbegin(), rows.rend());
    std::fprintf(stderr,
                 "torch_tpu host_profile: %.1f ms in program steps after each one's first run (first runs: %.1f ms "
                 "more, once-per-process costs such as oneDNN primitive creation)\n",
                 total / 1e6, first / 1e6);
    for (auto& [ns, name] : rows) {
      const Entry& e = by_op[name];
      std::fprintf(stderr, "  %-40s %8ld steps %10.2f ms %5.1f%%   first run %.2f ms\n", name.c_str(),
                   static_cast<long>(e.count - 1), ns / 1e6, 100.0 * ns / std::max<int64_t>(total, 1), e.first_ns / 1e6);
    }
  }
  void Add(const std::string& name, int64_t ns) {
    std::lock_guard<std::mutex> lock(mu);
    Entry& e = by_op[name];
    if (e.count++ == 0) e.first_ns = ns;
    else e.ns += ns;
  }
};
StepProfile& Profile() {
  static StepProfile profile;
  return profile;
}

std::string StepName(const HostExecutable& e, const Step& st, const std::vector<View>& views) {
  if (st.kind == StepKind::kFused) {
    // Small regions are named by their ops and shape: they are the ones fusion did not grow.
    const FusedRegion& r = e.regions[st.index];
    std::string n = "fused region (" + std::to_string(r.ops.size()) + " ops";
    for (FusedRegion::Composite c : r.composite)
      if (c == FusedRegion::Composite::kGeluErf) n += ", gelu";
      else if (c == FusedRegion::Composite::kGeluErfBackward) n += ", gelu backward";
      else if (c == FusedRegion::Composite::kSilu) n += ", silu";
      else if (c == FusedRegion::Composite::kSiluBackward) n += ", silu backward";
      else if (c == FusedRegion::Composite::kBinaryChain) n += ", binary chain";
    n += ")";
    if (r.ops.size() <= 3) {
      n += ":";
      for (int o : r.ops) n += std::string(" ") + OpName(e.graph.ops[o].code);
      n += " " + DimsToString(r.shape);
    }
    return n;
  }
  if (st.kind == StepKind::kRows) {
    const RowStep& r = e.rows[st.index];
    return std::string(RowKindName(r.kind)) + " " + DimsToString(e.graph.TypeOf(r.x).dims);
  }
  const Op& op = e.graph.ops[st.index];
  std::string n = OpName(op.code);
  if (st.kind == StepKind::kView) return n + " (view)";
  if (op.code == OpCode::kDotGeneral) {
    for (int o : op.operands) {
      const View& v = views[o];
      n += " " + DimsToString(v.dims) + "/" + DimsToString(v.strides);
    }
  } else if (op.code == OpCode::kReduce || op.code == OpCode::kConcatenate || op.code == OpCode::kGather ||
             op.code == OpCode::kScatter || op.code == OpCode::kConvolution || op.code == OpCode::kReduceWindow) {
    // The first operand's shape and strides, and the result's shape: which of them is slow.
    const View& v = views[op.operands[0]];
    n += " " + DimsToString(v.dims) + "/" + DimsToString(v.strides) + " -> " + DimsToString(op.type.dims);
  }
  return n;
}

Status RunRows(const RowStep& r, const std::vector<View>& views) {
  auto opt = [&](int v) { return v >= 0 ? &views[v] : nullptr; };
  switch (r.kind) {
    case RowKind::kSoftmax: return SoftmaxRows(views[r.x], r.dim, false, views[r.out], opt(r.fill));
    case RowKind::kLogSoftmax: return SoftmaxRows(views[r.x], r.dim, true, views[r.out]);
    case RowKind::kSoftmaxBackward: return SoftmaxBackwardRows(views[r.x], views[r.y], r.dim, false, views[r.out]);
    case RowKind::kLogSoftmaxBackward: return SoftmaxBackwardRows(views[r.x], views[r.y], r.dim, true, views[r.out]);
    case RowKind::kVariance: return VarianceRows(views[r.x], r.dim, views[r.out], opt(r.mean));
    case RowKind::kLayerNorm:
    case RowKind::kRmsNorm: {
      const View& e = views[r.eps];
      if (e.dtype != DType::kF32 || e.NumElements() != 1) return Internal("norm rows: eps is not one float");
      float eps;
      std::memcpy(&eps, e.data, 4);
      if (r.kind == RowKind::kRmsNorm) return RmsNormRows(views[r.x], r.dim, opt(r.weight), eps, views[r.out], opt(r.rstd));
      return LayerNormRows(views[r.x], r.dim, opt(r.weight), opt(r.bias), eps, views[r.out], opt(r.mean), opt(r.rstd));
    }
  }
  return Internal("unknown row step");
}

// The part of `r` whose values do not depend on a tainted input; marks the outputs that do as
// tainted.
FusedRegion UntaintedPart(const Graph& g, const FusedRegion& r, std::vector<uint8_t>& tainted) {
  const int np = g.num_params();
  FusedRegion sub;
  sub.shape = r.shape;
  for (int i : r.ops) {
    bool bad = false;
    for (int o : g.ops[i].operands) bad |= tainted[o] != 0;
    if (bad) tainted[np + i] = 1;
    else sub.ops.push_back(i);
  }
  for (int v : r.inputs) {
    if (tainted[v]) continue;
    bool read = false;
    for (int i : sub.ops)
      for (int o : g.ops[i].operands) read |= o == v;
    if (read) sub.inputs.push_back(v);
  }
  for (int v : r.outputs)
    if (!tainted[v]) sub.outputs.push_back(v);
  AssignRegionSlots(g, sub);
  return sub;
}

}  // namespace

namespace {
Status CheckMemory(const Buffer* b) {
  return b->materialized() ? Status::Ok() : Internal("a queue copy reached a device buffer that has no memory");
}
}  // namespace

Status HostExecutor::Write(Buffer* dst, int64_t offset, const void* src, int64_t nbytes) {
  TPU_RETURN_IF_ERROR(CheckMemory(dst));
  if (offset < 0 || offset + nbytes > dst->nbytes()) return Internal("write past the end of a device buffer");
  std::memcpy(static_cast<char*>(dst->contents()) + offset, src, static_cast<size_t>(nbytes));
  return Status::Ok();
}

Status HostExecutor::Read(Buffer* src, int64_t offset, int64_t nbytes, void* dst) {
  TPU_RETURN_IF_ERROR(CheckMemory(src));
  if (offset < 0 || offset + nbytes > src->nbytes()) return Internal("read past the end of a device buffer");
  std::memcpy(dst, static_cast<const char*>(src->contents()) + offset, static_cast<size_t>(nbytes));
  return Status::Ok();
}

Status HostExecutor::Copy(Buffer* src, int64_t src_offset, Buffer* dst, int64_t dst_offset, int64_t nbytes) {
  TPU_RETURN_IF_ERROR(CheckMemory(src));
  TPU_RETURN_IF_ERROR(CheckMemory(dst));
  if (src_offset < 0 || src_offset + nbytes > src->nbytes() || dst_offset < 0 || dst_offset + nbytes > dst->nbytes())
    return Internal("copy past the end of a device buffer");
  std::memmove(static_cast<char*>(dst->contents()) + dst_offset,
               static_cast<const char*>(src->contents()) + src_offset, static_cast<size_t>(nbytes));
  return Status::Ok();
}

Status HostExecutor::Run(const Launch& launch, RunReport* report) {
  // The host queue only ever runs what the host backend compiled.
  const HostExecutable& e = static_cast<const HostExecutable&>(*launch.executable);
  const Graph& g = e.graph;
  int np = g.num_params();
  int nv = g.num_values();
  if (static_cast<int>(launch.params.size()) != np || launch.results.size() != g.results.size())
    return Internal("launch of " + e.name() + " has the wrong number of arguments");
  views_.resize(nv);
  std::vector<View>& views = views_;
  for (int p = 0; p < np; ++p) {
    views[p] = HostView(launch.params[p]);
    if (views[p].dims != g.params[p].dims || views[p].dtype != g.params[p].dtype)
      return Internal("argument " + std::to_string(p) + " of " + e.name() + " does not match its type");
  }
  // Write results straight into their bindings where that is safe: the producing step must
  // accept the binding's layout, and the binding must not overlap an input it could clobber.
  SmallVector<bool, 8> direct(g.results.size(), false);
  bool all_direct = true;  // every result in [temp_bytes, scratch_bytes): that range is not taken
  const std::vector<int>& producer_step = e.producer_step;
  Extents param_extents, result_extents;
  for (int p = 0; p < np; ++p) param_extents.Add(views[p]);
  param_extents.Index();
  std::vector<View> result_views(g.results.size());
  for (size_t r = 0; r < g.results.size(); ++r) {
    result_views[r] = HostView(launch.results[r]);
    result_extents.Add(result_views[r]);
  }
  result_extents.Index();
  const std::vector<int>& written = e.result_temps;  // the temp each result's binding receives
  for (size_t r = 0; r < g.results.size(); ++r) {
    const int v = written[r];  // Note [Reshaped results]
    const bool reshaped = v != g.results[r];
    if (v < np || e.slots[v].kind != SlotKind::kTemp) continue;
    bool taken = false;
    for (size_t q = 0; q < r; ++q) taken |= direct[q] && written[q] == v;
    if (taken) continue;
    const View& out = result_views[r];
    const char *lo, *hi;
    ViewExtent(out, &lo, &hi);
    const Step& made_by = e.steps[producer_step[v]];
    bool fused = made_by.kind == StepKind::kFused;
    // A fused region writes any layout; so does a convolution (channels-last is oneDNN's own
    // layout, which a contiguous temp turned into a reorder to plain and a copy back per call;
    // a layout it cannot address it computes plain and copies itself, RunConvolution).
    bool any_layout = fused || (made_by.kind == StepKind::kKernel && g.ops[made_by.index].code == OpCode::kConvolution);
    bool safe = (any_layout && !reshaped) || out.IsContiguous();
    if (safe) param_extents.ForEachOverlap(lo, hi, [&](int p) {
      // A result bound over a parameter (an in-place update) is written there by a fused region
      // when every step that reads the parameter's memory runs before the region, or is the
      // region reading it as this same view, not through a view of it (each element just before
      // it writes that element); else it goes through its temp. (A region does not fail part way:
      // the parameter is never left half written.) Other views of the same memory are parameters
      // too (a weight and its transpose): each must be read before.
      int s = producer_step[v];
      safe = safe && fused && !reshaped && e.last_view_read[p] < s &&
             (e.last_read[p] < s || (e.last_read[p] == s && SameView(out, views[p])));
    });
    if (safe) result_extents.ForEachOverlap(lo, hi, [&](int q) { safe = safe && q == static_cast<int>(r); });
    if (!safe && e.slots[v].offset + TempBytes(g, v) > e.temp_bytes) all_direct = false;
    direct[r] = safe;
  }
  // Scratch for the temps (Note [Scratch reuse], [Result scratch]), from the device's memory for
  // the launch's duration; uninitialized (pages of temps written straight into results are never
  // touched).
  struct Scratch {
    HostAllocator* allocator;
    int64_t bytes;
    void* block = nullptr;
    std::unique_ptr<char[]> heap;
    ~Scratch() {
      if (block) allocator->ReturnScratch(block, bytes);
    }
  } held{allocator_, all_direct ? e.temp_bytes : e.scratch_bytes, nullptr, nullptr};
  char* scratch = nullptr;
  if (held.bytes > 0) {
    if (allocator_) {
      TPU_ASSIGN_OR_RETURN(held.block, allocator_->TakeScratch(held.bytes));
      scratch = static_cast<char*>(held.block);  // 64-byte aligned
    } else {
      held.heap.reset(new char[held.bytes + 64]);
      scratch = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(held.heap.get()) + 63) & ~uintptr_t{63});
    }
  }
  for (int v = np; v < nv; ++v) {
    // A range past the scratch taken is a direct result's (its view is the binding, below).
    if (e.slots[v].kind != SlotKind::kTemp || e.slots[v].offset + TempBytes(g, v) > held.bytes) continue;
    const TensorType& t = g.TypeOf(v);
    views[v] = View{scratch + e.slots[v].offset, t.dtype, t.dims, ContiguousStrides(t.dims)};
    if (IsCompactIota(g, v))  // Note [Compact iota]
      for (int d = 0; d < t.rank(); ++d) views[v].strides[d] = d == g.Producer(v).attrs.i ? 1 : 0;
  }
  for (size_t r = 0; r < g.results.size(); ++r) {
    if (!direct[r]) continue;
    const int v = written[r];
    if (v == g.results[r]) views[v] = std::move(result_views[r]);
    else views[v] = View{result_views[r].data, g.TypeOf(v).dtype, g.TypeOf(v).dims, ContiguousStrides(g.TypeOf(v).dims)};
  }
  // Note [Copied views]: a reshape whose operand's layout cannot be regrouped (a transposed
  // slice flattened) copies the operand contiguously first, which the plan cannot foresee: a
  // parameter's layout is its binding's (strided bindings). The copy comes from the device's
  // scratch (counted in its memory, its pages reused: a fresh heap block per copy cost a GPT
  // step ~1,900 page faults) and goes back after the last step that reads it or a view of it
  // (ViewLastReads), not at the end of the launch.
  struct CopiedViews {
    struct Copy {
      void* block;
      int64_t bytes;
      int last;
    };
    HostAllocator* allocator;
    std::vector<Copy> held;
    std::vector<std::unique_ptr<char[]>> heap;  // without an allocator (tests)
    StatusOr<void*> Take(int64_t bytes, int last) {
      if (!allocator) {
        heap.emplace_back(new char[bytes]);
        return static_cast<void*>(heap.back().get());
      }
      TPU_ASSIGN_OR_RETURN(void* block, allocator->TakeScratch(bytes));
      held.push_back(Copy{block, bytes, last});
      return block;
    }
    void ReleaseThrough(int step) {  // the copies nothing reads after `step`
      for (size_t i = 0; i < held.size();) {
        if (held[i].last > step) {
          ++i;
          continue;
        }
        allocator->ReturnScratch(held[i].block, held[i].bytes);
        held[i] = held.back();
        held.pop_back();
      }
    }
    ~CopiedViews() { ReleaseThrough(INT_MAX); }
  } copies{allocator_, {}, {}};
  // After a failed step, the steps that read what it (or a skipped step) writes are skipped and
  // everything else runs: the results that do not depend on the failure are computed, as when the
  // program's ops run one at a time (RunReport).
  Status failure;
  std::vector<uint8_t>& tainted = tainted_;
  auto step_inputs_tainted = [&](const Step& st) {
    if (st.kind == StepKind::kFused) {
      for (int v : e.regions[st.index].inputs)
        if (tainted[v]) return true;
      return false;
    }
    if (st.kind == StepKind::kRows) {
      for (int v : e.rows[st.index].Inputs())
        if (tainted[v]) return true;
      return false;
    }
    for (int v : g.ops[st.index].operands)
      if (tainted[v]) return true;
    return false;
  };
  auto taint_outputs = [&](const Step& st) {
    if (st.kind == StepKind::kFused)
      for (int v : e.regions[st.index].outputs) tainted[v] = 1;
    else if (st.kind == StepKind::kRows)
      for (int v : e.rows[st.index].Outputs()) tainted[v] = 1;
    else
      tainted[np + st.index] = 1;
  };
  const bool profile = Flags().host_profile;
  for (int step = 0; step < static_cast<int>(e.steps.size()); ++step) {
    const Step& st = e.steps[step];
    if (!copies.held.empty()) copies.ReleaseThrough(step - 1);
    if (!failure.ok() && step_inputs_tainted(st)) {
      if (st.kind == StepKind::kFused) {
        // A region can hold independent chains (Note [Open regions]): the ops that do not
        // depend on the failure still run, as they would one at a time.
        FusedRegion sub = UntaintedPart(g, e.regions[st.index], tainted);
        if (!sub.ops.empty() && !sub.outputs.empty()) {
          Status sub_status = RunFusedRegion(g, sub, views);
          if (!sub_status.ok())
            for (int v : sub.outputs) tainted[v] = 1;
        }
        continue;
      }
      taint_outputs(st);
      continue;
    }
    auto t0 = profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    Status st_status;
    bool copied_view = false;  // a reshape that had to copy (named apart in the profile)
    switch (st.kind) {
      case StepKind::kFused:
        st_status = RunFusedRegion(g, e.regions[st.index], views);
        break;
      case StepKind::kView: {
        const Op& op = g.ops[st.index];
        int v = np + st.index;
        const View& in = views[op.operands[0]];
        if (op.code == OpCode::kDynamicSlice) {
          DynamicSliceView(op, views, &views[v]);
        } else if (!ViewOf(op, in, &views[v])) {
          // Reshape of a layout that cannot be regrouped: copy contiguously first.
          copied_view = true;
          View tmp{nullptr, in.dtype, in.dims, ContiguousStrides(in.dims)};
          StatusOr<void*> block = copies.Take(std::max<int64_t>(1, tmp.NumElements()) * DTypeSize(in.dtype),
                                              std::max(step, e.view_last_read[v]));
          if (!block.ok()) {
            st_status = block.status();
            break;
          }
          tmp.data = *block;
          st_status = CopyView(in, tmp);
          if (st_status.ok() && !ViewOf(op, tmp, &views[v])) st_status = Internal("reshape of a contiguous view failed");
        }
        break;
      }
      case StepKind::kKernel: {
        st_status = RunKernel(g.ops[st.index], views, views[np + st.index]);
        break;
      }
      case StepKind::kRows:
        st_status = RunRows(e.rows[st.index], views);
        break;
    }
    if (profile) {
      std::string name = StepName(e, st, views);
      if (copied_view) {  // which layout had to be copied
        const View& from = views[g.ops[st.index].operands[0]];
        name += " copied " + DimsToString(from.dims) + "/" + DimsToString(from.strides) + " -> " +
                DimsToString(views[np + st.index].dims);
      }
      Profile().Add(name, std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
    }
    if (!st_status.ok()) {
      if (failure.ok()) {
        failure = st_status;
        report->failed_op = st.kind == StepKind::kFused  ? e.regions[st.index].ops.front()
                            : st.kind == StepKind::kRows ? e.rows[st.index].out - np
                                                         : st.index;
        tainted.assign(nv, 0);
      }
      taint_outputs(st);
    }
  }
  // Results that read caller memory (parameters and views) are copied before those computed
  // into scratch, so a result bound in place over a parameter is written after the others
  // have read the parameter's old value.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t r = 0; r < g.results.size(); ++r) {
      int v = g.results[r];
      bool reads_caller_memory = v < np || e.slots[v].kind == SlotKind::kView;
      if (direct[r] || reads_caller_memory != (pass == 0) || (!failure.ok() && tainted[v])) continue;
      TPU_RETURN_IF_ERROR(CopyView(views[v], HostView(launch.results[r])));
    }
  }
  if (!failure.ok()) {
    report->failed_results.resize(g.results.size());
    for (size_t r = 0; r < g.results.size(); ++r) report->failed_results[r] = tainted[g.results[r]];
  }
  return failure;
}

}  // namespace tpu::host
