// The target-independent part of compiling a program: verification and the IR passes
// (compiler/passes/). The compile cache in front of every backend's Compile: compile_cache.h.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "ir/graph.h"

namespace tpu {

// Bumped whenever a change here or in a backend's code generation changes what a program
// compiles to (part of every compile-cache key, the persistent tier's included).
constexpr uint32_t kCompilerVersion = 2;

// Verifies `graph` and runs the pass pipeline over it. Each op's `src` is set to its index in the
// graph as given, and passes carry it to the ops they make from it.
Status Optimize(Graph& graph);

// Rough cost of running a graph (Executable::work()).
int64_t EstimateWork(const Graph& graph);
// Its flops, for weighing work against work (fused mode's option window_work, Note [Windows by
// work]): a matmul or convolution two per multiply-add, any other op 16 per element it writes (a
// memory-bound op runs at roughly that fraction of the matmul rate on the host), layout ops
// (views, broadcasts), parameters and constants nothing.
int64_t EstimateFlops(const Graph& graph);

}  // namespace tpu

#include "compiler/compile_cache.h"  // IWYU pragma: export
