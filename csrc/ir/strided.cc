#include "ir/strided.h"

#include <algorithm>
#include <numeric>
#include <vector>

namespace tpu {
namespace {

// The dims that move through memory (size > 1, stride != 0), by decreasing stride, and the
// nested blocks they form (Note [Strided views]).
struct Nesting {
  std::vector<int> order;  // dims of the view, outermost first
  Dims blocks;             // [s_0, st_0/st_1, ..., st_{m-2}/st_{m-1}] plus st_{m-1} when it is > 1
  int64_t extent = 1;      // elements the blocks cover: s_0 * st_0 (1 when nothing moves)
  int64_t span = 1;        // elements the view really touches, from its first
  bool nests = true;
  bool contiguous = true;  // the view is a run of consecutive elements
};

Nesting Analyze(const Dims& sizes, const Dims& strides) {
  Nesting n;
  for (int d = 0; d < static_cast<int>(sizes.size()); ++d)
    if (sizes[d] > 1 && strides[d] != 0) n.order.push_back(d);
  std::stable_sort(n.order.begin(), n.order.end(), [&](int a, int b) { return strides[a] > strides[b]; });
  for (int d : n.order) {
    if (strides[d] < 0) n.nests = false;
    n.span += (sizes[d] - 1) * strides[d];
  }
  if (n.order.empty() || !n.nests) {
    n.contiguous = n.order.empty() && n.nests;
    if (n.order.empty()) n.blocks = {1};
    return n;
  }
  const int m = static_cast<int>(n.order.size());
  n.blocks.push_back(sizes[n.order[0]]);
  for (int j = 1; j < m; ++j) {
    int64_t outer = strides[n.order[j - 1]], inner = strides[n.order[j]];
    if (outer % inner != 0 || outer / inner < sizes[n.order[j]]) {
      n.nests = false;
      n.contiguous = false;
      return n;
    }
    n.blocks.push_back(outer / inner);
    if (outer / inner != sizes[n.order[j]]) n.contiguous = false;
  }
  int64_t innermost = strides[n.order[m - 1]];
  if (innermost > 1) {
    n.blocks.push_back(innermost);
    n.contiguous = false;
  }
  n.extent = sizes[n.order[0]] * strides[n.order[0]];
  return n;
}

int OffsetValue(Builder& b, ViewOffset offset) {
  return offset.dynamic() ? offset.value : b.Constant(static_cast<double>(offset.constant), DType::kI64);
}

// i64 flat positions of every element of the view, of the view's shape.
int Positions(Builder& b, const Dims& sizes, const Dims& strides, ViewOffset offset) {
  TensorType t{DType::kI64, sizes};
  int pos = b.BroadcastInDim(OffsetValue(b, offset), sizes, {});
  for (int d = 0; d < static_cast<int>(sizes.size()); ++d) {
    if (sizes[d] == 1 || strides[d] == 0) continue;
    int step = b.Binary(OpCode::kMultiply, b.Iota(t, d), b.ScalarLike(static_cast<double>(strides[d]), pos));
    pos = b.Binary(OpCode::kAdd, pos, step);
  }
  return pos;
}

// `flat` padded at its end so that `extent` elements from the offset stay inside it.
int PadForExtent(Builder& b, int flat, const Nesting& n, ViewOffset offset, int64_t* padding) {
  int64_t len = b.TypeOf(flat).dims[0];
  // A valid view's first element plus its span fits in flat; the blocks reach extent - span past
  // that, from any offset. With a constant offset only what exceeds flat needs padding.
  *padding = offset.dynamic() ? n.extent - n.span : std::max<int64_t>(0, offset.constant + n.extent - len);
  if (*padding == 0) return flat;
  int zero = b.Constant(0, b.TypeOf(flat).dtype);
  return b.Pad(flat, zero, {0}, {*padding}, {0});
}

// The `extent` elements from the offset, as nested blocks.
int Blocks(Builder& b, int src, const Nesting& n, ViewOffset offset) {
  int64_t len = b.TypeOf(src).dims[0];
  int run = src;
  if (offset.dynamic()) run = b.DynamicSlice(src, {offset.value}, {n.extent});
  else if (offset.constant != 0 || n.extent != len)
    run = b.Slice(src, {offset.constant}, {offset.constant + n.extent}, {1});
  return b.Reshape(run, n.blocks);
}

// The view's sizes in nesting order, with a trailing 1 where the blocks have an innermost run.
Dims SelectedDims(const Dims& sizes, const Nesting& n) {
  Dims d;
  for (int k : n.order) d.push_back(sizes[k]);
  if (n.blocks.size() > n.order.size()) d.push_back(1);
  return d;
}

}  // namespace

bool StridesNest(const Dims& sizes, const Dims& strides) { return Analyze(sizes, strides).nests; }

int ReadStrided(Builder& b, int flat, const Dims& sizes, const Dims& strides, ViewOffset offset) {
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  // A view of no elements reads nothing (its storage may hold fewer elements than its strides
  // and offset reach).
  if (numel == 0) return b.BroadcastInDim(b.Constant(0, b.TypeOf(flat).dtype), sizes, {});
  Nesting n = Analyze(sizes, strides);
  if (!n.nests) {
    int idx = b.Reshape(Positions(b, sizes, strides, offset), {numel, 1});
    int g = b.Gather(flat, idx, {}, {0}, {0}, {1}, /*checked=*/false);
    return b.Reshape(g, sizes);
  }
  int64_t padding;
  int src = PadForExtent(b, flat, n, offset, &padding);
  int blocks = Blocks(b, src, n, offset);
  Dims sel = SelectedDims(sizes, n);
  if (sel != b.TypeOf(blocks).dims) blocks = b.Slice(blocks, Dims(sel.size(), 0), sel, Dims(sel.size(), 1));
  // Drop the trailing 1, restore the view's dim order, then its size-1 and stride-0 dims.
  Dims moving;
  for (int k : n.order) moving.push_back(sizes[k]);
  int v = b.Reshape(blocks, moving);
  std::vector<int> by_dim(n.order.begin(), n.order.end());
  std::sort(by_dim.begin(), by_dim.end());
  Dims perm;
  for (int k : by_dim) perm.push_back(std::find(n.order.begin(), n.order.end(), k) - n.order.begin());
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == static_cast<int64_t>(i);
  if (!identity) v = b.Transpose(v, perm);
  Dims target(by_dim.begin(), by_dim.end());
  if (b.TypeOf(v).dims == sizes) return v;
  return b.BroadcastInDim(v, sizes, target);
}

int UpdateStrided(Builder& b, int flat, const Dims& sizes_in, const Dims& strides, ViewOffset offset, int update) {
  for (int64_t s : sizes_in)
    if (s == 0) return flat;  // writes no element
  // A dim of stride 0 writes each memory location several times (fill_ on an expanded view):
  // the last write wins, as in PyTorch's row-major order, so only the last index is kept.
  Dims sizes = sizes_in;
  bool repeated = false;
  for (size_t d = 0; d < sizes.size(); ++d) repeated |= sizes[d] > 1 && strides[d] == 0;
  if (repeated) {
    Dims start(sizes.size(), 0), limit = sizes;
    for (size_t d = 0; d < sizes.size(); ++d)
      if (sizes[d] > 1 && strides[d] == 0) {
        start[d] = sizes[d] - 1;
        sizes[d] = 1;
      }
    update = b.Slice(update, start, limit, Dims(sizes.size(), 1));
  }
  Nesting n = Analyze(sizes, strides);
  int64_t len = b.TypeOf(flat).dims[0];
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  if (!n.nests) {
    int idx = b.Reshape(Positions(b, sizes, strides, offset), {numel, 1});
    int upd = b.Reshape(update, {numel});
    return b.Scatter(flat, idx, upd, {}, {0}, {0}, ReduceKind::kReplace, /*checked=*/false);
  }
  // The update in nesting order.
  Dims moving;
  for (int k : n.order) moving.push_back(sizes[k]);
  int x = b.Reshape(update, [&] {
    Dims by_dim;
    for (size_t d = 0; d < sizes.size(); ++d)
      if (sizes[d] > 1) by_dim.push_back(sizes[d]);
    return by_dim;
  }());
  std::vector<int> by_dim(n.order.begin(), n.order.end());
  std::sort(by_dim.begin(), by_dim.end());
  Dims perm;  // from dim order to nesting order
  for (int k : n.order) perm.push_back(std::find(by_dim.begin(), by_dim.end(), k) - by_dim.begin());
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == static_cast<int64_t>(i);
  if (!identity) x = b.Transpose(x, perm);
  if (n.contiguous) {
    int run = b.Reshape(x, {numel});
    if (!offset.dynamic() && offset.constant == 0 && numel == len) return run;
    return b.DynamicUpdateSlice(flat, run, {OffsetValue(b, offset)});
  }
  int64_t padding;
  int src = PadForExtent(b, flat, n, offset, &padding);
  int blocks = Blocks(b, src, n, offset);
  int xq = b.Reshape(x, SelectedDims(sizes, n));
  int zero = b.Constant(0, DType::kI64);
  std::vector<int> zeros(n.blocks.size(), zero);
  int updated = b.Reshape(b.DynamicUpdateSlice(blocks, xq, zeros), {n.extent});
  int out = b.DynamicUpdateSlice(src, updated, {OffsetValue(b, offset)});
  if (padding > 0) out = b.Slice(out, {0}, {len}, {1});
  return out;
}

}  // namespace tpu
