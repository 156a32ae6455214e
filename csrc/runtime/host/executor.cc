// The host executor: runs an Executable's steps over the launch's bindings on the CPU.
#include "runtime/host/executor.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "runtime/host/kernels.h"

namespace tpu::host {
namespace {

bool Overlaps(const View& a, const View& b) {
  const char *alo, *ahi, *blo, *bhi;
  ViewExtent(a, &alo, &ahi);
  ViewExtent(b, &blo, &bhi);
  return alo < bhi && blo < ahi;
}

bool SameView(const View& a, const View& b) {
  return a.data == b.data && a.dtype == b.dtype && a.dims == b.dims && a.strides == b.strides;
}

// Whether parameter p is read only directly by ops of `region` (not through a view, by another
// step, or as a result). Only then may an output bound to p's identical view be written in
// place: the region reads each element just before it writes the same element.
bool OnlyReadByRegion(const Graph& g, int p, const FusedRegion& region) {
  for (int r : g.results)
    if (r == p) return false;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    bool uses = false;
    for (int o : g.ops[i].operands) uses |= o == p;
    if (uses && std::find(region.ops.begin(), region.ops.end(), static_cast<int>(i)) == region.ops.end())
      return false;
  }
  return true;
}

}  // namespace

Status HostExecutor::Run(const Launch& launch) {
  const Executable& e = *launch.executable;
  const Graph& g = e.graph;
  int np = g.num_params();
  int nv = g.num_values();
  if (static_cast<int>(launch.params.size()) != np || launch.results.size() != g.results.size())
    return Internal("launch of " + e.name + " has the wrong number of arguments");
  // Uninitialized (pages of temps that are written straight into results are never touched);
  // a very large scratch is not kept between launches.
  size_t need = static_cast<size_t>(e.scratch_bytes) + 64;
  if (scratch_capacity_ < need) {
    scratch_.reset(new char[need]);
    scratch_capacity_ = need;
  }
  char* scratch = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(scratch_.get()) + 63) & ~uintptr_t{63});
  struct TrimScratch {
    HostExecutor* self;
    ~TrimScratch() {
      if (self->scratch_capacity_ > (size_t{64} << 20)) {
        self->scratch_.reset();
        self->scratch_capacity_ = 0;
      }
    }
  } trim{this};
  views_.resize(nv);
  std::vector<View>& views = views_;
  for (int p = 0; p < np; ++p) {
    views[p] = launch.params[p].view();
    if (views[p].dims != g.params[p].dims || views[p].dtype != g.params[p].dtype)
      return Internal("argument " + std::to_string(p) + " of " + e.name + " does not match its type");
  }
  for (int v = np; v < nv; ++v) {
    if (e.slots[v].kind != SlotKind::kTemp) continue;
    const TensorType& t = g.TypeOf(v);
    views[v] = View{scratch + e.slots[v].offset, t.dtype, t.dims, ContiguousStrides(t.dims)};
  }
  // Write results straight into their bindings where that is safe: the producing step must
  // accept the binding's layout, and the binding must not overlap an input it could clobber.
  SmallVector<bool, 8> direct(g.results.size(), false);
  const std::vector<int>& producer_step = e.producer_step;
  for (size_t r = 0; r < g.results.size(); ++r) {
    int v = g.results[r];
    if (v < np || e.slots[v].kind != SlotKind::kTemp) continue;
    bool taken = false;
    for (size_t q = 0; q < r; ++q) taken |= direct[q] && g.results[q] == v;
    if (taken) continue;
    const View& out = launch.results[r].view();
    bool fused = e.steps[producer_step[v]].kind == StepKind::kFused;
    if (!fused && !out.IsContiguous()) continue;
    bool safe = true;
    for (int p = 0; p < np && safe; ++p) {
      if (!Overlaps(out, views[p])) continue;
      // An identical view read only by the same fused region is safe (each element is read
      // before it is written); anything else goes through the temp.
      safe = fused && SameView(out, views[p]) &&
             OnlyReadByRegion(g, p, e.regions[e.steps[producer_step[v]].index]);
    }
    for (size_t q = 0; q < launch.results.size() && safe; ++q)
      if (q != r && Overlaps(out, launch.results[q].view())) safe = false;
    if (!safe) continue;
    views[v] = out;
    direct[r] = true;
  }
  std::vector<std::unique_ptr<char[]>> extra;  // materialized layouts that could not be views
  for (const Step& st : e.steps) {
    switch (st.kind) {
      case StepKind::kFused:
        TPU_RETURN_IF_ERROR(RunFusedRegion(g, e.regions[st.index], views));
        break;
      case StepKind::kView: {
        const Op& op = g.ops[st.index];
        int v = np + st.index;
        const View& in = views[op.operands[0]];
        if (!ViewOf(op, in, &views[v])) {
          // Reshape of a layout that cannot be regrouped: copy contiguously first.
          View tmp{nullptr, in.dtype, in.dims, ContiguousStrides(in.dims)};
          extra.emplace_back(new char[std::max<int64_t>(1, tmp.NumElements()) * DTypeSize(in.dtype)]);
          tmp.data = extra.back().get();
          TPU_RETURN_IF_ERROR(CopyView(in, tmp));
          if (!ViewOf(op, tmp, &views[v])) return Internal("reshape of a contiguous view failed");
        }
        break;
      }
      case StepKind::kKernel: {
        const Op& op = g.ops[st.index];
        int v = np + st.index;
        const View& out = views[v];
        auto in = [&](int i) -> const View& { return views[op.operands[i]]; };
        switch (op.code) {
          case OpCode::kConstant: TPU_RETURN_IF_ERROR(RunConstant(op, out)); break;
          case OpCode::kIota: TPU_RETURN_IF_ERROR(RunIota(op, out)); break;
          case OpCode::kReduce: TPU_RETURN_IF_ERROR(RunReduce(op, in(0), in(1), out)); break;
          case OpCode::kArgReduce: TPU_RETURN_IF_ERROR(RunArgReduce(op, in(0), out)); break;
          case OpCode::kDotGeneral: TPU_RETURN_IF_ERROR(RunDotGeneral(op, in(0), in(1), out)); break;
          case OpCode::kConcatenate: {
            std::vector<View> ins;
            for (int o : op.operands) ins.push_back(views[o]);
            TPU_RETURN_IF_ERROR(RunConcatenate(op, ins, out));
            break;
          }
          case OpCode::kPad: TPU_RETURN_IF_ERROR(RunPad(op, in(0), in(1), out)); break;
          case OpCode::kGather: TPU_RETURN_IF_ERROR(RunGather(op, in(0), in(1), out)); break;
          case OpCode::kScatter: TPU_RETURN_IF_ERROR(RunScatter(op, in(0), in(1), in(2), out)); break;
          case OpCode::kRngBitGenerator: TPU_RETURN_IF_ERROR(RunRngBits(op, in(0), out)); break;
          case OpCode::kConvolution:
            TPU_RETURN_IF_ERROR(RunConvolution(op, in(0), in(1), out));
            break;
          case OpCode::kReduceWindow:
            TPU_RETURN_IF_ERROR(RunReduceWindow(op, in(0), in(1), out));
            break;
          case OpCode::kArgReduceWindow:
            TPU_RETURN_IF_ERROR(RunArgReduceWindow(op, in(0), in(1), out));
            break;
          case OpCode::kReverse:
            TPU_RETURN_IF_ERROR(RunReverse(op, in(0), out));
            break;
          case OpCode::kSort: TPU_RETURN_IF_ERROR(RunSort(op, in(0), out)); break;
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
          case OpCode::kReshape: case OpCode::kTranspose: case OpCode::kSlice:
            return Internal(std::string(OpName(op.code)) + " scheduled as a kernel step");
        }
        break;
      }
    }
  }
  // Results that read caller memory (parameters and views) are copied before those computed
  // into scratch, so a result bound in place over a parameter is written after the others
  // have read the parameter's old value.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t r = 0; r < g.results.size(); ++r) {
      int v = g.results[r];
      bool reads_caller_memory = v < np || e.slots[v].kind == SlotKind::kView;
      if (direct[r] || reads_caller_memory != (pass == 0)) continue;
      TPU_RETURN_IF_ERROR(CopyView(views[v], launch.results[r].view()));
    }
  }
  return Status::Ok();
}

}  // namespace tpu::host
