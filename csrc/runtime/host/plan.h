// The host executor's compiled form of a program (its Executable): the graph after the IR
// passes, grouped into steps -- fused elementwise regions, kernels, and layout ops that become
// views -- with a scratch slot for every intermediate.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "runtime/executable.h"

namespace tpu::host {

// Register slots the host executor gives one fused region (the planner never exceeds it).
constexpr int kMaxRegionValues = 64;

// A fused elementwise region: one pass over `shape`, reading `inputs` (possibly through layout
// ops inside the region, which become strided loads) and writing `outputs`.
struct FusedRegion {
  Dims shape;
  std::vector<int> ops;      // op indices, in order (all elementwise)
  std::vector<int> inputs;   // values produced outside the region
  std::vector<int> outputs;  // values used after the region or returned
  // Register slots (inputs first, then one per op), precomputed so a launch does no lookups.
  std::vector<SmallVector<int, 4>> operand_slots;  // per op
  std::vector<int> output_slots;                   // per output
  // Note [Region composites] (composite.cc): op chains inside the region that one kernel computes.
  // Per op, empty when the region has none: kCovered ops do not run (only the chain reads their
  // values), and the composite op at a chain's last op computes that op's value from the slot
  // composite_input names.
  enum class Composite : uint8_t { kNone, kCovered, kGeluErf, kGeluErfBackward, kSilu, kSiluBackward, kBinaryChain };
  std::vector<Composite> composite;
  std::vector<int> composite_input;   // x's slot
  std::vector<int> composite_input2;  // kGeluErfBackward, kSiluBackward: dy's slot
  // kBinaryChain (Note [Binary chains], composite.cc): the chain's ops (region positions) in order,
  // ending at this op; empty for other ops. Set with the composites, never stored.
  std::vector<SmallVector<int, 4>> chain;
  // Note [Composites from bfloat16] (elementwise.cc): the position of the region's one composite
  // (a gelu or silu) when the region is only bfloat16 -> float32, that chain, float32 -> bfloat16
  // into its one output; -1 otherwise. Set with the composites, never stored.
  int bf16_composite = -1;
  // Note [Widening reads] (elementwise.cc), set with the composites, never stored: per input,
  // whether it is bfloat16 and read only by converts to float32 whose results only float32 binary
  // ops with a widening kernel read (a contiguous one is then read in place); and whether the
  // region ends in such an op and a convert of its result to bfloat16 that one output alone reads.
  std::vector<bool> widenable;
  bool rounded_tail = false;
  // Per op, set with the composites, never stored: a float32 binary op that no composite covers
  // and whose vector kernel may widen an operand (Note [Widening reads]) or hold a scalar one in a
  // register (Note [Scalar operands], elementwise_simd.cc).
  std::vector<bool> binary_f32;
  // Per op, set with binary_f32: binary_f32, or a step of a binary chain (Note [Binary chains],
  // composite.cc) -- the ops that widen their bfloat16 leaves and read a scalar's splat as one
  // value.
  std::vector<bool> f32_steps;
};

// Finds the region's composites (Note [Region composites]); AssignRegionSlots calls it, and so
// does reading a stored plan. Fills region.composite and composite_input, or leaves them empty.
void MatchComposites(const Graph& g, FusedRegion& region);
// Sets region.binary_f32, widenable and rounded_tail (Note [Widening reads]); MatchComposites calls
// it, after the composites (a composite's ops never widen).
void MatchWidening(const Graph& g, FusedRegion& region);

// A chain of ops that one row kernel computes (Note [Row chains], row_match.cc).
enum class RowKind : uint8_t { kSoftmax, kLogSoftmax, kLayerNorm, kSoftmaxBackward, kLogSoftmaxBackward, kRmsNorm, kVariance };
struct RowStep {
  RowKind kind = RowKind::kSoftmax;
  int x = -1;            // the chain's input value (softmax backward: the gradient)
  int y = -1;            // softmax backward: the forward's output
  int out = -1;          // the value it computes
  int dim = 0;           // the row dim of x (layer norm: the first normalized dim)
  // Layer norm: weight, bias and eps (a rank-0 value) read, mean and rstd (the per-row
  // statistics, read by ops outside the chain) written; -1 where the chain has none. RMS norm:
  // weight, eps and rstd likewise. Variance: out is the sum of squared deviations, mean as layer
  // norm's.
  int weight = -1, bias = -1, eps = -1, mean = -1, rstd = -1;
  // Softmax: the value (rank-0 float32) of the rows whose every x is -inf when the chain ends in
  // the safe-softmax guard (Note [Safe softmax rows], row_kernels.cc); -1 without one.
  int fill = -1;
  std::vector<int> ops;  // the chain's op indices: no other step runs them
  // The values the step reads and writes.
  SmallVector<int, 4> Inputs() const {
    SmallVector<int, 4> v{x};
    for (int o : {y, weight, bias, eps, fill})
      if (o >= 0) v.push_back(o);
    return v;
  }
  SmallVector<int, 4> Outputs() const {
    SmallVector<int, 4> v{out};
    for (int o : {mean, rstd})
      if (o >= 0) v.push_back(o);
    return v;
  }
  bool operator==(const RowStep& o) const {
    return kind == o.kind && x == o.x && y == o.y && out == o.out && dim == o.dim && weight == o.weight && bias == o.bias &&
           eps == o.eps && mean == o.mean && rstd == o.rstd && fill == o.fill && ops == o.ops;
  }
};
const char* RowKindName(RowKind k);
// The row chains of `g`, in the order of their first op.
std::vector<RowStep> MatchRowChains(const Graph& g);

enum class StepKind : uint8_t { kFused, kKernel, kView, kRows };
struct Step {
  StepKind kind;
  int index;  // region index (kFused), op index (kKernel, kView) or row step index (kRows)
};

enum class SlotKind : uint8_t { kParam, kTemp, kView, kInRegion };
struct ValueSlot {
  SlotKind kind = SlotKind::kTemp;
  int64_t offset = 0;  // byte offset into scratch (kTemp)
};

class HostExecutable final : public Executable {
 public:
  int SourceOp(int executed_op) const override {
    return executed_op >= 0 && executed_op < static_cast<int>(graph.ops.size()) ? graph.ops[executed_op].src : -1;
  }

  Graph graph;  // after passes: what the steps index into
  std::vector<FusedRegion> regions;
  std::vector<RowStep> rows;
  std::vector<Step> steps;
  std::vector<ValueSlot> slots;    // one per value
  std::vector<int> producer_step;  // per value: the step that writes it (-1 for parameters)
  int64_t scratch_bytes = 0;  // every temp's range
  int64_t temp_bytes = 0;     // all but the results: Note [Result scratch] (planner.cc)
  // Per parameter: LastReads and its reads through views (derived when a stored plan is read).
  std::vector<int> last_read, last_view_read;
  // Per view value: ViewLastReads (derived when a stored plan is read).
  std::vector<int> view_last_read;
  // Per result: ResultTemp, the value its binding receives (derived when a stored plan is read).
  std::vector<int> result_temps;
};

// Note [Compact iota]: an iota's value along its dimension is the same in every other position,
// so its temp holds one run of dims[i] values and is read as a broadcast view (stride 0 on the
// other dims): a one-hot compare (nll_loss backward) reads 2048 indices, not a 2048x2048 i64
// tensor written first. An iota written straight into a result binding fills it whole.
inline bool IsCompactIota(const Graph& g, int v) {
  return v >= g.num_params() && g.Producer(v).code == OpCode::kIota && g.TypeOf(v).rank() > 1;
}
// The scratch bytes value v's temp takes.
inline int64_t TempBytes(const Graph& g, int v) {
  const TensorType& t = g.TypeOf(v);
  if (IsCompactIota(g, v)) return t.dims[g.Producer(v).attrs.i] * DTypeSize(t.dtype);
  return t.ByteSize();
}

// Note [Reshaped results]: most lowerings end in a reshape to the output tensor's sizes, so a
// result is often a view of a temp. That temp is written straight into the result's binding
// (contiguous, viewed in the temp's own dims) as a result itself would be, and is planned with the
// results (Note [Result scratch]): no copy after the launch, no scratch held for it. Returns the
// temp whose memory result value v is through reshapes, or v itself (the plan keeps it per
// result: HostExecutable::result_temps).
inline int ResultTemp(const HostExecutable& exe, int v) {
  const Graph& g = exe.graph;
  int u = v;
  while (u >= g.num_params() && exe.slots[u].kind == SlotKind::kView && g.Producer(u).code == OpCode::kReshape)
    u = g.Producer(u).operands[0];
  if (u == v || u < g.num_params() || exe.slots[u].kind != SlotKind::kTemp || IsCompactIota(g, u)) return v;
  return u;
}

// Fills `region`'s operand and output slots from its ops, inputs and outputs.
void AssignRegionSlots(const Graph& g, FusedRegion& region);

// Groups `exe.graph` into steps and plans its scratch memory (planner.cc).
Status PlanExecutable(HostExecutable& exe);

// Per value: the last step that reads its memory, directly or through views of it (steps.size()
// for what a result reads), or -1; views' own entries stay -1. `through_views` (optional): the
// same, counting only the reads through views.
std::vector<int> LastReads(const HostExecutable& exe, std::vector<int>* through_views);

// Per value that is a view (SlotKind::kView): the last step that reads it or a view derived from
// it (steps.size() for a result), or -1 when nothing does; -1 for every other value. A reshape
// whose operand's layout cannot be regrouped is copied at run time (Note [Copied views],
// executor.cc): its copy is released after this step.
std::vector<int> ViewLastReads(const HostExecutable& exe);

}  // namespace tpu::host
