// Sort: the positions that stably sort each row along one dimension. Rows (every position of the
// other dims) are independent and run on the thread pool; keys are widened to double (floats) or
// int64 (integers, bool), exact for every element type the IR sorts.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "base/thread_pool.h"
#include "runtime/host/kernels.h"

namespace tpu::host {
namespace {

template <typename T>
void SortRows(const T* keys, int64_t* pos, int64_t rows, int64_t n, bool descending) {
  // PyTorch's order: NaN is greater than every number; equal keys keep their order.
  auto asc = [](T a, T b) { return a < b || (!std::isnan(a) && std::isnan(b)); };
  auto desc = [](T a, T b) { return a > b || (std::isnan(a) && !std::isnan(b)); };
  int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, n));
  ThreadPool::Get().ParallelFor(rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T* k = keys + r * n;
      int64_t* p = pos + r * n;
      std::iota(p, p + n, int64_t{0});
      if (descending)
        std::stable_sort(p, p + n, [&](int64_t x, int64_t y) { return desc(k[x], k[y]); });
      else
        std::stable_sort(p, p + n, [&](int64_t x, int64_t y) { return asc(k[x], k[y]); });
    }
  });
}

}  // namespace

Status RunSort(const Op& op, const View& in, const View& out) {
  int64_t dim = op.attrs.i;
  int rank = static_cast<int>(in.dims.size());
  // The sorted dim innermost, for the keys and for where the positions are written.
  Dims perm;
  for (int d = 0; d < rank; ++d)
    if (d != dim) perm.push_back(d);
  perm.push_back(dim);
  std::vector<char> key_storage;
  bool is_float = IsFloat(in.dtype);
  View keys = Materialize(in, perm, is_float ? DType::kF64 : DType::kI64, key_storage);
  int64_t n = in.dims[dim];
  int64_t rows = n ? keys.NumElements() / n : 0;
  View dst{out.data, DType::kI64, {}, {}};
  for (int64_t p : perm) {
    dst.dims.push_back(out.dims[p]);
    dst.strides.push_back(out.strides[p]);
  }
  std::vector<int64_t> tmp(dst.IsContiguous() ? 0 : std::max<int64_t>(1, rows * n));
  int64_t* pos = tmp.empty() ? static_cast<int64_t*>(out.data) : tmp.data();
  if (is_float)
    SortRows(static_cast<const double*>(keys.data), pos, rows, n, op.attrs.kind != 0);
  else
    SortRows(static_cast<const int64_t*>(keys.data), pos, rows, n, op.attrs.kind != 0);
  if (tmp.empty()) return Status::Ok();
  return CopyView(View{tmp.data(), DType::kI64, dst.dims, ContiguousStrides(dst.dims)}, dst);
}

}  // namespace tpu::host
