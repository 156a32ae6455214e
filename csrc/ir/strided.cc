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

// The elements `flat` lacks at its end for `extent` elements from the offset. A valid view's
// first element plus its span fits in flat; the blocks reach extent - span past that, from any
// offset. With a constant offset only what exceeds flat needs padding.
int64_t Padding(const Nesting& n, ViewOffset offset, int64_t len) {
  return offset.dynamic() ? n.extent - n.span : std::max<int64_t>(0, offset.constant + n.extent - len);
}

// `flat` padded at its end by `padding` elements (a copy), or flat itself.
int Padded(Builder& b, int flat, int64_t padding) {
  if (padding == 0) return flat;
  int zero = b.Constant(0, b.TypeOf(flat).dtype);
  return b.Pad(flat, zero, {0}, {padding}, {0});
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

// Note [Views inside a row]: a view at a constant offset often starts inside the first of its
// blocks' rows -- k and v of a fused qkv projection ([B, T, 3C] split three ways) start C and 2C
// elements in, so their `extent` elements run past the array's end and the blocks would need a
// padded copy of the whole array. Written in the blocks' mixed radix, offset = c_0 * row +
// (c_1, ..., c_m); when every c_k + sel_k fits its block and the sel_0 rows from row c_0 fit in
// the array, the view is those rows reshaped as blocks and sliced at (0, c_1, ..., c_m): views
// only, no copy.
struct InRow {
  bool ok = false;
  int64_t first = 0, last = 0;  // the rows' flat range [first, last)
  Dims shape;                   // those rows as blocks
  Dims starts;                  // where the view starts in them
};

InRow ViewInRow(const Nesting& n, const Dims& sel, int64_t offset, int64_t len) {
  InRow r;
  const int m = static_cast<int>(n.blocks.size());
  int64_t row = n.extent / n.blocks[0];
  r.starts = Dims(m, 0);
  int64_t rem = offset % row;
  for (int k = m - 1; k >= 1; --k) {
    r.starts[k] = rem % n.blocks[k];
    rem /= n.blocks[k];
    if (r.starts[k] + sel[k] > n.blocks[k]) return r;
  }
  r.first = offset / row * row;
  r.last = r.first + sel[0] * row;
  if (r.last > len) return r;
  r.shape = n.blocks;
  r.shape[0] = sel[0];
  r.ok = true;
  return r;
}

int RowsOf(Builder& b, int flat, const InRow& r) {
  int64_t len = b.TypeOf(flat).dims[0];
  int rows = r.first == 0 && r.last == len ? flat : b.Slice(flat, {r.first}, {r.last}, {1});
  return b.Reshape(rows, r.shape);
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
  const int64_t len = b.TypeOf(flat).dims[0], padding = Padding(n, offset, len);
  Dims sel = SelectedDims(sizes, n);
  InRow in_row = padding > 0 && !offset.dynamic() ? ViewInRow(n, sel, offset.constant, len) : InRow{};
  int blocks;
  if (in_row.ok) {
    Dims limit = in_row.starts;
    for (size_t k = 0; k < limit.size(); ++k) limit[k] += sel[k];
    blocks = b.Slice(RowsOf(b, flat, in_row), in_row.starts, limit, Dims(sel.size(), 1));
  } else {
    blocks = Blocks(b, Padded(b, flat, padding), n, offset);
    if (sel != b.TypeOf(blocks).dims) blocks = b.Slice(blocks, Dims(sel.size(), 0), sel, Dims(sel.size(), 1));
  }
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
  const int64_t padding = Padding(n, offset, len);
  Dims sel = SelectedDims(sizes, n);
  int xq = b.Reshape(x, sel);
  InRow in_row = padding > 0 && !offset.dynamic() ? ViewInRow(n, sel, offset.constant, len) : InRow{};
  if (in_row.ok) {  // Note [Views inside a row]: the rows updated, then put back
    std::vector<int> starts;
    for (int64_t c : in_row.starts) starts.push_back(b.Constant(static_cast<double>(c), DType::kI64));
    int rows = b.Reshape(b.DynamicUpdateSlice(RowsOf(b, flat, in_row), xq, starts), {in_row.last - in_row.first});
    if (in_row.first == 0 && in_row.last == len) return rows;
    return b.DynamicUpdateSlice(flat, rows, {b.Constant(static_cast<double>(in_row.first), DType::kI64)});
  }
  int src = Padded(b, flat, padding);
  int blocks = Blocks(b, src, n, offset);
  int zero = b.Constant(0, DType::kI64);
  std::vector<int> zeros(n.blocks.size(), zero);
  int updated = b.Reshape(b.DynamicUpdateSlice(blocks, xq, zeros), {n.extent});
  int out = b.DynamicUpdateSlice(src, updated, {OffsetValue(b, offset)});
  if (padding > 0) out = b.Slice(out, {0}, {len}, {1});
  return out;
}

}  // namespace tpu
