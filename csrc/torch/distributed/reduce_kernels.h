// The host reductions of the collectives: dst = op(src_0, src_1, ...) elementwise over host
// memory. bf16 and f16 are combined in float32 and rounded once when stored (a sum of N values is
// the float32 sum, rounded); float32 in float32, float64 in float64, integers wrap as in PyTorch.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "ir/dtype.h"

namespace tpu::dist {

// c10d's ReduceOp, less PREMUL_SUM (the backend multiplies on the device first, then sums).
enum class RedOp : uint8_t { kSum, kAvg, kProduct, kMin, kMax, kBand, kBor, kBxor };
const char* RedOpName(RedOp op);

// Whether `op` applies to `dtype`, as an error naming both: bitwise ops need integer or bool
// tensors, AVG a floating-point one. (bool: SUM and MAX are OR, PRODUCT and MIN are AND.)
Status CheckReduction(RedOp op, DType dtype);

// dst[i] = srcs[0][i] op srcs[1][i] op ... for i < count; dst may be one of the sources. kAvg
// divides the sum by `divisor` before rounding. `op` must pass CheckReduction for `dtype`.
void Reduce(void* dst, const void* const* srcs, int num_srcs, int64_t count, DType dtype, RedOp op, int64_t divisor);

}  // namespace tpu::dist
