// reduce_window and arg_reduce_window (pooling). For every dim a table gives, per (output
// coordinate, window position), the operand coordinate it reads, or -1 for padding and the holes
// of base dilation, which read the init value as StableHLO specifies. Each output element then
// folds its window in order; outputs are split over the thread pool.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "base/thread_pool.h"
#include "ir/window.h"
#include "runtime/host/kernels.h"

namespace tpu::host {
namespace {

struct Tables {
  int rank = 0;
  Dims out_dims, window;
  std::vector<std::vector<int64_t>> coord;  // [dim][o * window + k]
};

Tables MakeTables(const WindowSpec& w, const Dims& in_dims, const Dims& out_dims) {
  Tables t;
  t.rank = static_cast<int>(in_dims.size());
  t.out_dims = out_dims;
  t.window = w.dimensions;
  t.coord.resize(t.rank);
  for (int d = 0; d < t.rank; ++d) {
    int64_t win = w.dimensions[d], bd = w.base_dilations[d];
    auto& c = t.coord[d];
    c.assign(out_dims[d] * win, -1);
    for (int64_t o = 0; o < out_dims[d]; ++o)
      for (int64_t k = 0; k < win; ++k) {
        int64_t pos = o * w.strides[d] + k * w.window_dilations[d] - w.padding_low[d];
        if (pos < 0 || pos % bd != 0 || pos / bd >= in_dims[d]) continue;
        c[o * win + k] = pos / bd;
      }
  }
  return t;
}

// Calls visit(out_index, offsets, valid) for every window element of outputs [begin, end), where
// offsets[j] is the element offset into operand j (strides[j]) and valid is false for padding.
template <int N, typename F>
void ForEachWindow(const Tables& t, const Dims (&strides)[N], int64_t begin, int64_t end,
                   F&& visit) {
  int rank = t.rank;
  std::vector<int64_t> o(rank), k(rank);
  int64_t rem = begin;
  for (int d = rank - 1; d >= 0; --d) {
    o[d] = t.out_dims[d] ? rem % t.out_dims[d] : 0;
    rem = t.out_dims[d] ? rem / t.out_dims[d] : 0;
  }
  for (int64_t idx = begin; idx < end; ++idx) {
    std::fill(k.begin(), k.end(), 0);
    while (true) {
      int64_t off[N] = {};
      bool valid = true;
      for (int d = 0; d < rank; ++d) {
        int64_t c = t.coord[d][o[d] * t.window[d] + k[d]];
        if (c < 0) {
          valid = false;
          break;
        }
        for (int j = 0; j < N; ++j) off[j] += c * strides[j][d];
      }
      visit(idx, off, valid);
      int d = rank - 1;
      for (; d >= 0; --d) {
        if (++k[d] < t.window[d]) break;
        k[d] = 0;
      }
      if (d < 0) break;
    }
    for (int d = rank - 1; d >= 0; --d) {
      if (++o[d] < t.out_dims[d]) break;
      o[d] = 0;
    }
  }
}

template <typename T>
inline T Combine(ReduceKind kind, T a, T b) {
  switch (kind) {
    case ReduceKind::kAdd:
      return a + b;
    case ReduceKind::kMul:
      return a * b;
    case ReduceKind::kMax:
      return (a > b || a != a) ? a : b;  // NaN propagates
    case ReduceKind::kMin:
      return (a < b || a != a) ? a : b;
    case ReduceKind::kAnd:
      return (a != T(0)) && (b != T(0));
    case ReduceKind::kOr:
      return (a != T(0)) || (b != T(0));
    case ReduceKind::kReplace:
      return b;
  }
  return a;
}

DType AccType(DType t) {
  if (t == DType::kF32 || t == DType::kBF16 || t == DType::kF16) return DType::kF32;
  if (t == DType::kF64) return DType::kF64;
  return DType::kI64;
}

// `in` in dtype `t`: the view itself when it already is, else a converted contiguous copy.
View As(const View& in, DType t, std::vector<char>& storage) {
  if (in.dtype == t) return in;
  View dst{nullptr, t, in.dims, ContiguousStrides(in.dims)};
  storage.resize(std::max<int64_t>(1, in.NumElements()) * DTypeSize(t));
  dst.data = storage.data();
  (void)CopyView(in, dst);
  return dst;
}

int64_t Grain(const Tables& t) {
  int64_t per = 1;
  for (int64_t w : t.window) per *= w;
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(per, 1));
}

}  // namespace

Status RunReduceWindow(const Op& op, const View& in, const View& init, const View& out) {
  WindowSpec w = WindowSpec::FromAttrs(op.attrs);
  ReduceKind kind = static_cast<ReduceKind>(op.attrs.kind);
  int64_t n = out.NumElements();
  if (n == 0) return Status::Ok();
  DType acc = AccType(in.dtype);
  std::vector<char> in_storage, out_storage(n * DTypeSize(acc));
  View x = As(in, acc, in_storage);
  alignas(8) char init_bytes[8] = {};
  View init_acc{init_bytes, acc, {}, {}};
  TPU_RETURN_IF_ERROR(CopyView(init, init_acc));
  Tables t = MakeTables(w, in.dims, out.dims);
  const Dims strides[1] = {x.strides};
  auto run = [&](auto zero) {
    using T = decltype(zero);
    const T* src = static_cast<const T*>(x.data);
    T* dst = reinterpret_cast<T*>(out_storage.data());
    T init_v;
    std::memcpy(&init_v, init_bytes, sizeof(T));
    ThreadPool::Get().ParallelFor(n, Grain(t), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) dst[i] = init_v;
      ForEachWindow(t, strides, b, e, [&](int64_t i, const int64_t* off, bool valid) {
        dst[i] = Combine(kind, dst[i], valid ? src[off[0]] : init_v);
      });
    });
  };
  if (acc == DType::kF32)
    run(float{});
  else if (acc == DType::kF64)
    run(double{});
  else
    run(int64_t{});
  View result{out_storage.data(), acc, out.dims, ContiguousStrides(out.dims)};
  return CopyView(result, out);
}

Status RunArgReduceWindow(const Op& op, const View& in, const View& index, const View& out) {
  WindowSpec w = WindowSpec::FromAttrs(op.attrs);
  int64_t n = out.NumElements();
  if (n == 0) return Status::Ok();
  if (index.dtype != DType::kI64 || out.dtype != DType::kI64)
    return Internal("arg_reduce_window operand types");
  std::vector<char> in_storage;
  View x = As(in, AccType(in.dtype), in_storage);
  Tables t = MakeTables(w, in.dims, out.dims);
  const Dims strides[2] = {x.strides, index.strides};
  const int64_t* ix = static_cast<const int64_t*>(index.data);
  int64_t* dst = static_cast<int64_t*>(out.data);
  auto run = [&](auto zero) {
    using T = decltype(zero);
    const T* src = static_cast<const T*>(x.data);
    std::vector<T> best(n);
    ThreadPool::Get().ParallelFor(n, Grain(t), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        best[i] = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                       : std::numeric_limits<T>::lowest();
        dst[i] = std::numeric_limits<int64_t>::max();
      }
      ForEachWindow(t, strides, b, e, [&](int64_t i, const int64_t* off, bool valid) {
        if (!valid) return;  // (lowest, INT64_MAX) never beats what is already there
        T v = src[off[0]], bv = best[i];
        int64_t vi = ix[off[1]], bi = dst[i];
        bool vnan = v != v, bnan = bv != bv;
        bool take = v > bv || (vnan && !bnan) || (v == bv && vi < bi) || (vnan && bnan && vi > bi);
        if (take) {
          best[i] = v;
          dst[i] = vi;
        }
      });
    });
  };
  if (x.dtype == DType::kF64)
    run(double{});
  else if (x.dtype == DType::kF32)
    run(float{});
  else
    run(int64_t{});
  return Status::Ok();
}

}  // namespace tpu::host
