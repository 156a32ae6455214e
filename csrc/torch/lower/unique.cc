// unique (_unique, _unique2, unique_dim) and unique_consecutive (unique_dim_consecutive):
// results whose size depends on the data.
//
// Two programs, as nonzero.cc: the first sorts (stable; NaN last, each NaN its own group, as on
// CPU), marks the first element of each run of equal values, numbers the runs (a prefix count)
// and counts them; the host reads the count (one sync); the second, specialized to it, scatters
// the values, the inverse indices and the counts. Along a dimension the slices are compared
// whole and sorted lexicographically by stable sorts on each column, last column first. CPU
// sorts even for sorted=False, and so do we.
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include "torch/lower/index_util.h"

namespace tpu::torch_bridge {
namespace {

// What the first program leaves for the second.
struct Runs {
  int64_t count = 0;
  at::Tensor values;  // the input (slices: [n, m]) in sorted order
  at::Tensor order;   // i64 [n]: the input position of each sorted element
  at::Tensor group;   // i64 [n]: the run each sorted element belongs to
};

// `rows` [n, m] (a flat tensor is [n, 1]): the stable lexicographic order of its rows, i64 [n].
int LexicographicOrder(Builder& b, int rows, int64_t n, int64_t m) {
  int order = b.Iota(TensorType{DType::kI64, {n}}, 0);
  for (int64_t c = m - 1; c >= 0; --c) {
    int column = b.Reshape(b.Slice(rows, {0, c}, {n, c + 1}, {1, 1}), {n});
    int key = GatherAlongDim(b, column, order, 0, /*checked=*/false);
    order = GatherAlongDim(b, order, b.Sort(key, 0, /*descending=*/false), 0, /*checked=*/false);
  }
  return order;
}

// Sorts (or not) the n rows of `x` viewed as [n, m] and numbers the runs of equal rows.
Runs FindRuns(const char* op, const at::Tensor& x, int64_t n, int64_t m, bool sort, const std::vector<int64_t>& perm) {
  Runs r;
  r.values = at::empty({n, m}, x.options());
  r.order = at::empty({n}, x.options().dtype(at::kLong));
  r.group = at::empty({n}, x.options().dtype(at::kLong));
  at::Tensor count = at::empty({}, x.options().dtype(at::kLong));
  {
    Lowering l(op);
    Builder& b = l.b();
    int v = l.Input(x);
    if (!perm.empty()) v = b.Transpose(v, Dims(perm.begin(), perm.end()));
    v = b.Reshape(v, {n, m});
    int order = sort ? LexicographicOrder(b, v, n, m) : b.Iota(TensorType{DType::kI64, {n}}, 0);
    int sorted = sort ? b.Gather(v, b.Reshape(order, {n, 1}), {1}, {0}, {0}, {1, m}, /*checked=*/false) : v;
    // A row starts a run unless it equals the row before (NaN equals nothing).
    int first = b.BroadcastTo(b.Constant(1, DType::kBool), {1});
    if (n > 1) {
      int prev = b.Slice(sorted, {0, 0}, {n - 1, m}, {1, 1});
      int differs = b.Compare(CompareDirection::kNE, b.Slice(sorted, {1, 0}, {n, m}, {1, 1}), prev);
      int new_run = b.Reduce(differs, b.Constant(0, DType::kBool), {1}, ReduceKind::kOr);  // [n - 1]
      first = b.Pad(new_run, b.Constant(1, DType::kBool), {1}, {0}, {0});
    }
    int group = PrefixSum(b, b.Convert(first, DType::kI64), 0);
    int runs = b.Slice(group, {n - 1}, {n}, {1});
    l.Output(sorted, r.values);
    l.Output(order, r.order);
    l.Output(b.Binary(OpCode::kSubtract, group, b.ScalarLike(1, group)), r.group);
    l.Output(b.Reshape(runs, {}), count);
    l.Run();
  }
  r.count = count.item<int64_t>();
  return r;
}

// Writes the unique rows ([count, m]), the inverse (each input row's run, i64 [n]) and the
// counts (i64 [count]) into the given tensors (undefined ones are skipped).
void WriteRuns(const char* op, const Runs& r, int64_t n, int64_t m, const at::Tensor& unique, const at::Tensor& inverse,
               const at::Tensor& counts) {
  Lowering l(op);
  Builder& b = l.b();
  int values = l.Input(r.values);
  int order = b.Reshape(l.Input(r.order), {n, 1});
  int group = l.Input(r.group);
  int group_col = b.Reshape(group, {n, 1});
  DType dt = b.TypeOf(values).dtype;
  int base = b.BroadcastTo(b.Constant(0, dt), {r.count, m});
  l.Output(b.Reshape(b.Scatter(base, group_col, values, {1}, {0}, {0}, ReduceKind::kReplace, /*checked=*/false),
                     ToDims(unique.sizes())),
           unique);
  if (inverse.defined()) {
    int zeros = b.BroadcastTo(b.Constant(0, DType::kI64), {n});
    int inv = b.Scatter(zeros, order, group, {}, {0}, {0}, ReduceKind::kReplace, /*checked=*/false);
    l.Output(b.Reshape(inv, ToDims(inverse.sizes())), inverse);
  }
  if (counts.defined()) {
    int zeros = b.BroadcastTo(b.Constant(0, DType::kI64), {r.count});
    int ones = b.BroadcastTo(b.Constant(1, DType::kI64), {n});
    l.Output(b.Scatter(zeros, group_col, ones, {}, {0}, {0}, ReduceKind::kAdd, /*checked=*/false), counts);
  }
  l.Run();
}

using Result3 = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

// Flat unique / unique_consecutive. Inverse and counts are empty unless asked for.
Result3 UniqueFlat(const char* op, const at::Tensor& self, bool sort, bool return_inverse, bool return_counts) {
  at::Tensor inverse = at::empty(return_inverse ? self.sizes() : at::IntArrayRef{0}, self.options().dtype(at::kLong));
  at::Tensor counts = at::empty({0}, self.options().dtype(at::kLong));
  int64_t n = self.numel();
  if (n == 0) return {at::empty({0}, self.options()), inverse, counts};
  c10::DeviceGuard guard(self.device());
  Runs r = FindRuns(op, self, n, 1, sort, {});
  at::Tensor unique = at::empty({r.count}, self.options());
  if (return_counts) counts = at::empty({r.count}, self.options().dtype(at::kLong));
  WriteRuns(op, r, n, 1, unique, return_inverse ? inverse : at::Tensor(), return_counts ? counts : at::Tensor());
  return {unique, inverse, counts};
}

// unique along `dim`: slices compared whole. Inverse and counts are always computed (CPU's
// unique_dim returns them whatever the flags say).
Result3 UniqueDim(const char* op, const at::Tensor& self, int64_t dim, bool sort) {
  dim = at::maybe_wrap_dim(dim, self.dim(), /*wrap_scalar=*/false);
  auto long_opts = self.options().dtype(at::kLong);
  if (self.size(dim) == 0) {
    return {at::empty(self.sizes(), self.options()), at::empty({0}, long_opts), at::empty({0}, long_opts)};
  }
  for (int64_t d = 0; d < self.dim(); ++d)
    TORCH_CHECK(d == dim || self.size(d) > 0,
                "There are 0 sized dimensions, and they aren't selected, so unique cannot be applied");
  c10::DeviceGuard guard(self.device());
  int64_t n = self.size(dim);
  int64_t m = self.numel() / n;
  std::vector<int64_t> perm{dim};
  std::vector<int64_t> rest_sizes;
  for (int64_t d = 0; d < self.dim(); ++d)
    if (d != dim) {
      perm.push_back(d);
      rest_sizes.push_back(self.size(d));
    }
  bool moved = dim != 0;
  Runs r = FindRuns(op, self, n, m, sort, moved ? perm : std::vector<int64_t>{});
  std::vector<int64_t> front_sizes{r.count};
  front_sizes.insert(front_sizes.end(), rest_sizes.begin(), rest_sizes.end());
  // The unique slices are written with `dim` in front, then viewed back in place (a strided view,
  // as CPU's result is a permuted copy).
  at::Tensor front = at::empty(front_sizes, self.options());
  at::Tensor inverse = at::empty({n}, long_opts);
  at::Tensor counts = at::empty({r.count}, long_opts);
  WriteRuns(op, r, n, m, front, inverse, counts);
  at::Tensor unique = moved ? front.movedim(0, dim).contiguous() : front;
  return {unique, inverse, counts};
}

Result3 unique2(const at::Tensor& self, bool sorted, bool return_inverse, bool return_counts) {
  (void)sorted;  // CPU sorts either way
  return UniqueFlat("aten::_unique2", self, true, return_inverse, return_counts);
}

std::tuple<at::Tensor, at::Tensor> unique(const at::Tensor& self, bool sorted, bool return_inverse) {
  (void)sorted;
  auto [u, inv, counts] = UniqueFlat("aten::_unique", self, true, return_inverse, false);
  return {u, inv};
}

Result3 unique_dim(const at::Tensor& self, int64_t dim, bool sorted, bool return_inverse, bool return_counts) {
  (void)sorted;
  (void)return_inverse;
  (void)return_counts;
  return UniqueDim("aten::unique_dim", self, dim, true);
}

Result3 unique_dim_consecutive(const at::Tensor& self, int64_t dim, bool return_inverse, bool return_counts) {
  (void)return_inverse;
  (void)return_counts;
  return UniqueDim("aten::unique_dim_consecutive", self, dim, false);
}

Result3 unique_consecutive(const at::Tensor& self, bool return_inverse, bool return_counts, std::optional<int64_t> dim) {
  if (dim.has_value()) return UniqueDim("aten::unique_consecutive", self, *dim, false);
  return UniqueFlat("aten::unique_consecutive", self, false, return_inverse, return_counts);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_unique", unique);
  m.impl("_unique2", unique2);
  m.impl("unique_dim", unique_dim);
  m.impl("unique_dim_consecutive", unique_dim_consecutive);
  m.impl("unique_consecutive", unique_consecutive);
}

}  // namespace tpu::torch_bridge
