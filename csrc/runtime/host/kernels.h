// Host executor kernels, one file per op family (elementwise.cc, copy.cc, reduce.cc, dot.cc,
// convolution.cc, reduce_window.cc, data_movement.cc, gather_scatter.cc, rng.cc, check.cc; the
// tiled loops' register classes in registers.h, their iteration in tiles.h). Each kernel reads
// strided input views and writes an output view; the executor (executor.cc) decides where values
// live.
#pragma once

#include <vector>

#include "base/status.h"
#include "ir/graph.h"
#include "runtime/host/plan.h"
#include "runtime/host/view.h"

namespace tpu::host {

// Runs one fused elementwise region. `views` holds a view for every value the region reads or
// writes (inputs have the region's shape, possibly with zero strides for broadcasts).
Status RunFusedRegion(const Graph& g, const FusedRegion& region, const std::vector<View>& views);

// dst = convert(src), any strides, same dims.
Status CopyView(const View& src, const View& dst);
// Note [Transposing copies] (data_movement.cc): copies `dims` elements of `elem` bytes from src to
// dst (strides in elements, dims coalesced) in blocks when dst runs along its last dim and src
// along another, and there are enough elements to thread; returns false, copying nothing,
// otherwise. CopyView's path for such layouts.
bool CopyTransposed(const char* src, char* dst, int elem, const Dims& dims, const Dims& src_strides,
                    const Dims& dst_strides);

// One non-elementwise op. Inputs may be strided; `out` is contiguous.
Status RunReduce(const Op& op, const View& in, const View& init, const View& out);
Status RunArgReduce(const Op& op, const View& in, const View& out);
Status RunDotGeneral(const Op& op, const View& lhs, const View& rhs, const View& out);
// Convolution with StableHLO semantics: oneDNN's forward, backward-data or backward-weights
// primitive, whichever the op's shape maps onto (convolution.cc); a plain loop otherwise.
Status RunConvolution(const Op& op, const View& lhs, const View& rhs, const View& out);
Status RunReduceWindow(const Op& op, const View& in, const View& init, const View& out);
Status RunArgReduceWindow(const Op& op, const View& in, const View& index, const View& out);
Status RunReverse(const Op& op, const View& in, const View& out);
Status RunConstant(const Op& op, const View& out);
Status RunIota(const Op& op, const View& out);
Status RunConcatenate(const Op& op, const std::vector<View>& ins, const View& out);
Status RunPad(const Op& op, const View& in, const View& pad_value, const View& out);
Status RunGather(const Op& op, const View& operand, const View& indices, const View& out);
Status RunScatter(const Op& op, const View& operand, const View& indices, const View& updates,
                  const View& out);
Status RunRngBits(const Op& op, const View& state, const View& out);
// Note [Check op]: out = x when every element of ok is true, else the kind's error (check.cc).
Status RunCheck(const Op& op, const View& x, const View& ok, const View& out);

// `in` copied contiguously as `dtype`, with its dims permuted by `perm` (into `storage`).
View Materialize(const View& in, const Dims& perm, DType dtype, std::vector<char>& storage);
// i64 positions of a stable sort along op.attrs.i (sort.cc).
Status RunSort(const Op& op, const View& in, const View& out);

// Layout ops as views of their operand; false when the layout cannot be expressed as a view
// (a reshape of a non-contiguous operand), in which case the caller materializes.
bool ViewOf(const Op& op, const View& in, View* out);

// Byte range [lo, hi) a view touches; lo == hi for an empty view.
void ViewExtent(const View& v, const char** lo, const char** hi);

}  // namespace tpu::host
