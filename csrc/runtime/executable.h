// Executable: what a device runs. The compiler (csrc/compiler) builds it from a verified Graph:
// fusion groups elementwise chains into regions, the buffer plan gives every intermediate a slot.
// It is independent of argument strides: views arrive with each launch.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace tpu {

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
};

enum class StepKind : uint8_t { kFused, kKernel, kView };
struct Step {
  StepKind kind;
  int index;  // region index (kFused) or op index (kKernel, kView)
};

enum class SlotKind : uint8_t { kParam, kTemp, kView, kInRegion };
struct ValueSlot {
  SlotKind kind = SlotKind::kTemp;
  int64_t offset = 0;  // byte offset into scratch (kTemp)
};

struct Executable {
  Graph graph;   // after passes: what the steps index into
  Graph source;  // as submitted: the cache compares it to rule out fingerprint collisions
  uint64_t fingerprint = 0;
  std::vector<FusedRegion> regions;
  std::vector<Step> steps;
  std::vector<ValueSlot> slots;  // one per value
  std::vector<int> producer_step;  // per value: the step that writes it (-1 for parameters)
  int64_t scratch_bytes = 0;
  // Rough cost: elements produced, times the contraction length for dot_general/convolution and
  // the input length for reductions. The host queue runs programs below a small work bound on
  // the submitting thread when it is idle (see Queue::EnqueueLaunch).
  int64_t work = 0;
  std::string name;  // for errors and profiles
};

using ExecutablePtr = std::shared_ptr<const Executable>;

}  // namespace tpu
