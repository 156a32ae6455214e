// Why a program was compiled (again): the compile cache records each miss with what differs from
// the nearest cached program of the same structure -- an input's shape or dtype, an attribute,
// the compile options -- or that it was evicted, or that it is new. metrics.report() and
// torch_tpu.compile_cache.recompiles() show them.
#pragma once

#include <cstdint>
#include <string>

#include "ir/graph.h"

namespace tpu {

enum class CompileReason : int { kNew, kInputShape, kInputDtype, kResultType, kAttribute, kOptions, kEvicted, kCount };
const char* CompileReasonName(CompileReason r);

// Op codes and how values flow between them: programs that differ only in types or attributes
// (the same loop at another batch size, another scalar constant) hash alike.
uint64_t StructureHash(const Graph& g);

// The first difference between two programs of one structure, and its kind.
CompileReason Difference(const Graph& before, const Graph& now, std::string* what);

}  // namespace tpu
