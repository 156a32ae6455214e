// dynamic_slice as a view, and dynamic_update_slice: their start indices are values read when
// the step runs (i64 scalars), clamped to [0, dim - size] as StableHLO specifies.
#pragma once

#include <vector>

#include "runtime/host/kernels.h"

namespace tpu::host {

// The view of views[op.operands[0]] that op (a kDynamicSlice) selects.
void DynamicSliceView(const Op& op, const std::vector<View>& views, View* out);
// out = operand with update written at the starts. `out` may be the operand's own memory (then
// only the update's elements are written).
Status RunDynamicUpdateSlice(const Op& op, const std::vector<View>& views, const View& out);

}  // namespace tpu::host
