// Reductions read their input in place, whatever its layout (no copy when the reduced dims are not
// trailing or the input is a strided view). The kept dims and the reduced dims are each coalesced;
// then one of three loops runs, threaded over outputs (and over the reduced range when there are
// too few outputs to share):
//   rows:    the innermost reduced dim has unit stride: each output combines contiguous runs
//            (Highway: float sums in lanes, NaN-propagating max/min);
//   columns: the innermost kept dim has unit stride: a block of adjacent outputs is combined
//            with one contiguous load per reduced position;
//   strided: neither; a scalar strided walk.
// Accumulators: float sums (f32/bf16/f16 inputs) as Note [Float sums] says (reduce_simd.h), other
// float kinds in float, f64 in double; integer sums and products wrap like PyTorch's CPU (two's complement, in i32 for narrow
// types and i64 for wide ones); the result is then converted to the output's dtype.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "base/thread_pool.h"
#include "runtime/host/axes.h"
#include "runtime/host/half.h"
#include "runtime/host/kernels.h"
#include "runtime/host/reduce_simd.h"

namespace tpu::host {
namespace {

// Kept dims in output order, adjacent ones merged where memory allows (the output is contiguous
// in this order, so merging keeps its flat order).
Axes KeptAxes(const View& in, const std::vector<bool>& reduced) {
  Axes k;
  for (size_t d = 0; d < in.dims.size(); ++d) {
    if (reduced[d] || in.dims[d] == 1) continue;
    if (!k.empty() && k.back().stride == in.strides[d] * in.dims[d]) {
      k.back().size *= in.dims[d];
      k.back().stride = in.strides[d];
    } else {
      k.push_back({in.dims[d], in.strides[d]});
    }
  }
  return k;
}

// Reduced dims ordered by decreasing stride (innermost last), merged where memory allows.
Axes ReducedAxes(const View& in, const std::vector<bool>& reduced) {
  Axes r;
  for (size_t d = 0; d < in.dims.size(); ++d)
    if (reduced[d] && in.dims[d] != 1) r.push_back({in.dims[d], in.strides[d]});
  std::stable_sort(r.begin(), r.end(), [](const Axis& a, const Axis& b) {
    return std::abs(a.stride) > std::abs(b.stride);
  });
  Axes m;
  for (const Axis& a : r) {
    if (!m.empty() && m.back().stride == a.stride * a.size) {
      m.back().size *= a.size;
      m.back().stride = a.stride;
    } else {
      m.push_back(a);
    }
  }
  return m;
}

template <typename M> struct ValueOf { using type = M; };
template <> struct ValueOf<uint16_t> { using type = float; };  // bf16
template <> struct ValueOf<Half> { using type = float; };
template <> struct ValueOf<bool> { using type = int32_t; };

template <typename M>
inline typename ValueOf<M>::type Val(M m) {
  if constexpr (std::is_same_v<M, uint16_t>) {
    uint32_t bits = static_cast<uint32_t>(m) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  } else {
    return static_cast<typename ValueOf<M>::type>(m);
  }
}

template <typename A>
inline A Combine(ReduceKind k, A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;  // wraps instead of overflowing
    if (k == ReduceKind::kAdd) return static_cast<A>(static_cast<U>(a) + static_cast<U>(b));
    if (k == ReduceKind::kMul) return static_cast<A>(static_cast<U>(a) * static_cast<U>(b));
  }
  switch (k) {
    case ReduceKind::kAdd: return a + b;
    case ReduceKind::kMul: return a * b;
    case ReduceKind::kMax: return (a > b || a != a) ? a : b;
    case ReduceKind::kMin: return (a < b || a != a) ? a : b;
    case ReduceKind::kAnd: return (a != A(0)) && (b != A(0));
    case ReduceKind::kOr: return (a != A(0)) || (b != A(0));
    case ReduceKind::kReplace: return b;
  }
  return a;
}

template <typename A>
A Identity(ReduceKind k) {
  switch (k) {
    case ReduceKind::kAdd: case ReduceKind::kOr: case ReduceKind::kReplace: return A(0);
    case ReduceKind::kMul: case ReduceKind::kAnd: return A(1);
    case ReduceKind::kMax:
      return std::is_floating_point_v<A> ? -std::numeric_limits<A>::infinity() : std::numeric_limits<A>::lowest();
    case ReduceKind::kMin:
      return std::is_floating_point_v<A> ? std::numeric_limits<A>::infinity() : std::numeric_limits<A>::max();
  }
  return A(0);
}

constexpr int64_t kChunk = 256;  // elements converted or combined per inner step
static_assert(kChunk <= kArgCols, "an arg reduction's column block must fit ArgF32Cols");

// Combines n contiguous integer or bool elements into acc with the kind a compile-time constant:
// the loop has no switch in it and vectorizes (a bool all() over attention rows of 64 ran a
// switch per element).
template <ReduceKind K, typename M, typename A>
A RunContiguous(A acc, const M* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc = Combine<A>(K, acc, static_cast<A>(Val(p[i])));
  return acc;
}

// Combines n elements at p (stride s) into acc.
template <typename M, typename A>
A RunInto(ReduceKind k, A acc, const M* p, int64_t n, int64_t s) {
  if constexpr (std::is_integral_v<A>) {
    if (s == 1) {
      if constexpr (std::is_same_v<M, bool>) {
        // all / any of bools: a false (zero) byte, or any nonzero byte, decides it.
        if (k == ReduceKind::kAnd || k == ReduceKind::kMin)
          return Combine<A>(k, acc, static_cast<A>(std::memchr(p, 0, n) == nullptr));
        if (k == ReduceKind::kOr || k == ReduceKind::kMax) {
          uint8_t any = 0;
          const uint8_t* b = reinterpret_cast<const uint8_t*>(p);
          for (int64_t i = 0; i < n; ++i) any |= b[i];
          return Combine<A>(k, acc, static_cast<A>(any != 0));
        }
      }
      switch (k) {
        case ReduceKind::kAdd: return RunContiguous<ReduceKind::kAdd>(acc, p, n);
        case ReduceKind::kMax: return RunContiguous<ReduceKind::kMax>(acc, p, n);
        case ReduceKind::kMin: return RunContiguous<ReduceKind::kMin>(acc, p, n);
        case ReduceKind::kAnd: return RunContiguous<ReduceKind::kAnd>(acc, p, n);
        case ReduceKind::kOr: return RunContiguous<ReduceKind::kOr>(acc, p, n);
        default: break;
      }
    }
  }
  constexpr bool kF32Like = std::is_same_v<M, float> || std::is_same_v<M, uint16_t>;
  if constexpr (kF32Like) {
    bool vec_max = std::is_same_v<A, float> && (k == ReduceKind::kMax || k == ReduceKind::kMin);
    if (s == 1 && vec_max) {
      if constexpr (std::is_same_v<M, float>)  // whole run at once: one horizontal step per run
        return static_cast<A>(MaxF32Row(p, n, static_cast<float>(acc), k == ReduceKind::kMax));
      for (int64_t i = 0; i < n; i += kChunk) {
        int64_t len = std::min(kChunk, n - i);
        const float* x;
        alignas(64) float buf[kChunk];
        if constexpr (std::is_same_v<M, float>) {
          x = p + i;
        } else {
          Bf16ToF32(p + i, buf, len);
          x = buf;
        }
        acc = static_cast<A>(MaxF32Row(x, len, static_cast<float>(acc), k == ReduceKind::kMax));
      }
      return acc;
    }
  }
  for (int64_t i = 0; i < n; ++i) acc = Combine<A>(k, acc, static_cast<A>(Val(p[i * s])));
  return acc;
}

// acc[j] combined with p[j], j < n (unit stride).
template <typename M, typename A>
void ColsInto(ReduceKind k, A* acc, const M* p, int64_t n) {
  constexpr bool kF32Like = std::is_same_v<M, float> || std::is_same_v<M, uint16_t>;
  if constexpr (kF32Like) {
    const float* x;
    alignas(64) float buf[kChunk];
    if constexpr (std::is_same_v<M, float>) {
      x = p;
    } else {
      Bf16ToF32(p, buf, n);  // n <= kChunk
      x = buf;
    }
    if constexpr (std::is_same_v<A, float>) {
      if (k == ReduceKind::kMax || k == ReduceKind::kMin) return MaxF32Cols(x, acc, n, k == ReduceKind::kMax);
      if (k == ReduceKind::kAdd) return AddF32ColsFloat(x, acc, n);
    }
  }
  for (int64_t j = 0; j < n; ++j) acc[j] = Combine<A>(k, acc[j], static_cast<A>(Val(p[j])));
}

// Reduces `in` (element type M) into out[o] (type R) with accumulator A.
template <typename M, typename A, typename R>
void ReduceTyped(ReduceKind k, const View& in, const Axes& kept, const Axes& red, A init, R* out) {
  const M* base = static_cast<const M*>(in.data);
  const int64_t outputs = Count(kept, kept.size()), rsize = Count(red, red.size());
  ThreadPool& pool = ThreadPool::Get();
  const int threads = pool.num_threads();
  const bool big = ThreadPool::Worth(outputs * rsize);
  const bool columns = !kept.empty() && kept.back().stride == 1 && (red.empty() || red.back().stride != 1);
  if (columns) {
    const int64_t inner = kept.back().size, chunks = (inner + kChunk - 1) / kChunk;
    const int64_t tasks = (outputs / inner) * chunks;
    // Split the reduced range too when there are too few blocks of outputs to share.
    int64_t splits = 1;
    if (big && tasks < 2 * threads && k != ReduceKind::kReplace && !(std::is_floating_point_v<A> && k == ReduceKind::kMul))
      splits = std::max<int64_t>(1, std::min<int64_t>(4 * threads / std::max<int64_t>(1, tasks), rsize / 64));
    std::vector<A> partial(splits > 1 ? splits * outputs : 0);
    auto body = [&](int64_t b, int64_t e) {
      alignas(64) A acc[kChunk];
      for (int64_t t = b; t < e; ++t) {
        int64_t split = t % splits, task = t / splits;
        int64_t ko = task / chunks, j0 = (task % chunks) * kChunk, len = std::min(kChunk, inner - j0);
        int64_t o0 = ko * inner + j0;
        const M* p = base + OffsetOf(kept, kept.size() - 1, ko) + j0;
        int64_t rb = split * rsize / splits, re = (split + 1) * rsize / splits;
        std::fill(acc, acc + len, split == 0 ? init : Identity<A>(k));
        if constexpr (std::is_same_v<M, float> && std::is_same_v<A, float>) {
          if ((k == ReduceKind::kMax || k == ReduceKind::kMin) && red.size() == 1) {
            constexpr int64_t kRows = 16;  // Note [Column sums by row groups]
            for (int64_t r = rb; r < re; r += kRows)
              MaxF32ColsRows(p + r * red[0].stride, red[0].stride, std::min(kRows, re - r), acc, len,
                             k == ReduceKind::kMax);
            rb = re;  // done
          }
        }
        Counter c(red, rb);
        for (int64_t r = rb; r < re; ++r, c.Next()) ColsInto<M, A>(k, acc, p + c.off, len);
        if (splits == 1) {
          for (int64_t j = 0; j < len; ++j) out[o0 + j] = static_cast<R>(acc[j]);
        } else {
          std::copy(acc, acc + len, partial.begin() + split * outputs + o0);
        }
      }
    };
    if (big) pool.ParallelFor(tasks * splits, 1, body);
    else body(0, tasks * splits);
    if (splits > 1)
      for (int64_t o = 0; o < outputs; ++o) {
        A a = partial[o];
        for (int64_t s = 1; s < splits; ++s) a = Combine<A>(k, a, partial[s * outputs + o]);
        out[o] = static_cast<R>(a);
      }
    return;
  }
  // Rows (or a strided walk): runs of the innermost reduced axis, `outer` of them per output.
  const Axis run = red.empty() ? Axis{1, 1} : red.back();
  const size_t nouter = red.empty() ? 0 : red.size() - 1;
  const int64_t outer = Count(red, nouter);
  auto range = [&](int64_t o, A acc, int64_t qb, int64_t qe) {
    const M* p = base + OffsetOf(kept, kept.size(), o);
    for (int64_t q = qb; q < qe; ++q)
      acc = RunInto<M, A>(k, acc, p + OffsetOf(red, nouter, q), run.size, run.stride);
    return acc;
  };
  int64_t splits = 1;
  // Float products keep their order (splitting would regroup the roundings).
  const bool splittable = k != ReduceKind::kReplace && !(std::is_floating_point_v<A> && k == ReduceKind::kMul);
  if (big && outputs < 2 * threads && outer >= 2 && splittable)
    splits = std::min<int64_t>(outer, 4 * threads);
  if (splits == 1 && big && outputs < 2 * threads && splittable && run.size >= 8192) {
    // One long run per output: split the run itself.
    int64_t pieces = std::min<int64_t>(4 * threads, run.size / 4096);
    std::vector<A> partial(pieces * outputs);
    pool.ParallelFor(pieces * outputs, 1, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        int64_t o = t / pieces, s = t % pieces;
        int64_t lo = s * run.size / pieces, hi = (s + 1) * run.size / pieces;
        const M* p = base + OffsetOf(kept, kept.size(), o) + lo * run.stride;
        partial[t] = RunInto<M, A>(k, s == 0 ? init : Identity<A>(k), p, hi - lo, run.stride);
      }
    });
    for (int64_t o = 0; o < outputs; ++o) {
      A a = partial[o * pieces];
      for (int64_t s = 1; s < pieces; ++s) a = Combine<A>(k, a, partial[o * pieces + s]);
      out[o] = static_cast<R>(a);
    }
    return;
  }
  if (splits > 1) {
    std::vector<A> partial(splits * outputs);
    pool.ParallelFor(splits * outputs, 1, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        int64_t o = t / splits, s = t % splits;
        partial[t] = range(o, s == 0 ? init : Identity<A>(k), s * outer / splits, (s + 1) * outer / splits);
      }
    });
    for (int64_t o = 0; o < outputs; ++o) {
      A a = partial[o * splits];
      for (int64_t s = 1; s < splits; ++s) a = Combine<A>(k, a, partial[o * splits + s]);
      out[o] = static_cast<R>(a);
    }
    return;
  }
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) out[o] = static_cast<R>(range(o, init, 0, outer));
  };
  if (big) pool.ParallelFor(outputs, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, rsize)), body);
  else body(0, outputs);
}

// Float sums of f32/bf16/f16 inputs, Note [Float sums] (reduce_simd.h); reductions of the leading
// dims of a contiguous float32 input accumulate each column in double instead. Threads split
// the outputs, and the reduced range only at whole lane blocks, so the result does not depend on
// the thread count (but for the order of the double block additions).
template <typename M>
void SumFloat(const View& in, const Axes& kept, const Axes& red, bool leading_f32, float init, float* out) {
  constexpr int64_t kBlock = LaneSum::kBlock;
  const M* base = static_cast<const M*>(in.data);
  const int64_t outputs = Count(kept, kept.size()), rsize = Count(red, red.size());
  const int64_t nblocks = (rsize + kBlock - 1) / kBlock;
  ThreadPool& pool = ThreadPool::Get();
  const int threads = pool.num_threads();
  const bool big = ThreadPool::Worth(outputs * rsize);
  auto as_float = [](const M* p, int64_t n, float* buf) -> const float* {  // n <= kChunk
    if constexpr (std::is_same_v<M, float>) return p;
    else if constexpr (std::is_same_v<M, uint16_t>) Bf16ToF32(p, buf, n);
    else for (int64_t j = 0; j < n; ++j) buf[j] = Val(p[j]);
    return buf;
  };
  const bool columns = !kept.empty() && kept.back().stride == 1 && (red.empty() || red.back().stride != 1);
  if (columns) {
    const int64_t inner = kept.back().size, chunks = (inner + kChunk - 1) / kChunk;
    const int64_t tasks = (outputs / inner) * chunks;
    int64_t splits = 1;
    if (big && tasks < 2 * threads) splits = std::max<int64_t>(1, std::min<int64_t>(4 * threads / tasks, nblocks));
    std::vector<double> partial(splits > 1 ? splits * outputs : 0);
    auto body = [&](int64_t b, int64_t e) {
      // Zeroed once: every lane block folds its lanes into tot and zeroes them at its end, and
      // each task ends at a block's end.
      std::vector<float> lanes(leading_f32 ? 0 : 16 * kChunk);
      alignas(64) double tot[kChunk];
      alignas(64) float buf[kChunk];
      for (int64_t t = b; t < e; ++t) {
        int64_t split = t % splits, task = t / splits;
        int64_t ko = task / chunks, j0 = (task % chunks) * kChunk, len = std::min(kChunk, inner - j0);
        int64_t o0 = ko * inner + j0;
        const M* p = base + OffsetOf(kept, kept.size() - 1, ko) + j0;
        int64_t rb = std::min(rsize, split * nblocks / splits * kBlock);
        int64_t re = std::min(rsize, (split + 1) * nblocks / splits * kBlock);
        std::fill(tot, tot + len, 0.0);  // (lanes: zero from the start, and after every block)
        bool whole_blocks = false;
        if constexpr (std::is_same_v<M, float>) {
          whole_blocks = !leading_f32 && red.size() == 1;
          if (whole_blocks)  // one reduced axis: each lane block in one call (the same additions, in order)
            for (int64_t b0 = rb; b0 < re; b0 += kBlock)
              AddF32ColsBlock(p + b0 * red[0].stride, red[0].stride, std::min(kBlock, rsize - b0), lanes.data(),
                              kChunk, len, tot);
        }
        if constexpr (std::is_same_v<M, float>) {
          if (leading_f32 && red.size() == 1) {  // rows in groups (Note [Column sums by row groups])
            constexpr int64_t kRows = 16;
            for (int64_t r = rb; r < re; r += kRows)
              AddF32ColsRows(p + r * red[0].stride, red[0].stride, std::min(kRows, re - r), tot, len);
            rb = re;  // done
          }
        }
        Counter c(red, rb);
        for (int64_t r = whole_blocks ? re : rb; r < re; ++r, c.Next()) {  // (whole blocks: none left)
          if constexpr (std::is_same_v<M, float>) {
            if (leading_f32) {
              AddF32Cols(p + c.off, tot, len);
              continue;
            }
          }
          // lane of position r (Note [Float sums]); the block's lanes go to tot at its end
          int64_t b0 = r / kBlock * kBlock, pos = r - b0, blen = std::min(kBlock, rsize - b0);
          int lane = pos < (blen & ~int64_t{15}) ? static_cast<int>(pos & 15) : 0;
          AddF32ColsFloat(as_float(p + c.off, len, buf), lanes.data() + lane * kChunk, len);
          if (pos + 1 == blen)
            for (int64_t j = 0; j < len; ++j) {
              double block = 0;
              for (int l = 0; l < 16; ++l) block += lanes[l * kChunk + j], lanes[l * kChunk + j] = 0;
              tot[j] += block;
            }
        }
        if (splits == 1) {
          for (int64_t j = 0; j < len; ++j) out[o0 + j] = static_cast<float>(static_cast<double>(init) + tot[j]);
        } else {
          std::copy(tot, tot + len, partial.begin() + split * outputs + o0);
        }
      }
    };
    if (big) pool.ParallelFor(tasks * splits, 1, body);
    else body(0, tasks * splits);
    if (splits > 1)
      for (int64_t o = 0; o < outputs; ++o) {
        double a = 0;
        for (int64_t sp = 0; sp < splits; ++sp) a += partial[sp * outputs + o];
        out[o] = static_cast<float>(static_cast<double>(init) + a);
      }
    return;
  }
  // Rows: output o's elements are its runs back to back; positions [p0, p1) of them are fed.
  const Axis run = red.empty() ? Axis{1, 1} : red.back();
  const size_t nouter = red.empty() ? 0 : red.size() - 1;
  auto feed = [&](int64_t o, int64_t p0, int64_t p1, LaneSum& s) {
    const M* po = base + OffsetOf(kept, kept.size(), o);
    alignas(64) float buf[kChunk];
    s.pos = p0;
    for (int64_t pos = p0; pos < p1;) {
      int64_t q = pos / run.size, off = pos % run.size;
      int64_t m = std::min(run.size - off, p1 - pos);
      const M* pr = po + OffsetOf(red, nouter, q) + off * run.stride;
      if (std::is_same_v<M, float> && run.stride == 1) {
        s.Feed(reinterpret_cast<const float*>(pr), m);
      } else {
        for (int64_t i = 0; i < m; i += kChunk) {
          int64_t len = std::min(kChunk, m - i);
          if (run.stride == 1) {
            s.Feed(as_float(pr + i, len, buf), len);
          } else {
            for (int64_t j = 0; j < len; ++j) buf[j] = Val(pr[(i + j) * run.stride]);
            s.Feed(buf, len);
          }
        }
      }
      pos += m;
    }
  };
  int64_t pieces = 1;
  if (big && outputs < 2 * threads && nblocks >= 4) pieces = std::min<int64_t>(4 * threads, nblocks);
  std::vector<double> partial(pieces * outputs);
  // Short contiguous float rows (one lane block each): many rows per call, no per-row setup.
  bool short_rows = std::is_same_v<M, float> && red.size() == 1 && run.stride == 1 && rsize <= kBlock && pieces == 1;
  // Note [Gathered rows]: an output whose elements lie in short runs (a batch norm's sums over N, H
  // and W of a small H x W: 16 runs of 4 per channel) fed LaneSum a call per run. They are first
  // copied, each output's elements back to back (CopyView), then summed as short rows: the same
  // positions in the same lanes, so the same bits.
  std::vector<float> gathered;
  if (std::is_same_v<M, float> && !short_rows && pieces == 1 && !red.empty() && rsize <= kBlock && run.size < 64 &&
      outputs * rsize <= (int64_t{1} << 20)) {  // (a scratch of at most 4 MiB)
    View src{const_cast<M*>(base), DType::kF32, {}, {}}, dst;
    for (const Axis& a : kept) src.dims.push_back(a.size), src.strides.push_back(a.stride);
    for (const Axis& a : red) src.dims.push_back(a.size), src.strides.push_back(a.stride);
    gathered.resize(static_cast<size_t>(outputs * rsize));
    dst = View{gathered.data(), DType::kF32, src.dims, ContiguousStrides(src.dims)};
    if (CopyView(src, dst).ok()) short_rows = true;
    else gathered.clear();
  }
  const bool from_gathered = !gathered.empty();
  auto body = [&](int64_t b, int64_t e) {
    if (short_rows) {
      double tot[256];
      for (int64_t o0 = b; o0 < e; o0 += 256) {
        const int64_t cnt = std::min<int64_t>(256, e - o0);
        auto row = [&](int64_t o) { return reinterpret_cast<const float*>(base + OffsetOf(kept, kept.size(), o)); };
        if (from_gathered) {
          SumF32Rows(gathered.data() + o0 * rsize, cnt, rsize, rsize, tot);
        } else if (kept.size() == 1) {
          SumF32Rows(row(o0), cnt, rsize, kept[0].stride, tot);  // rows at a fixed stride: one call
        } else {
          for (int64_t k = 0; k < cnt; ++k) SumF32Rows(row(o0 + k), 1, rsize, 0, tot + k);
        }
        for (int64_t k = 0; k < cnt; ++k) out[o0 + k] = static_cast<float>(static_cast<double>(init) + tot[k]);
      }
      return;
    }
    for (int64_t t = b; t < e; ++t) {
      int64_t o = t / pieces, sp = t % pieces;
      LaneSum s(rsize);
      feed(o, std::min(rsize, sp * nblocks / pieces * kBlock), std::min(rsize, (sp + 1) * nblocks / pieces * kBlock), s);
      if (pieces == 1) out[o] = static_cast<float>(static_cast<double>(init) + s.total);
      else partial[t] = s.total;
    }
  };
  if (big) pool.ParallelFor(outputs * pieces, pieces > 1 ? 1 : std::max<int64_t>(1, 16384 / std::max<int64_t>(1, rsize)), body);
  else body(0, outputs * pieces);
  if (pieces > 1)
    for (int64_t o = 0; o < outputs; ++o) {
      double a = 0;
      for (int64_t sp = 0; sp < pieces; ++sp) a += partial[o * pieces + sp];
      out[o] = static_cast<float>(static_cast<double>(init) + a);
    }
}

// The output element type for each input dtype (the accumulator's class, see the file comment).
DType ResultType(DType t) {
  switch (t) {
    case DType::kF32: case DType::kBF16: case DType::kF16: return DType::kF32;
    case DType::kF64: return DType::kF64;
    case DType::kI64: case DType::kU64: case DType::kU32: return DType::kI64;
    default: return DType::kI32;
  }
}

template <typename M, typename A, typename R>
void Dispatch3(ReduceKind k, const View& in, const Axes& kept, const Axes& red, const void* init, void* out) {
  ReduceTyped<M, A, R>(k, in, kept, red, static_cast<A>(*static_cast<const R*>(init)), static_cast<R*>(out));
}

template <typename M>
void DispatchInput(ReduceKind k, const View& in, const Axes& kept, const Axes& red, bool leading_f32,
                   const void* init, void* out) {
  using V = typename ValueOf<M>::type;
  if constexpr (std::is_same_v<V, float>) {
    if (k == ReduceKind::kAdd)
      SumFloat<M>(in, kept, red, leading_f32, *static_cast<const float*>(init), static_cast<float*>(out));
    else Dispatch3<M, float, float>(k, in, kept, red, init, out);
  } else if constexpr (std::is_same_v<V, double>) {
    Dispatch3<M, double, double>(k, in, kept, red, init, out);
  } else if constexpr (sizeof(V) == 8 || std::is_same_v<M, uint32_t>) {
    Dispatch3<M, int64_t, int64_t>(k, in, kept, red, init, out);
  } else {
    Dispatch3<M, int32_t, int32_t>(k, in, kept, red, init, out);
  }
}

template <typename F>
void DispatchStorage(DType t, F&& f) {
  switch (t) {
    case DType::kF32: f(float{}); break;
    case DType::kF64: f(double{}); break;
    case DType::kF16: f(Half{}); break;
    case DType::kBF16: f(uint16_t{}); break;
    case DType::kI64: f(int64_t{}); break;
    case DType::kU64: f(uint64_t{}); break;
    case DType::kI32: f(int32_t{}); break;
    case DType::kU32: f(uint32_t{}); break;
    case DType::kI16: f(int16_t{}); break;
    case DType::kI8: f(int8_t{}); break;
    case DType::kU8: f(uint8_t{}); break;
    case DType::kBool: f(bool{}); break;
  }
}

}  // namespace

View Materialize(const View& in, const Dims& perm, DType dtype, std::vector<char>& storage) {
  View src = in;
  src.dims.clear();
  src.strides.clear();
  for (int64_t p : perm) {
    src.dims.push_back(in.dims[p]);
    src.strides.push_back(in.strides[p]);
  }
  View dst{nullptr, dtype, src.dims, ContiguousStrides(src.dims)};
  storage.resize(std::max<int64_t>(1, dst.NumElements()) * DTypeSize(dtype));
  dst.data = storage.data();
  (void)CopyView(src, dst);
  return dst;
}

Status RunReduce(const Op& op, const View& in, const View& init, const View& out) {
  ReduceKind kind = static_cast<ReduceKind>(op.attrs.kind);
  std::vector<bool> reduced(in.dims.size(), false);
  for (int64_t d : op.attrs.a) reduced[d] = true;
  DType rt = ResultType(in.dtype);
  alignas(8) char init_bytes[8];
  TPU_RETURN_IF_ERROR(CopyView(init, View{init_bytes, rt, {}, {}}));
  int64_t outputs = out.NumElements();
  if (outputs == 0) return Status::Ok();
  // Results in the result type: straight into `out` when it is that type (it is contiguous).
  std::vector<char> storage;
  void* dst = out.data;
  if (out.dtype != rt) {
    storage.resize(outputs * DTypeSize(rt));
    dst = storage.data();
  }
  if (in.NumElements() == 0) {  // an empty reduced range: every output is init
    for (int64_t o = 0; o < outputs; ++o) std::memcpy(static_cast<char*>(dst) + o * DTypeSize(rt), init_bytes, DTypeSize(rt));
  } else {
    Axes kept = KeptAxes(in, reduced), red = ReducedAxes(in, reduced);
    // Leading dims of a contiguous float32 input: double column sums (SumFloat).
    bool leading_f32 = in.dtype == DType::kF32 && in.IsContiguous() && !op.attrs.a.empty();
    for (size_t i = 0; i < op.attrs.a.size(); ++i) leading_f32 &= op.attrs.a[i] == static_cast<int64_t>(i);
    // Note [Transposed outputs]: neither loop fits when the output's innermost dim is not the
    // input's (a sum over the repeated heads of a transposed attention gradient): the input's
    // unit-stride kept dim is then moved last, the columns loop fills a buffer in that order, and
    // one copy transposes it into place. Each output combines the same elements in the same
    // order either way (Note [Float sums] for float sums), so only the speed changes.
    int unit = -1;
    if (!kept.empty() && kept.back().stride != 1 && (red.empty() || red.back().stride != 1))
      for (size_t d = 0; d < in.dims.size(); ++d)
        if (!reduced[d] && in.dims[d] > 1 && in.strides[d] == 1) unit = static_cast<int>(d);
    if (unit >= 0) {
      const int rank = static_cast<int>(in.dims.size());
      View pin = in;
      std::vector<bool> pred;
      pin.dims.clear();
      pin.strides.clear();
      Dims order;  // pin's dims, as dims of `in`
      for (int d = 0; d < rank; ++d)
        if (d != unit) order.push_back(d);
      order.push_back(unit);
      for (int64_t d : order) {
        pin.dims.push_back(in.dims[d]);
        pin.strides.push_back(in.strides[d]);
        pred.push_back(reduced[d]);
      }
      // The buffer holds the outputs contiguous in pin's kept order; viewed in out's order (the
      // kept dims of `in`, in order) for the copy.
      std::vector<char> buffer(outputs * DTypeSize(rt));
      Dims stride_of(rank, 0);
      int64_t step = 1;
      for (auto it = order.rbegin(); it != order.rend(); ++it)
        if (!reduced[*it]) stride_of[*it] = step, step *= in.dims[*it];
      Dims ostrides;
      for (int d = 0; d < rank; ++d)
        if (!reduced[d]) ostrides.push_back(stride_of[d]);
      Axes pkept = KeptAxes(pin, pred), pred_axes = ReducedAxes(pin, pred);
      DispatchStorage(in.dtype, [&](auto m) {
        DispatchInput<decltype(m)>(kind, pin, pkept, pred_axes, false, init_bytes, buffer.data());
      });
      TPU_RETURN_IF_ERROR(CopyView(View{buffer.data(), rt, out.dims, ostrides}, View{dst, rt, out.dims, ContiguousStrides(out.dims)}));
    } else {
      DispatchStorage(in.dtype, [&](auto m) {
        DispatchInput<decltype(m)>(kind, in, kept, red, leading_f32, init_bytes, dst);
      });
    }
  }
  if (dst == out.data) return Status::Ok();
  return CopyView(View{dst, rt, out.dims, ContiguousStrides(out.dims)}, out);
}

namespace {

// First index of the max (min) along a run; a NaN wins at its first index.
template <typename M>
inline void ArgStep(bool is_max, typename ValueOf<M>::type v, int64_t r,
                    typename ValueOf<M>::type& bv, int64_t& bi) {
  if (bv != bv) return;
  if ((is_max ? v > bv : v < bv) || v != v) {
    bv = v;
    bi = r;
  }
}

template <typename M>
void ArgTyped(bool is_max, const View& in, const Axes& kept, Axis red, int64_t* out) {
  using V = typename ValueOf<M>::type;
  const M* base = static_cast<const M*>(in.data);
  const int64_t outputs = Count(kept, kept.size()), n = red.size;
  ThreadPool& pool = ThreadPool::Get();
  const bool big = ThreadPool::Worth(outputs * n);
  if (!kept.empty() && kept.back().stride == 1 && red.stride != 1 && n > 1) {
    // Columns: a block of adjacent outputs per task, one contiguous load per position.
    const int64_t inner = kept.back().size, chunks = (inner + kChunk - 1) / kChunk;
    if constexpr (std::is_same_v<M, float>) {
      // Few outer positions, long rows and many of them (a (2048, 2048) argmax over dim 0: each
      // block of 256 columns a walk down 2048 rows 8 KiB apart, 520-600 us): the rows are split
      // into ranges instead, each range read front to back, row by row, into its own running bests
      // of all the columns (330 us), and the ranges' answers merged in order (an earlier range
      // wins a tie). Rows of a block or two (a (1024, 512) bias-shaped argmax) walk as before.
      const int64_t outer = outputs / inner, threads = pool.num_threads();
      if (big && n <= INT32_MAX && chunks >= 4 && outer < 2 * threads && n >= 64 * threads) {
        const int64_t pieces = std::min<int64_t>(2 * threads, n / 32);
        std::vector<float> pv(pieces * outputs);
        std::vector<int32_t> pi(pieces * outputs);
        pool.ParallelFor(pieces * outer, 1, [&](int64_t b, int64_t e) {
          for (int64_t t = b; t < e; ++t) {
            const int64_t o = t / pieces, s = t % pieces, r0 = s * n / pieces, r1 = (s + 1) * n / pieces;
            const M* p = base + OffsetOf(kept, kept.size() - 1, o);
            float* bv = pv.data() + t * inner;
            int32_t* bi = pi.data() + t * inner;
            std::copy(p + r0 * red.stride, p + r0 * red.stride + inner, bv);
            std::fill(bi, bi + inner, static_cast<int32_t>(r0));
            for (int64_t r = r0 + 1; r < r1; ++r)
              ArgF32ColsStep(p + r * red.stride, inner, is_max, bv, bi, static_cast<int32_t>(r));
          }
        });
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t j = 0; j < inner; ++j) {
            const int64_t at = o * pieces * inner + j;
            float bv = pv[at];
            int64_t bi = pi[at];
            for (int64_t s = 1; s < pieces; ++s) ArgStep<M>(is_max, pv[at + s * inner], pi[at + s * inner], bv, bi);
            out[o * inner + j] = bi;
          }
        return;
      }
    }
    auto body = [&](int64_t b, int64_t e) {
      V bv[kChunk];
      int64_t bi[kChunk];
      for (int64_t t = b; t < e; ++t) {
        int64_t ko = t / chunks, j0 = (t % chunks) * kChunk, len = std::min(kChunk, inner - j0);
        const M* p = base + OffsetOf(kept, kept.size() - 1, ko) + j0;
        if constexpr (std::is_same_v<M, float>) {
          if (n <= INT32_MAX) {  // Note [Vector arg reductions]
            ArgF32Cols(p, n, red.stride, len, is_max, out + ko * inner + j0);
            continue;
          }
        }
        for (int64_t j = 0; j < len; ++j) bv[j] = Val(p[j]), bi[j] = 0;
        for (int64_t r = 1; r < n; ++r) {
          const M* q = p + r * red.stride;
          for (int64_t j = 0; j < len; ++j) ArgStep<M>(is_max, Val(q[j]), r, bv[j], bi[j]);
        }
        std::copy(bi, bi + len, out + ko * inner + j0);
      }
    };
    int64_t tasks = (outputs / inner) * chunks;
    if (big) pool.ParallelFor(tasks, 1, body);
    else body(0, tasks);
    return;
  }
  auto scan = [&](const M* p, int64_t lo, int64_t hi, V& bv, int64_t& bi) {
    if constexpr (std::is_same_v<M, float>) {
      if (red.stride == 1 && hi - lo <= INT32_MAX) {  // Note [Vector arg reductions]
        bi = lo + ArgF32Row(p + lo, hi - lo, is_max);
        bv = p[bi];
        return;
      }
    }
    bv = Val(p[lo * red.stride]);
    bi = lo;
    for (int64_t r = lo + 1; r < hi && bv == bv; ++r) ArgStep<M>(is_max, Val(p[r * red.stride]), r, bv, bi);
  };
  int threads = pool.num_threads();
  if (big && outputs < 2 * threads && n >= 8192) {  // few long runs: split each
    int64_t pieces = std::min<int64_t>(4 * threads, n / 4096);
    std::vector<V> pv(pieces * outputs);
    std::vector<int64_t> pi(pieces * outputs);
    pool.ParallelFor(pieces * outputs, 1, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        int64_t o = t / pieces, s = t % pieces;
        scan(base + OffsetOf(kept, kept.size(), o), s * n / pieces, (s + 1) * n / pieces, pv[t], pi[t]);
      }
    });
    for (int64_t o = 0; o < outputs; ++o) {
      V bv = pv[o * pieces];
      int64_t bi = pi[o * pieces];
      for (int64_t s = 1; s < pieces; ++s) ArgStep<M>(is_max, pv[o * pieces + s], pi[o * pieces + s], bv, bi);
      out[o] = bi;
    }
    return;
  }
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      V bv;
      scan(base + OffsetOf(kept, kept.size(), o), 0, n, bv, out[o]);
    }
  };
  if (big) pool.ParallelFor(outputs, std::max<int64_t>(1, 16384 / n), body);
  else body(0, outputs);
}

}  // namespace

Status RunArgReduce(const Op& op, const View& in, const View& out) {
  int64_t dim = op.attrs.a[0];
  bool is_max = static_cast<ReduceKind>(op.attrs.kind) == ReduceKind::kMax;
  int64_t outputs = out.NumElements();
  if (outputs == 0) return Status::Ok();
  if (in.dims[dim] == 0) return Internal("arg_reduce over an empty dimension");
  std::vector<bool> reduced(in.dims.size(), false);
  reduced[dim] = true;
  Axes kept = KeptAxes(in, reduced);
  Axis red{in.dims[dim], in.dims[dim] == 1 ? 1 : in.strides[dim]};
  std::vector<int64_t> storage;
  int64_t* dst = static_cast<int64_t*>(out.data);
  if (out.dtype != DType::kI64) {
    storage.resize(outputs);
    dst = storage.data();
  }
  DispatchStorage(in.dtype, [&](auto m) { ArgTyped<decltype(m)>(is_max, in, kept, red, dst); });
  if (storage.empty()) return Status::Ok();
  return CopyView(View{dst, DType::kI64, out.dims, ContiguousStrides(out.dims)}, out);
}

}  // namespace tpu::host
