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
  Dims out_dims, window, in_dims, strides, padding_low;
  bool dense_windows = false;  // no base or window dilation: a window reads a box of the operand
  std::vector<std::vector<int64_t>> coord;  // [dim][o * window + k]
};

Tables MakeTables(const WindowSpec& w, const Dims& in_dims, const Dims& out_dims) {
  Tables t;
  t.rank = static_cast<int>(in_dims.size());
  t.out_dims = out_dims;
  t.window = w.dimensions;
  t.in_dims = in_dims;
  t.strides = w.strides;
  t.padding_low = w.padding_low;
  t.dense_windows = true;
  for (int d = 0; d < t.rank; ++d) t.dense_windows &= w.base_dilations[d] == 1 && w.window_dilations[d] == 1;
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
//
// With dense windows and a folder for which padding's place in the fold does not matter
// (Folder::PaddingAnywhere(): max/min, a sum whose init is 0, arg_reduce_window, which skips
// it), a window is the box of rows [r0, r1) and columns [c0, c1) the operand has, folded in the
// same row-major order, with the padding's init value folded once (FoldPadding) when the window
// has any: no per-element coordinate lookups or validity branches.
template <int N, typename Folder>
void FoldPlanes(const Tables& t, const Dims (&strides)[N], int64_t begin, int64_t end, Folder& f) {
  const int rank = t.rank, H = rank - 2, W = rank - 1;
  const int64_t kh = t.window[H], kw = t.window[W], OH = t.out_dims[H], OW = t.out_dims[W], per = OH * OW;
  if (per == 0) return;
  const bool boxes = t.dense_windows && f.PaddingAnywhere();
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
    if (boxes) {
      const int64_t IH = t.in_dims[H], IW = t.in_dims[W];
      for (; idx < stop; ++idx) {
        const int64_t h = oh * t.strides[H] - t.padding_low[H], w = ow * t.strides[W] - t.padding_low[W];
        const int64_t r0 = std::max<int64_t>(h, 0), r1 = std::min(h + kh, IH);
        const int64_t c0 = std::max<int64_t>(w, 0), c1 = std::min(w + kw, IW);
        f.Start();
        if (r0 < r1 && c0 < c1) f.Box(poff, sh, sw, r0, r1, c0, c1);
        if ((r1 - r0) * (c1 - c0) != kh * kw || r0 >= r1 || c0 >= c1) f.FoldPadding();
        f.Finish(idx);
        if (++ow == OW) ow = 0, ++oh;
      }
      continue;
    }
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
  // NaN propagates. `|`, not `||`: one select, no branch (pooling's comparisons of data are
  // unpredictable, and a mispredicted branch per element cost more than the rest of the fold).
  if constexpr (K == ReduceKind::kMax) return ((a > b) | (a != a)) ? a : b;
  if constexpr (K == ReduceKind::kMin) return ((a < b) | (a != a)) ? a : b;
  if constexpr (K == ReduceKind::kAnd) return (a != T(0)) && (b != T(0));
  if constexpr (K == ReduceKind::kOr) return (a != T(0)) || (b != T(0));
  return b;
}

// The 9 elements of a 3x3 box at p (rows sr apart, columns sc apart) into v, row by row; false
// when one is a NaN (pooling's interior windows take the unrolled trees below only without).
template <typename T>
bool Load3x3(const T* p, int64_t sr, int64_t sc, T (&v)[9]) {
  bool nan = false;
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 3; ++b) {
      v[a * 3 + b] = p[a * sr + b * sc];
      nan |= v[a * 3 + b] != v[a * 3 + b];
    }
  return !nan;
}
// f(earlier, later) folded over v as one balanced tree, the earlier operand first in each pair.
template <typename T, class F>
T Tree9(const T (&v)[9], F f) {
  return f(f(f(v[0], v[1]), f(v[2], v[3])), f(f(v[4], v[5]), f(f(v[6], v[7]), v[8])));
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
  // The fold starts from init, and folding it again changes nothing for max/min (idempotent;
  // NaN propagates from anywhere), nor for a sum from +0 (x + 0 == x, and the sum of a fold
  // starting at +0 is never -0) or a product from 1.
  bool PaddingAnywhere() const {
    if constexpr (K == ReduceKind::kMax || K == ReduceKind::kMin) return true;
    if constexpr (K == ReduceKind::kAdd) return init == T(0) && !std::signbit(static_cast<double>(init));
    if constexpr (K == ReduceKind::kMul) return init == T(1);
    return false;
  }
  void FoldPadding() { acc = Combine<K>(acc, init); }
  // Rows [r0, r1) x columns [c0, c1) of a plane (FoldPlanes' box), row by row. A NaN-free 3x3
  // box of a float max or min (pooling's interior windows) is one tree, each pair keeping the
  // earlier element unless the later one is strictly beyond it: the element AddRun's running
  // comparison ends on (the earliest extreme, so the same sign of zero among equal zeros).
  template <int N>
  void Box(const int64_t (&poff)[N], const int64_t (&sh)[N], const int64_t (&sw)[N], int64_t r0, int64_t r1,
           int64_t c0, int64_t c1) {
    if constexpr ((K == ReduceKind::kMax || K == ReduceKind::kMin) && std::is_floating_point_v<T>) {
      T v[9];
      if (r1 - r0 == 3 && c1 - c0 == 3 && acc == acc &&
          Load3x3(src + poff[0] + r0 * sh[0] + c0 * sw[0], sh[0], sw[0], v)) {
        auto keep = [](T earlier, T later) {
          if constexpr (K == ReduceKind::kMax) return later > earlier ? later : earlier;
          else return later < earlier ? later : earlier;
        };
        acc = keep(acc, Tree9(v, keep));
        return;
      }
    }
    for (int64_t r = r0; r < r1; ++r) {
      int64_t off[N];
      for (int j = 0; j < N; ++j) off[j] = poff[j] + r * sh[j] + c0 * sw[j];
      AddRun(off, sw, c1 - c0);
    }
  }
  // `count` elements from offset off[0], `step[0]` apart. Max and min of floats keep the NaN test
  // apart from the comparison, so the comparison is a plain max/min instruction rather than a
  // branch on unpredictable data.
  void AddRun(const int64_t* off, const int64_t* step, int64_t count) {
    const T* p = src + off[0];
    const int64_t st = step[0];
    if constexpr ((K == ReduceKind::kMax || K == ReduceKind::kMin) && std::is_floating_point_v<T>) {
      T m = acc;
      bool nan = false;
      for (int64_t c = 0; c < count; ++c) {
        T v = p[c * st];
        nan |= v != v;
        if constexpr (K == ReduceKind::kMax) m = v > m ? v : m;
        else m = v < m ? v : m;
      }
      if (nan) {  // the first NaN, as the element-wise fold gives (acc itself when it is one)
        for (int64_t c = 0; c < count && acc == acc; ++c) acc = Combine<K>(acc, p[c * st]);
      } else if (acc == acc) {
        acc = m;
      }
    } else {
      for (int64_t c = 0; c < count; ++c) acc = Combine<K>(acc, p[c * st]);
    }
  }
};

// arg_reduce_window's fold: the (value, index) pair that orders highest (see builder.h): a NaN
// above every number (among NaNs the larger index), then the larger value, then among equal
// values the smaller index. That is a total order, so the window's maximum can be found in two
// passes over its elements, buffered: the largest value (a NaN if any), then the index that goes
// with it. A one-pass fold that compares (value, index) pairs either branches on the data
// (unpredictable in pooling) or carries compares and selects on both from one element to the
// next; the two passes carry a float max and an integer min. (ResNet-18's arg pooling per 25
// training steps: 13.7 -> 11.6 ms, with the box walk of FoldPlanes.)
template <typename T>
struct ArgFolder {
  static constexpr int kBuffered = 32;
  const T* src;
  const int64_t* index;
  int64_t* dst;
  T best;
  int64_t best_i;
  int n = 0;
  T vals[kBuffered];
  int64_t idxs[kBuffered];
  void Start() {
    best = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                : std::numeric_limits<T>::lowest();
    best_i = std::numeric_limits<int64_t>::max();
    n = 0;
  }
  void Push(int64_t o0, int64_t o1) {
    vals[n] = src[o0];
    idxs[n] = index[o1];
    if (++n == kBuffered) Flush();
  }
  void Add(const int64_t* off, bool valid) {
    if (valid) Push(off[0], off[1]);  // padding: (lowest, INT64_MAX) never beats what is there
  }
  void AddRun(const int64_t* off, const int64_t* step, int64_t count) {
    for (int64_t c = 0; c < count; ++c) Push(off[0] + c * step[0], off[1] + c * step[1]);
  }
  // Folds elements into (best, best_i) by the order above, in two passes: the largest value (a
  // NaN if any), then the index that goes with it. each(f) calls f(value, index) for every
  // element, once per pass. The NaN test is kept apart from the comparison (a plain max
  // instruction, no branch), and the index pass uses masks (the position of the maximum is data:
  // a branch on it mispredicts).
  template <class Each>
  void Fold(const Each& each) {
    T m = best;
    bool nan = best != best;
    each([&](T v, int64_t) __attribute__((always_inline)) {
      nan |= v != v;
      m = v > m ? v : m;
    });
    if (nan) m = std::numeric_limits<T>::quiet_NaN();
    int64_t bi;
    if (m != m) {  // the largest index among the NaNs
      bi = best != best ? best_i : std::numeric_limits<int64_t>::min();
      each([&](T v, int64_t i) __attribute__((always_inline)) { bi = v != v ? std::max(bi, i) : bi; });
    } else {  // the smallest index among the elements equal to the maximum
      bi = best == m ? best_i : std::numeric_limits<int64_t>::max();
      each([&](T v, int64_t i) __attribute__((always_inline)) {
        const int64_t eq = -static_cast<int64_t>(v == m);
        const int64_t cand = (i & eq) | (std::numeric_limits<int64_t>::max() & ~eq);
        bi = cand < bi ? cand : bi;
      });
    }
    best = m;
    best_i = bi;
  }
  // Folds the buffered elements.
  void Flush() {
    Fold([&](const auto& f) {
      for (int e = 0; e < n; ++e) f(vals[e], idxs[e]);
    });
    n = 0;
  }
  void Finish(int64_t i) {
    if (n > 0) Flush();
    dst[i] = best_i;
  }
  // A whole 3x3 box (a 3x3 pooling window inside the plane: most of them), unrolled: the maximum
  // by a tree of selects and the smallest index among its equals by a tree of minimums, where the
  // loops' carried chains were most of the time. False (nothing changed) when the box holds a
  // NaN: the loops below take that. The same result as the loops: the set of elements equal to
  // the maximum does not depend on the order in which it was found (-0 == +0).
  bool Box3x3(const T* p, int64_t sp_r, int64_t sp_c, const int64_t* q, int64_t sq_r, int64_t sq_c) {
    T v[9];
    int64_t ix[9];
    if (!Load3x3(p, sp_r, sp_c, v)) return false;
    Load3x3(q, sq_r, sq_c, ix);  // (indices: never a NaN)
    auto mx = [](T a, T b) { return a > b ? a : b; };
    // (best: Start's lowest value; -inf ties count as the window's own)
    const T m = mx(Tree9(v, mx), best);
    int64_t c[9];
    for (int e = 0; e < 9; ++e) {
      const int64_t eq = -static_cast<int64_t>(v[e] == m);
      c[e] = (ix[e] & eq) | (std::numeric_limits<int64_t>::max() & ~eq);
    }
    auto mn = [](int64_t a, int64_t b) { return a < b ? a : b; };
    int64_t bi = Tree9(c, mn);
    bi = best == m ? mn(bi, best_i) : bi;
    best = m;
    best_i = bi;
    return true;
  }
  // A box of a plane (FoldPlanes): Fold over the operand itself rather than a buffer of copies --
  // the box is a few L1-resident runs, and a 3x3 pooling window spent most of its time filling
  // the buffer.
  template <int N>
  void Box(const int64_t (&poff)[N], const int64_t (&sh)[N], const int64_t (&sw)[N], int64_t r0, int64_t r1,
           int64_t c0, int64_t c1) {
    const int64_t cols = c1 - c0;
    if (r1 - r0 == 3 && cols == 3 && !(best != best)) {
      if (Box3x3(src + poff[0] + r0 * sh[0] + c0 * sw[0], sh[0], sw[0], index + poff[1] + r0 * sh[1] + c0 * sw[1], sh[1],
                 sw[1]))
        return;
    }
    Fold([&](const auto& f) __attribute__((always_inline)) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* p = src + poff[0] + r * sh[0] + c0 * sw[0];
        const int64_t* q = index + poff[1] + r * sh[1] + c0 * sw[1];
        for (int64_t c = 0; c < cols; ++c) f(p[c * sw[0]], q[c * sw[1]]);
      }
    });
  }
  bool PaddingAnywhere() const { return true; }  // padding is skipped
  void FoldPadding() {}
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
                     static_cast<int64_t*>(out.data), T{}, 0, 0, {}, {}};
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
