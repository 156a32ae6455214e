// reduce_window and arg_reduce_window (pooling). For every dim a table gives, per (output
// coordinate, window position), the operand coordinate it reads, or -1 for padding and the holes
// of base dilation, which read the init value as StableHLO specifies. Each output element then
// folds its window in order; outputs are split over the thread pool.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "base/thread_pool.h"
#include "ir/window.h"
#include "runtime/host/kernels.h"
#include "runtime/host/wrapping.h"

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

// FoldWindows for pooling over the last two dims with every other dim read one to one (window 1,
// no padding or stride): planes and rows are walked directly, each output's window in the same
// row-major order, so the fold is the same.
template <int N, typename Folder>
void FoldPlanes(const Tables& t, const Dims (&strides)[N], int64_t begin, int64_t end, Folder& f) {
  const int rank = t.rank, H = rank - 2, W = rank - 1;
  const int64_t kh = t.window[H], kw = t.window[W], OH = t.out_dims[H], OW = t.out_dims[W], per = OH * OW;
  if (per == 0) return;
  const int64_t* C0 = t.coord[H].data();
  const int64_t* C1 = t.coord[W].data();
  int64_t sh[N], sw[N];
  for (int j = 0; j < N; ++j) sh[j] = strides[j][H], sw[j] = strides[j][W];
  for (int64_t idx = begin; idx < end;) {
    const int64_t plane = idx / per, rem = idx - plane * per;
    int64_t poff[N] = {};
    int64_t pr = plane;
    for (int d = rank - 3; d >= 0; --d) {
      const int64_t c = pr % t.out_dims[d];
      pr /= t.out_dims[d];
      for (int j = 0; j < N; ++j) poff[j] += c * strides[j][d];
    }
    const int64_t stop = std::min(end, idx - rem + per);
    int64_t oh = rem / OW, ow = rem - oh * OW;
    for (; idx < stop; ++idx) {
      const int64_t* c0 = C0 + oh * kh;
      const int64_t* c1 = C1 + ow * kw;
      f.Start();
      for (int64_t a = 0; a < kh; ++a) {
        const int64_t r = c0[a];
        int64_t roff[N];
        for (int j = 0; j < N; ++j) roff[j] = poff[j] + r * sh[j];
        for (int64_t b = 0; b < kw; ++b) {
          const int64_t c = c1[b];
          int64_t off[N];
          for (int j = 0; j < N; ++j) off[j] = roff[j] + c * sw[j];
          f.Add(off, r >= 0 && c >= 0);
        }
      }
      f.Finish(idx);
      if (++ow == OW) ow = 0, ++oh;
    }
  }
}

// Whether FoldPlanes applies: rank >= 2 and every dim before the last two read one to one.
bool Planar(const Tables& t) {
  if (t.rank < 2) return false;
  for (int d = 0; d + 2 < t.rank; ++d) {
    if (t.window[d] != 1) return false;
    for (int64_t o = 0; o < t.out_dims[d]; ++o)
      if (t.coord[d][o] != o) return false;
  }
  return true;
}

// Walks the windows of outputs [begin, end): per output f.Start(), then f.Add(offsets, valid)
// for each window element in row-major window order (offsets[j]: element offset into operand j,
// by strides[j]; valid is false for padding and holes), then f.Finish(output index). Dims whose
// window has one element read one coordinate per output, hoisted out of the window walk.
template <int N, typename Folder>
void FoldWindows(const Tables& t, const Dims (&strides)[N], int64_t begin, int64_t end, Folder& f) {
  int rank = t.rank;
  SmallVector<int, 8> wd;  // dims walked per window element
  int64_t wsize = 1;
  for (int d = 0; d < rank; ++d)
    if (t.window[d] > 1) {
      wd.push_back(d);
      wsize *= t.window[d];
    }
  int nw = static_cast<int>(wd.size());
  std::vector<int64_t> o(rank);
  int64_t rem = begin;
  for (int d = rank - 1; d >= 0; --d) {
    o[d] = t.out_dims[d] ? rem % t.out_dims[d] : 0;
    rem = t.out_dims[d] ? rem / t.out_dims[d] : 0;
  }
  SmallVector<int64_t, 8> k(nw);
  for (int64_t idx = begin; idx < end; ++idx) {
    int64_t base[N] = {};
    bool base_valid = true;
    for (int d = 0; d < rank; ++d) {
      if (t.window[d] > 1) continue;
      int64_t c = t.coord[d][o[d]];
      base_valid &= c >= 0;
      for (int j = 0; j < N; ++j) base[j] += c * strides[j][d];
    }
    f.Start();
    if (!base_valid) {
      for (int64_t e = 0; e < wsize; ++e) f.Add(base, false);
    } else if (nw == 2) {  // pooling: the common case
      int d0 = wd[0], d1 = wd[1];
      const int64_t* c0 = &t.coord[d0][o[d0] * t.window[d0]];
      const int64_t* c1 = &t.coord[d1][o[d1] * t.window[d1]];
      for (int64_t a = 0; a < t.window[d0]; ++a)
        for (int64_t b = 0; b < t.window[d1]; ++b) {
          int64_t off[N];
          for (int j = 0; j < N; ++j)
            off[j] = base[j] + c0[a] * strides[j][d0] + c1[b] * strides[j][d1];
          f.Add(off, c0[a] >= 0 && c1[b] >= 0);
        }
    } else {
      std::fill(k.begin(), k.end(), 0);
      for (int64_t e = 0; e < wsize; ++e) {
        int64_t off[N];
        bool valid = true;
        for (int j = 0; j < N; ++j) off[j] = base[j];
        for (int i = 0; i < nw; ++i) {
          int d = wd[i];
          int64_t c = t.coord[d][o[d] * t.window[d] + k[i]];
          valid &= c >= 0;
          for (int j = 0; j < N; ++j) off[j] += c * strides[j][d];
        }
        f.Add(off, valid);
        for (int i = nw - 1; i >= 0 && ++k[i] == t.window[wd[i]]; --i) k[i] = 0;
      }
    }
    f.Finish(idx);
    for (int d = rank - 1; d >= 0; --d) {
      if (++o[d] < t.out_dims[d]) break;
      o[d] = 0;
    }
  }
}

template <ReduceKind K, typename T>
inline T Combine(T a, T b) {
  if constexpr (K == ReduceKind::kAdd) return WrapAdd(a, b);
  if constexpr (K == ReduceKind::kMul) return WrapMul(a, b);
  if constexpr (K == ReduceKind::kMax) return (a > b || a != a) ? a : b;  // NaN propagates
  if constexpr (K == ReduceKind::kMin) return (a < b || a != a) ? a : b;
  if constexpr (K == ReduceKind::kAnd) return (a != T(0)) && (b != T(0));
  if constexpr (K == ReduceKind::kOr) return (a != T(0)) || (b != T(0));
  return b;
}

// reduce_window's fold: padding and holes read the init value.
template <ReduceKind K, typename T>
struct ReduceFolder {
  const T* src;
  T init;
  T* dst;
  T acc;
  void Start() { acc = init; }
  void Add(const int64_t* off, bool valid) { acc = Combine<K>(acc, valid ? src[off[0]] : init); }
  void Finish(int64_t i) { dst[i] = acc; }
};

// arg_reduce_window's fold: the (value, index) pair that orders highest (see builder.h).
template <typename T>
struct ArgFolder {
  const T* src;
  const int64_t* index;
  int64_t* dst;
  T best;
  int64_t best_i;
  void Start() {
    best = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                : std::numeric_limits<T>::lowest();
    best_i = std::numeric_limits<int64_t>::max();
  }
  void Add(const int64_t* off, bool valid) {
    if (!valid) return;  // (lowest, INT64_MAX) never beats what is already there
    T v = src[off[0]];
    int64_t vi = index[off[1]];
    bool vnan = v != v, bnan = best != best;
    if (v > best || (vnan && !bnan) || (v == best && vi < best_i) ||
        (vnan && bnan && vi > best_i)) {
      best = v;
      best_i = vi;
    }
  }
  void Finish(int64_t i) { dst[i] = best_i; }
};

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
  // Results go straight to `out` (contiguous) when it holds the accumulation type.
  bool direct = out.dtype == acc && out.IsContiguous();
  std::vector<char> in_storage, out_storage(direct ? 0 : n * DTypeSize(acc));
  View x = As(in, acc, in_storage);
  alignas(8) char init_bytes[8] = {};
  View init_acc{init_bytes, acc, {}, {}};
  TPU_RETURN_IF_ERROR(CopyView(init, init_acc));
  Tables t = MakeTables(w, in.dims, out.dims);
  const bool planar = Planar(t);
  const Dims strides[1] = {x.strides};
  void* dst = direct ? out.data : out_storage.data();
  auto run = [&](auto zero, auto k) {
    using T = decltype(zero);
    constexpr ReduceKind K = decltype(k)::value;
    T init_v;
    std::memcpy(&init_v, init_bytes, sizeof(T));
    ThreadPool::Get().ParallelFor(n, Grain(t), [&](int64_t b, int64_t e) {
      ReduceFolder<K, T> f{static_cast<const T*>(x.data), init_v, static_cast<T*>(dst), init_v};
      if (planar) FoldPlanes(t, strides, b, e, f);
      else FoldWindows(t, strides, b, e, f);
    });
  };
  auto by_kind = [&](auto zero) {
    using C = ReduceKind;
    switch (kind) {
      case C::kAdd:
        run(zero, std::integral_constant<C, C::kAdd>{});
        break;
      case C::kMul:
        run(zero, std::integral_constant<C, C::kMul>{});
        break;
      case C::kMax:
        run(zero, std::integral_constant<C, C::kMax>{});
        break;
      case C::kMin:
        run(zero, std::integral_constant<C, C::kMin>{});
        break;
      case C::kAnd:
        run(zero, std::integral_constant<C, C::kAnd>{});
        break;
      case C::kOr:
        run(zero, std::integral_constant<C, C::kOr>{});
        break;
      case C::kReplace:
        run(zero, std::integral_constant<C, C::kReplace>{});
        break;
    }
  };
  if (acc == DType::kF32)
    by_kind(float{});
  else if (acc == DType::kF64)
    by_kind(double{});
  else
    by_kind(int64_t{});
  if (direct) return Status::Ok();
  View result{out_storage.data(), acc, out.dims, ContiguousStrides(out.dims)};
  return CopyView(result, out);
}

Status RunArgReduceWindow(const Op& op, const View& in, const View& index, const View& out) {
  WindowSpec w = WindowSpec::FromAttrs(op.attrs);
  int64_t n = out.NumElements();
  if (n == 0) return Status::Ok();
  if (index.dtype != DType::kI64 || out.dtype != DType::kI64 || !out.IsContiguous())
    return Internal("arg_reduce_window operand types");
  std::vector<char> in_storage;
  View x = As(in, AccType(in.dtype), in_storage);
  Tables t = MakeTables(w, in.dims, out.dims);
  const bool planar = Planar(t);
  const Dims strides[2] = {x.strides, index.strides};
  auto run = [&](auto zero) {
    using T = decltype(zero);
    ThreadPool::Get().ParallelFor(n, Grain(t), [&](int64_t b, int64_t e) {
      ArgFolder<T> f{static_cast<const T*>(x.data), static_cast<const int64_t*>(index.data),
                     static_cast<int64_t*>(out.data), T{}, 0};
      if (planar) FoldPlanes(t, strides, b, e, f);
      else FoldWindows(t, strides, b, e, f);
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
