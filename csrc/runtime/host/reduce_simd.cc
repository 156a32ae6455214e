#include "runtime/host/reduce_simd.h"

#include <algorithm>
#include <cmath>
#include <limits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/host/reduce_simd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "runtime/host/exp_log-inl.h"
#include "runtime/host/bf16-inl.h"
#include "runtime/host/no_contract-inl.h"

// A lambda the compiler must inline where it is called. RowSums instantiates its element lambda
// in four row-chain kernels; past a size GCC called softmax's exp lambda out of line, once per
// vector (a third of a (2048, 2048) softmax's time).
#ifndef TPU_LAMBDA_INLINE
#define TPU_LAMBDA_INLINE __attribute__((always_inline))
#endif

HWY_BEFORE_NAMESPACE();
namespace tpu::host {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void AddF32LanesImpl(const float* x, int64_t groups, float* lanes) {
  const hn::CappedTag<float, 16> d;  // 16 lanes as 1, 2 or 4 vectors
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  if (N == 16) {
    auto a = hn::LoadU(d, lanes);
    for (int64_t g = 0; g < groups; ++g) a = hn::Add(a, hn::LoadU(d, x + 16 * g));
    hn::StoreU(a, d, lanes);
    return;
  }
  for (int64_t k = 0; k < 16; k += N) {
    auto a = hn::LoadU(d, lanes + k);
    for (int64_t g = 0; g < groups; ++g) a = hn::Add(a, hn::LoadU(d, x + 16 * g + k));
    hn::StoreU(a, d, lanes + k);
  }
}

// Note [Interleaved lane sums]: the lanes of cnt <= kSumRowGroup rows' Note [Float sums] blocks
// (n <= LaneSum::kBlock elements a row), into lanes[16 k + l] for lane l of row k. elem(d, k, i)
// is the vector of row k's elements i.. (i = 16 g + j), tail(k, i) one element past the last
// whole group (those go to lane 0). A lane's additions are a dependent chain of n / 16 adds in a
// fixed order, so one row at a time waits on the adder's latency: up to four rows' chains are
// walked together, the same additions per row.
template <int R, class D, class Elem>
HWY_INLINE void RowChains(D d, int64_t k0, int64_t full, const Elem& elem, float* HWY_RESTRICT lanes) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  // (Four named accumulators, not an array: SVE's vector types are sizeless.)
  for (int64_t j = 0; j < 16; j += N) {
    auto a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
    for (int64_t i = j; i < full; i += 16) {
      a0 = hn::Add(a0, elem(d, k0, i));
      if constexpr (R > 1) a1 = hn::Add(a1, elem(d, k0 + 1, i));
      if constexpr (R > 2) a2 = hn::Add(a2, elem(d, k0 + 2, i));
      if constexpr (R > 3) a3 = hn::Add(a3, elem(d, k0 + 3, i));
    }
    hn::Store(a0, d, lanes + 16 * k0 + j);
    if constexpr (R > 1) hn::Store(a1, d, lanes + 16 * (k0 + 1) + j);
    if constexpr (R > 2) hn::Store(a2, d, lanes + 16 * (k0 + 2) + j);
    if constexpr (R > 3) hn::Store(a3, d, lanes + 16 * (k0 + 3) + j);
  }
}
template <class D, class Elem, class Tail>
HWY_INLINE void RowLanes(D d, int64_t cnt, int64_t n, const Elem& elem, const Tail& tail, float* HWY_RESTRICT lanes) {
  const int64_t full = n / 16 * 16;
  int64_t k0 = 0;
  for (; k0 + 4 <= cnt; k0 += 4) RowChains<4>(d, k0, full, elem, lanes);
  switch (cnt - k0) {
    case 3: RowChains<3>(d, k0, full, elem, lanes); break;
    case 2: RowChains<2>(d, k0, full, elem, lanes); break;
    case 1: RowChains<1>(d, k0, full, elem, lanes); break;
    default: break;
  }
  for (int64_t k = 0; k < cnt; ++k)
    for (int64_t i = full; i < n; ++i) lanes[16 * k] += tail(k, i);
}

// out[k] = row k's lanes added in order in double from 0. A whole group is added together, one
// double vector per lane index: the same additions per row as a walk over a row's lanes, without
// that walk's 16-add dependent chain per row.
HWY_INLINE void LaneTotals(const float* lanes, int64_t cnt, double* out) {
  constexpr int64_t kRows = kSumRowGroup;
  if (cnt < kRows) {
    for (int64_t k = 0; k < cnt; ++k) {
      double block = 0;
      for (int l = 0; l < 16; ++l) block += lanes[16 * k + l];
      out[k] = block;
    }
    return;
  }
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const int64_t ND = static_cast<int64_t>(hn::Lanes(dd));
  HWY_ALIGN float cols[16 * kRows];  // cols[l * kRows + k]: lane l of row k
  for (int64_t k = 0; k < kRows; ++k)
    for (int l = 0; l < 16; ++l) cols[l * kRows + k] = lanes[16 * k + l];
  for (int64_t k = 0; k < kRows; k += ND) {
    auto acc = hn::Zero(dd);
    for (int l = 0; l < 16; ++l) acc = hn::Add(acc, hn::PromoteTo(dd, hn::Load(df, cols + l * kRows + k)));
    hn::StoreU(acc, dd, out + k);
  }
}

// sums[k] = row k's Note [Float sums] total for rows of any length: block by block of
// LaneSum::kBlock, each block's lanes by RowLanes and added in double (LaneTotals), the blocks'
// totals added in order in double from 0, as LaneSum does.
template <class D, class Elem, class Tail>
HWY_INLINE void RowSums(D d, int64_t cnt, int64_t n, const Elem& elem, const Tail& tail, double* sums) {
  HWY_ALIGN float lanes[16 * kSumRowGroup];
  if (n <= LaneSum::kBlock) {
    RowLanes(d, cnt, n, elem, tail, lanes);
    LaneTotals(lanes, cnt, sums);
    return;
  }
  double block[kSumRowGroup];
  for (int64_t k = 0; k < cnt; ++k) sums[k] = 0;
  for (int64_t b0 = 0; b0 < n; b0 += LaneSum::kBlock) {
    const int64_t len = std::min<int64_t>(LaneSum::kBlock, n - b0);
    RowLanes(
        d, cnt, len, [&](auto dv, int64_t k, int64_t i) { return elem(dv, k, b0 + i); },
        [&](int64_t k, int64_t i) { return tail(k, b0 + i); }, lanes);
    LaneTotals(lanes, cnt, block);
    for (int64_t k = 0; k < cnt; ++k) sums[k] += block[k];
  }
}

// Rows of n contiguous floats, row k at rows[k] (cnt <= kSumRowGroup): each row's Note [Float
// sums] total.
void SumF32RowGroupImpl(const float* const* rows, int64_t cnt, int64_t n, double* out) {
  const hn::CappedTag<float, 16> d;
  RowSums(
      d, cnt, n, [&](auto dv, int64_t k, int64_t i) { return hn::LoadU(dv, rows[k] + i); },
      [&](int64_t k, int64_t i) { return rows[k][i]; }, out);
}

// Note [Norm row groups]: layer norm's and RMS norm's forward for a group of cnt <= kSumRowGroup
// rows of n floats in one call (rows longer than a lane block summed block by block, RowSums):
// the operations of their IR chains (a sum, a subtract, a square, a sum, multiplies and an add),
// in the same order with the same roundings, so the same bits. The squares go straight into
// their sum's lanes (Note [Interleaved lane sums]) and the output is written once: x is read
// three times (L1/L2-resident for a group) and nothing else is stored. A product that an add
// reads passes through Rounded() (no fused multiply-add).
// The first two steps of a layer norm's or a variance's chain for a group of rows: mu[k] = the
// row's sum / n (a float32 sum, divided in float32), sums[k] = the Note [Float sums] total of the
// squared deviations (x - mu)^2, each difference and square rounded to float32 as the chain's
// elementwise ops round them.
template <class D>
HWY_INLINE void MeanAndSquaredDeviations(D d, const float* const* x, int64_t cnt, int64_t n, float* mu,
                                         double* sums) {
  const float fn = static_cast<float>(n);
  RowSums(
      d, cnt, n, [&](auto dv, int64_t k, int64_t i) { return hn::LoadU(dv, x[k] + i); },
      [&](int64_t k, int64_t i) { return x[k][i]; }, sums);
  for (int64_t k = 0; k < cnt; ++k) mu[k] = static_cast<float>(0.0 + sums[k]) / fn;
  RowSums(
      d, cnt, n,
      [&](auto dv, int64_t k, int64_t i) {
        const auto v = hn::Sub(hn::LoadU(dv, x[k] + i), hn::Set(dv, mu[k]));
        return Rounded(hn::Mul(v, v));
      },
      [&](int64_t k, int64_t i) {
        const float v = x[k][i] - mu[k];
        return RoundedScalar(v * v);
      },
      sums);
}

void LayerNormGroupF32Impl(const float* const* x, float* const* y, int64_t cnt, int64_t n, const float* w,
                           const float* b, float eps, float* mu, float* rs) {
  const hn::CappedTag<float, 16> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const float fn = static_cast<float>(n);
  double sums[kSumRowGroup];
  MeanAndSquaredDeviations(d, x, cnt, n, mu, sums);
  for (int64_t k = 0; k < cnt; ++k) {
    const float r = rs[k] = 1.0f / std::sqrt(static_cast<float>(0.0 + sums[k]) / fn + eps);
    const float m = mu[k];
    const float* xr = x[k];
    float* yr = y[k];
    const auto vm = hn::Set(d, m), vr = hn::Set(d, r);
    int64_t i = 0;
    for (; i + N <= n; i += N) {
      auto v = hn::Mul(hn::Sub(hn::LoadU(d, xr + i), vm), vr);
      if (w) v = hn::Mul(v, hn::LoadU(d, w + i));
      if (b) v = hn::Add(Rounded(v), hn::LoadU(d, b + i));
      hn::StoreU(v, d, yr + i);
    }
    for (; i < n; ++i) {
      float v = (xr[i] - m) * r;
      if (w) v = v * w[i];
      if (b) v = RoundedScalar(v) + b[i];
      yr[i] = v;
    }
  }
}

// A variance's chain (row_match.cc Variance) for a group of rows: mu[k] and ss[k] = the float32
// sum of the squared deviations, as MeanAndSquaredDeviations computes them for a layer norm: x is
// read twice from L1/L2 and nothing is stored but the two per-row values (the chain wrote the
// squared deviations out and read them back).
void SquaredDeviationsGroupF32Impl(const float* const* x, int64_t cnt, int64_t n, float* mu, float* ss) {
  const hn::CappedTag<float, 16> d;
  double sums[kSumRowGroup];
  MeanAndSquaredDeviations(d, x, cnt, n, mu, sums);
  for (int64_t k = 0; k < cnt; ++k) ss[k] = static_cast<float>(0.0 + sums[k]);
}

void RmsNormGroupF32Impl(const float* const* x, float* const* y, int64_t cnt, int64_t n, const float* w,
                         float eps, float* rs) {
  const hn::CappedTag<float, 16> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const float fn = static_cast<float>(n);
  double sums[kSumRowGroup];
  RowSums(
      d, cnt, n,
      [&](auto dv, int64_t k, int64_t i) {
        const auto v = hn::LoadU(dv, x[k] + i);
        return Rounded(hn::Mul(v, v));
      },
      [&](int64_t k, int64_t i) { return RoundedScalar(x[k][i] * x[k][i]); }, sums);
  for (int64_t k = 0; k < cnt; ++k) {
    const float r = rs[k] = 1.0f / std::sqrt(static_cast<float>(0.0 + sums[k]) / fn + eps);
    const float* xr = x[k];
    float* yr = y[k];
    const auto vr = hn::Set(d, r);
    int64_t i = 0;
    for (; i + N <= n; i += N) {
      auto v = hn::Mul(hn::LoadU(d, xr + i), vr);
      if (w) v = hn::Mul(v, hn::LoadU(d, w + i));
      hn::StoreU(v, d, yr + i);
    }
    for (; i < n; ++i) yr[i] = w ? xr[i] * r * w[i] : xr[i] * r;
  }
}

// Adds `groups` groups of 16 rows of floats, `stride` apart from x: row l of each group into a_l
// (a column sum's 16 lanes, Note [Float sums]).
template <class D, class V>
HWY_INLINE void AddRowGroups(D d, const float* x, int64_t stride, int64_t groups, V& a0, V& a1, V& a2, V& a3, V& a4,
                             V& a5, V& a6, V& a7, V& a8, V& a9, V& a10, V& a11, V& a12, V& a13, V& a14, V& a15) {
  for (int64_t g = 0; g < groups; ++g, x += 16 * stride) {
    a0 = hn::Add(a0, hn::LoadU(d, x));
    a1 = hn::Add(a1, hn::LoadU(d, x + stride));
    a2 = hn::Add(a2, hn::LoadU(d, x + 2 * stride));
    a3 = hn::Add(a3, hn::LoadU(d, x + 3 * stride));
    a4 = hn::Add(a4, hn::LoadU(d, x + 4 * stride));
    a5 = hn::Add(a5, hn::LoadU(d, x + 5 * stride));
    a6 = hn::Add(a6, hn::LoadU(d, x + 6 * stride));
    a7 = hn::Add(a7, hn::LoadU(d, x + 7 * stride));
    a8 = hn::Add(a8, hn::LoadU(d, x + 8 * stride));
    a9 = hn::Add(a9, hn::LoadU(d, x + 9 * stride));
    a10 = hn::Add(a10, hn::LoadU(d, x + 10 * stride));
    a11 = hn::Add(a11, hn::LoadU(d, x + 11 * stride));
    a12 = hn::Add(a12, hn::LoadU(d, x + 12 * stride));
    a13 = hn::Add(a13, hn::LoadU(d, x + 13 * stride));
    a14 = hn::Add(a14, hn::LoadU(d, x + 14 * stride));
    a15 = hn::Add(a15, hn::LoadU(d, x + 15 * stride));
  }
}

// Note [Float sums] for columns: one block's positions pos < blen, position pos a row of `len`
// floats at p + pos * stride, added into lane pos & 15 (lane 0 past the last whole group of 16)
// of lanes[lane * lane_stride + j]; then each column's 16 lanes added in order in double onto
// tot[j], the lanes zeroed. The calls the columns loop made per position and its scalar walk over
// the lanes, in one call: the same additions in the same order.
void AddF32ColsBlockImpl(const float* p, int64_t stride, int64_t blen, float* lanes, int64_t lane_stride,
                         int64_t len, double* tot) {
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t full = blen & ~int64_t{15};
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const int64_t ND = static_cast<int64_t>(hn::Lanes(dd));
  // A block that L1 holds (a [16, 64, 128] tensor summed over dim 1: 64 rows of 128) keeps a
  // vector of columns' 16 lanes in registers while it walks the rows, then folds them: no lane
  // buffer loaded and stored per row, half the memory operations (that sum: 12.6-13.3 -> 10.9-11.5
  // us a call on one thread). The same additions in the same order as the rows below. Wider
  // blocks go row by row.
  int64_t j0 = 0;
  if (N == 16 && blen * len <= 8192) {
    for (; j0 + N <= len; j0 += N) {
      auto a0 = hn::Zero(d), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
      auto a8 = a0, a9 = a0, a10 = a0, a11 = a0, a12 = a0, a13 = a0, a14 = a0, a15 = a0;
      const float* x = p + j0;
      AddRowGroups(d, x, stride, full / 16, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15);
      int64_t pos = full;
      x += full * stride;
      for (; pos < blen; ++pos, x += stride) a0 = hn::Add(a0, hn::LoadU(d, x));  // past the last 16: lane 0
      // Lanes 0..15 in order, in double, onto tot: each half of the 16 columns.
      HWY_ALIGN float acc[16 * 16];
      hn::Store(a0, d, acc), hn::Store(a1, d, acc + 16), hn::Store(a2, d, acc + 32), hn::Store(a3, d, acc + 48);
      hn::Store(a4, d, acc + 64), hn::Store(a5, d, acc + 80), hn::Store(a6, d, acc + 96), hn::Store(a7, d, acc + 112);
      hn::Store(a8, d, acc + 128), hn::Store(a9, d, acc + 144), hn::Store(a10, d, acc + 160);
      hn::Store(a11, d, acc + 176), hn::Store(a12, d, acc + 192), hn::Store(a13, d, acc + 208);
      hn::Store(a14, d, acc + 224), hn::Store(a15, d, acc + 240);
      for (int64_t h = 0; h < 16; h += ND) {
        auto block = hn::Zero(dd);
        for (int l = 0; l < 16; ++l) block = hn::Add(block, hn::PromoteTo(dd, hn::LoadU(df, acc + l * 16 + h)));
        hn::StoreU(hn::Add(hn::LoadU(dd, tot + j0 + h), block), dd, tot + j0 + h);
      }
    }
    if (j0 == len) return;
    p += j0, lanes += j0, tot += j0, len -= j0;
  }
  // Row by row: each row's columns into its lane's row of `lanes`, so every input row is read once,
  // front to back. (Holding a vector of columns' 16 lanes in registers while walking the block's
  // rows, up to 2048 of them a stride apart, then the next vector of columns, read each input
  // line cold: (64, 256, 256) summed over dim 1 took 1.4x PyTorch CPU's time.)
  // Note [Column sums by row groups], for the lanes: in groups of 64 rows, a vector of columns'
  // 16 lanes stays in registers over the group's rows (each lane gets rows l, l + 16, l + 32,
  // l + 48 of it, in order: the same additions), then the group's next vector of columns, whose
  // lines the group's first pass brought into the cache. Per row a lane was loaded and stored.
  constexpr int64_t kGroup = 64;
  int64_t pos0 = 0;
  const int64_t cols = len / N * N;
  for (; pos0 + kGroup <= full && cols > 0; pos0 += kGroup) {
    const float* g = p + pos0 * stride;
    for (int64_t j = 0; j < cols; j += N) {
      float* q = lanes + j;
      const int64_t ls = lane_stride;
      auto a0 = hn::LoadU(d, q), a1 = hn::LoadU(d, q + ls), a2 = hn::LoadU(d, q + 2 * ls), a3 = hn::LoadU(d, q + 3 * ls);
      auto a4 = hn::LoadU(d, q + 4 * ls), a5 = hn::LoadU(d, q + 5 * ls), a6 = hn::LoadU(d, q + 6 * ls);
      auto a7 = hn::LoadU(d, q + 7 * ls), a8 = hn::LoadU(d, q + 8 * ls), a9 = hn::LoadU(d, q + 9 * ls);
      auto a10 = hn::LoadU(d, q + 10 * ls), a11 = hn::LoadU(d, q + 11 * ls), a12 = hn::LoadU(d, q + 12 * ls);
      auto a13 = hn::LoadU(d, q + 13 * ls), a14 = hn::LoadU(d, q + 14 * ls), a15 = hn::LoadU(d, q + 15 * ls);
      AddRowGroups(d, g + j, stride, kGroup / 16, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14,
                   a15);
      hn::StoreU(a0, d, q), hn::StoreU(a1, d, q + ls), hn::StoreU(a2, d, q + 2 * ls), hn::StoreU(a3, d, q + 3 * ls);
      hn::StoreU(a4, d, q + 4 * ls), hn::StoreU(a5, d, q + 5 * ls), hn::StoreU(a6, d, q + 6 * ls);
      hn::StoreU(a7, d, q + 7 * ls), hn::StoreU(a8, d, q + 8 * ls), hn::StoreU(a9, d, q + 9 * ls);
      hn::StoreU(a10, d, q + 10 * ls), hn::StoreU(a11, d, q + 11 * ls), hn::StoreU(a12, d, q + 12 * ls);
      hn::StoreU(a13, d, q + 13 * ls), hn::StoreU(a14, d, q + 14 * ls), hn::StoreU(a15, d, q + 15 * ls);
    }
    for (int64_t pos = pos0; pos < pos0 + kGroup && cols < len; ++pos) {  // the columns past the vectors
      float* q = lanes + (pos & 15) * lane_stride;
      const float* x = p + pos * stride;
      for (int64_t j = cols; j < len; ++j) q[j] += x[j];
    }
  }
  for (int64_t pos = pos0; pos < blen; ++pos) {
    float* q = lanes + (pos < full ? (pos & 15) : 0) * lane_stride;
    const float* x = p + pos * stride;
    int64_t j = 0;
    for (; j + N <= len; j += N) hn::StoreU(hn::Add(hn::LoadU(d, q + j), hn::LoadU(d, x + j)), d, q + j);
    for (; j < len; ++j) q[j] += x[j];
  }
  int64_t j = 0;
  for (; j + ND <= len; j += ND) {
    auto block = hn::Zero(dd);
    for (int l = 0; l < 16; ++l) {
      block = hn::Add(block, hn::PromoteTo(dd, hn::LoadU(df, lanes + l * lane_stride + j)));
      hn::StoreU(hn::Zero(df), df, lanes + l * lane_stride + j);
    }
    hn::StoreU(hn::Add(hn::LoadU(dd, tot + j), block), dd, tot + j);
  }
  for (; j < len; ++j) {
    double block = 0;
    for (int l = 0; l < 16; ++l) block += lanes[l * lane_stride + j], lanes[l * lane_stride + j] = 0;
    tot[j] += block;
  }
}

void AddF32ColsFloatImpl(const float* x, float* acc, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Add(hn::LoadU(d, acc + i), hn::LoadU(d, x + i)), d, acc + i);
  for (; i < n; ++i) acc[i] += x[i];
}

template <class D, class V>
HWY_INLINE V CombineMax(D d, V acc, V x, bool is_max) {
  // Keep acc where it wins or is NaN; otherwise take x (a NaN x is taken, so NaN propagates).
  auto keep = is_max ? hn::Gt(acc, x) : hn::Lt(acc, x);
  return hn::IfThenElse(hn::Or(keep, hn::IsNaN(acc)), acc, x);
}

// The max (or min) of n floats, x(d, i) a vector of them from i and one(i) the float at i, as
// MaxF32Row gives it; the same for any element type that loads as floats.
template <class D, class Load, class One>
HWY_INLINE float MaxRowOf(D d, const Load& x, const One& one, int64_t n, float acc, bool is_max) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  if (n >= 2 * N) {
    auto a0 = x(d, 0), a1 = x(d, N);
    for (i = 2 * N; i + 2 * N <= n; i += 2 * N) {
      a0 = CombineMax(d, a0, x(d, i), is_max);
      a1 = CombineMax(d, a1, x(d, i + N), is_max);
    }
    a0 = CombineMax(d, a0, a1, is_max);
    if (hn::AllFalse(d, hn::IsNaN(a0))) {
      // The lanes' max by a vector tree (a scalar walk over 16 lanes was a dependent chain that
      // cost short rows -- softmax over 64 -- as much as their arithmetic). Without NaN the order
      // can only choose between -0 and +0 when both are the max.
      const float m = hn::GetLane(is_max ? hn::MaxOfLanes(d, a0) : hn::MinOfLanes(d, a0));
      acc = ((is_max ? acc > m : acc < m) || acc != acc) ? acc : m;
    } else {  // a NaN: the first one in lane order (unless acc is one), as the walk gives
      HWY_ALIGN float lanes[hn::MaxLanes(d)];
      hn::Store(a0, d, lanes);
      for (int64_t j = 0; j < N; ++j)
        acc = ((is_max ? acc > lanes[j] : acc < lanes[j]) || acc != acc) ? acc : lanes[j];
    }
  }
  for (; i < n; ++i) {
    const float v = one(i);
    acc = ((is_max ? acc > v : acc < v) || acc != acc) ? acc : v;
  }
  return acc;
}

float MaxF32RowImpl(const float* x, int64_t n, float acc, bool is_max) {
  const hn::ScalableTag<float> d;
  return MaxRowOf(
      d, [&](auto dv, int64_t i) { return hn::LoadU(dv, x + i); }, [&](int64_t i) { return x[i]; }, n, acc, is_max);
}

// Note [Softmax row groups]: softmax / log-softmax of cnt <= kSumRowGroup contiguous float rows of
// n, as the separate kernels compute them (so the same bits): m = max(x); e = exp(x - m), summed
// by Note [Float sums] (RowSums); softmax: y = e / total, the exponentials stored in y as they are
// summed and divided there in place; log: y = (x - m) - log(total) from x again. One call per
// group: x is read two or three times while L1/L2 holds it and y written once or twice, where
// the separate kernels also stored the exponentials in a buffer and read them back, with a call
// per row for each step. y may be x.
//
// SoftmaxGroupOf is that kernel for rows of any element type: x(k, i) row k's floats from i as a
// vector, one(k, i) its float at i; e[k] a float row the exponentials are stored in (softmax
// only); the results go out through out(k, i, vector) and out_one(k, i, float). Softmax divides
// e[k] into the results: e[k] may be where out writes (float rows: y itself).
template <class D, class Load, class One, class Out, class OutOne>
HWY_INLINE void SoftmaxGroupOf(D d, const Load& x, const One& one, float* const* e, const Out& out,
                               const OutOne& out_one, int64_t cnt, int64_t n, bool log) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  float m[kSumRowGroup];
  for (int64_t k = 0; k < cnt; ++k)
    m[k] = MaxRowOf(
        d, [&](auto, int64_t i) TPU_LAMBDA_INLINE { return x(k, i); }, [&](int64_t i) { return one(k, i); }, n,
        -std::numeric_limits<float>::infinity(), true);
  double sums[kSumRowGroup];
  RowSums(
      d, cnt, n,
      [&](auto dv, int64_t k, int64_t i) TPU_LAMBDA_INLINE {
        const auto v = IeeeExp(dv, hn::Sub(x(k, i), hn::Set(dv, m[k])));
        if (!log) hn::StoreU(v, dv, e[k] + i);
        return v;
      },
      [&](int64_t k, int64_t i) {
        const float v = IeeeExpOne(d, one(k, i) - m[k]);
        if (!log) e[k][i] = v;
        return v;
      },
      sums);
  for (int64_t k = 0; k < cnt; ++k) {
    const float total = static_cast<float>(0.0 + sums[k]);
    int64_t i = 0;
    if (!log) {
      const float* er = e[k];
      const bool usable = ScalarQuotientUsable(total);
      const auto vb = hn::Set(d, total), vr = hn::Set(d, usable ? 1.0f / total : 1.0f);
      for (; i + N <= n; i += N) out(k, i, QuotientByScalar(d, hn::LoadU(d, er + i), vb, vr, usable));
      for (; i < n; ++i) out_one(k, i, er[i] / total);
    } else {
      const float l = hn::GetLane(IeeeLog(d, hn::Set(d, total)));
      const auto vm = hn::Set(d, m[k]), vl = hn::Set(d, l);
      for (; i + N <= n; i += N) out(k, i, hn::Sub(hn::Sub(x(k, i), vm), vl));
      for (; i < n; ++i) out_one(k, i, (one(k, i) - m[k]) - l);
    }
  }
}

void SoftmaxGroupF32Impl(const float* const* x, float* const* y, int64_t cnt, int64_t n, bool log) {
  const hn::CappedTag<float, 16> d;
  SoftmaxGroupOf(
      d, [&](int64_t k, int64_t i) TPU_LAMBDA_INLINE { return hn::LoadU(d, x[k] + i); },
      [&](int64_t k, int64_t i) { return x[k][i]; }, y,
      [&](int64_t k, int64_t i, auto v) TPU_LAMBDA_INLINE { hn::StoreU(v, d, y[k] + i); },
      [&](int64_t k, int64_t i, float v) { y[k][i] = v; }, cnt, n, log);
}

// The backward of cnt <= kSumRowGroup contiguous float rows in one call, as the separate kernels
// compute it (the same bits): s = the Note [Float sums] total of g (log) or of g * y (softmax, each
// product rounded before it is added), then log: dx = g - exp(y) * s (the product rounded), softmax:
// dx = y * (g - s). dx may be g or y.
void SoftmaxBackwardGroupF32Impl(const float* const* g, const float* const* y, float* const* dx, int64_t cnt,
                                 int64_t n, bool log) {
  const hn::CappedTag<float, 16> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  double sums[kSumRowGroup];
  RowSums(
      d, cnt, n,
      [&](auto dv, int64_t k, int64_t i) {
        const auto gv = hn::LoadU(dv, g[k] + i);
        return log ? gv : Rounded(hn::Mul(gv, hn::LoadU(dv, y[k] + i)));
      },
      [&](int64_t k, int64_t i) { return log ? g[k][i] : RoundedScalar(g[k][i] * y[k][i]); }, sums);
  for (int64_t k = 0; k < cnt; ++k) {
    const float s = static_cast<float>(0.0 + sums[k]);
    const float *gr = g[k], *yr = y[k];
    float* o = dx[k];
    const auto vs = hn::Set(d, s);
    int64_t i = 0;
    if (log) {
      for (; i + N <= n; i += N)
        hn::StoreU(hn::Sub(hn::LoadU(d, gr + i), Rounded(hn::Mul(IeeeExp(d, hn::LoadU(d, yr + i)), vs))), d, o + i);
      for (; i < n; ++i) o[i] = gr[i] - RoundedScalar(IeeeExpOne(d, yr[i]) * s);
    } else {
      for (; i + N <= n; i += N) hn::StoreU(hn::Mul(hn::LoadU(d, yr + i), hn::Sub(hn::LoadU(d, gr + i), vs)), d, o + i);
      for (; i < n; ++i) o[i] = yr[i] * (gr[i] - s);
    }
  }
}

void AddF32ColsImpl(const float* x, double* acc, int64_t n) {
  const hn::ScalableTag<double> d64;
  const hn::Rebind<float, decltype(d64)> d32;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d64));
  int64_t i = 0;
  for (; i + N <= n; i += N)
    hn::StoreU(hn::Add(hn::LoadU(d64, acc + i), hn::PromoteTo(d64, hn::LoadU(d32, x + i))), d64, acc + i);
  for (; i < n; ++i) acc[i] += x[i];
}

// Note [Column sums by row groups]: a double column sum over leading dims loaded and stored
// each column's total once per row (AddF32ColsImpl): a (2048, 2048) sum over dim 0 did two
// 64-byte memory operations on the totals per 8 input floats and ran at 0.53x PyTorch's. A group
// of rows keeps a vector of totals in a register while it adds the group's rows to it, in row
// order: the same additions in the same order, so the same bits.
// Combines `rows` rows of floats, `stride` apart from x, into acc[j] in row order, two vectors of
// columns at a time held in registers across the rows; returns how many columns it did (the
// rest: fewer than two vectors).
template <class D, typename T, class Load, class Combine>
HWY_INLINE int64_t ColsRowsOf(D d, T* acc, const float* x, int64_t stride, int64_t rows, int64_t n, const Load& load,
                              const Combine& combine) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    auto a0 = hn::LoadU(d, acc + i), a1 = hn::LoadU(d, acc + i + N);
    const float* p = x + i;
    for (int64_t r = 0; r < rows; ++r, p += stride) {
      a0 = combine(a0, load(p));
      a1 = combine(a1, load(p + N));
    }
    hn::StoreU(a0, d, acc + i);
    hn::StoreU(a1, d, acc + i + N);
  }
  return i;
}

void AddF32ColsRowsImpl(const float* x, int64_t stride, int64_t rows, double* acc, int64_t n) {
  const hn::ScalableTag<double> d64;
  const hn::Rebind<float, decltype(d64)> d32;
  const int64_t done = ColsRowsOf(
      d64, acc, x, stride, rows, n, [&](const float* p) { return hn::PromoteTo(d64, hn::LoadU(d32, p)); },
      [](auto a, auto v) { return hn::Add(a, v); });
  for (int64_t i = done; i < n; ++i) {
    double a = acc[i];
    for (int64_t r = 0; r < rows; ++r) a += x[r * stride + i];
    acc[i] = a;
  }
}

void MaxF32ColsImpl(const float* x, float* acc, int64_t n, bool is_max) {
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + N <= n; i += N)
    hn::StoreU(CombineMax(d, hn::LoadU(d, acc + i), hn::LoadU(d, x + i), is_max), d, acc + i);
  for (; i < n; ++i) acc[i] = ((is_max ? acc[i] > x[i] : acc[i] < x[i]) || acc[i] != acc[i]) ? acc[i] : x[i];
}

// Note [Vector arg reductions]: argmax / argmin of float32 as PyTorch's CPU kernel defines it --
// the first index of the largest (smallest) value, a NaN largest (and smallest) of all, so the
// first NaN wins. Each vector lane keeps the best value and its index of the elements it sees,
// replacing them only when an element is strictly better (or is the lane's first NaN), so a
// lane's index is the first of its best; the row's answer is the first index among the lanes
// holding the best value (the first NaN's if a lane holds one). The same answer as walking the
// elements in order, at the speed of reading them: the scalar walk branched on every element
// (~0.7 ns each, a (2048, 2048) argmax at 3 ms, 13% of copy bandwidth).
template <bool IsMax, class D, class V = hn::Vec<D>>
HWY_INLINE hn::Mask<D> ArgBetter(D, V v, V best) {
  const auto cmp = IsMax ? hn::Gt(v, best) : hn::Lt(v, best);
  return hn::Or(cmp, hn::AndNot(hn::IsNaN(best), hn::IsNaN(v)));
}

// Whether candidate (v, i) beats (bv, bi) under the Note's order (bi < 0: no candidate yet).
template <bool IsMax>
HWY_INLINE bool ArgWins(float v, int64_t i, float bv, int64_t bi) {
  if (bi < 0) return true;
  const bool vn = v != v, bn = bv != bv;
  if (vn || bn) return vn && (!bn || i < bi);
  return (IsMax ? v > bv : v < bv) || (v == bv && i < bi);
}

// (b, i) = the better of the candidates (b, i) and (v, j), lane by lane: the Note's order, the
// smaller index between equal values (or two NaNs).
template <bool IsMax, class D, class DI, class V = hn::Vec<D>, class VI = hn::Vec<DI>>
HWY_INLINE void ArgMerge(D d, DI di, V& b, VI& i, V v, VI j) {
  const auto tie = hn::And(hn::RebindMask(d, hn::Lt(j, i)), hn::Or(hn::Eq(v, b), hn::And(hn::IsNaN(v), hn::IsNaN(b))));
  const auto m = hn::Or(ArgBetter<IsMax>(d, v, b), tie);
  b = hn::IfThenElse(m, v, b);
  i = hn::IfThenElse(hn::RebindMask(di, m), j, i);
}

template <bool IsMax>
int64_t ArgF32RowOf(const float* x, int64_t n) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  float bv = 0;
  int64_t bi = -1, i = 0;
  if (n >= 4 * N) {
    auto b0 = hn::LoadU(d, x), b1 = hn::LoadU(d, x + N), b2 = hn::LoadU(d, x + 2 * N), b3 = hn::LoadU(d, x + 3 * N);
    const auto step = hn::Iota(di, 0);
    auto i0 = step, i1 = hn::Add(step, hn::Set(di, static_cast<int32_t>(N))),
         i2 = hn::Add(step, hn::Set(di, static_cast<int32_t>(2 * N))),
         i3 = hn::Add(step, hn::Set(di, static_cast<int32_t>(3 * N)));
    for (i = 4 * N; i + 4 * N <= n; i += 4 * N) {
      const auto at = hn::Add(step, hn::Set(di, static_cast<int32_t>(i)));
      const auto v0 = hn::LoadU(d, x + i), v1 = hn::LoadU(d, x + i + N), v2 = hn::LoadU(d, x + i + 2 * N),
                 v3 = hn::LoadU(d, x + i + 3 * N);
      const auto m0 = ArgBetter<IsMax>(d, v0, b0), m1 = ArgBetter<IsMax>(d, v1, b1),
                 m2 = ArgBetter<IsMax>(d, v2, b2), m3 = ArgBetter<IsMax>(d, v3, b3);
      b0 = hn::IfThenElse(m0, v0, b0), b1 = hn::IfThenElse(m1, v1, b1);
      b2 = hn::IfThenElse(m2, v2, b2), b3 = hn::IfThenElse(m3, v3, b3);
      i0 = hn::IfThenElse(hn::RebindMask(di, m0), at, i0);
      i1 = hn::IfThenElse(hn::RebindMask(di, m1), hn::Add(at, hn::Set(di, static_cast<int32_t>(N))), i1);
      i2 = hn::IfThenElse(hn::RebindMask(di, m2), hn::Add(at, hn::Set(di, static_cast<int32_t>(2 * N))), i2);
      i3 = hn::IfThenElse(hn::RebindMask(di, m3), hn::Add(at, hn::Set(di, static_cast<int32_t>(3 * N))), i3);
    }
    // The four candidates of each lane into one, then the lanes into the row's: vector ops (a
    // walk over the 4N candidates was most of a 128-float row's time).
    ArgMerge<IsMax>(d, di, b0, i0, b1, i1);
    ArgMerge<IsMax>(d, di, b2, i2, b3, i3);
    ArgMerge<IsMax>(d, di, b0, i0, b2, i2);
    const auto nan = hn::IsNaN(b0);
    const auto best = hn::AllFalse(d, nan) ? hn::Eq(b0, IsMax ? hn::MaxOfLanes(d, b0) : hn::MinOfLanes(d, b0)) : nan;
    const auto idx = hn::IfThenElse(hn::RebindMask(di, best), i0, hn::Set(di, std::numeric_limits<int32_t>::max()));
    bi = hn::GetLane(hn::MinOfLanes(di, idx));
    bv = x[bi];
  }
  for (; i < n; ++i)  // the tail (or a short row), each element its own candidate
    if (ArgWins<IsMax>(x[i], i, bv, bi)) bv = x[i], bi = i;
  return bi;
}

int64_t ArgF32RowImpl(const float* x, int64_t n, bool is_max) {
  return is_max ? ArgF32RowOf<true>(x, n) : ArgF32RowOf<false>(x, n);
}

// Columns: one row r of len adjacent columns at q into the running best values bv and their row
// indices bi (rows come in order, so a column's index is its first best).
template <bool IsMax>
HWY_INLINE void ArgF32ColsStepOf(const float* q, int64_t len, float* bv, int32_t* bi, int32_t r) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const auto at = hn::Set(di, r);
  int64_t j = 0;
  for (; j + N <= len; j += N) {
    const auto v = hn::LoadU(d, q + j), b = hn::LoadU(d, bv + j);
    const auto m = ArgBetter<IsMax>(d, v, b);
    hn::StoreU(hn::IfThenElse(m, v, b), d, bv + j);
    hn::StoreU(hn::IfThenElse(hn::RebindMask(di, m), at, hn::LoadU(di, bi + j)), di, bi + j);
  }
  for (; j < len; ++j)
    if (ArgWins<IsMax>(q[j], r, bv[j], bi[j])) bv[j] = q[j], bi[j] = r;
}

void ArgF32ColsStepImpl(const float* q, int64_t len, bool is_max, float* bv, int32_t* bi, int32_t r) {
  if (is_max) ArgF32ColsStepOf<true>(q, len, bv, bi, r);
  else ArgF32ColsStepOf<false>(q, len, bv, bi, r);
}

// Columns: out[j] = the Note's index over r < n of p[r * stride + j], j < len <= kArgCols, the
// running bests in L1 arrays updated a row at a time.
template <bool IsMax>
void ArgF32ColsOf(const float* p, int64_t n, int64_t stride, int64_t len, int64_t* out) {
  HWY_ALIGN float bv[kArgCols];
  HWY_ALIGN int32_t bi[kArgCols];
  for (int64_t j = 0; j < len; ++j) bv[j] = p[j], bi[j] = 0;
  for (int64_t r = 1; r < n; ++r) ArgF32ColsStepOf<IsMax>(p + r * stride, len, bv, bi, static_cast<int32_t>(r));
  for (int64_t j = 0; j < len; ++j) out[j] = bi[j];
}

void ArgF32ColsImpl(const float* p, int64_t n, int64_t stride, int64_t len, bool is_max, int64_t* out) {
  if (is_max) ArgF32ColsOf<true>(p, n, stride, len, out);
  else ArgF32ColsOf<false>(p, n, stride, len, out);
}

void Bf16ToF32Impl(const uint16_t* x, float* out, int64_t n) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(WidenBf16(df, x + i), df, out + i);
  for (; i < n; ++i) out[i] = ScalarFromBf16(x[i]);
}

void F32ToBf16Impl(const float* x, uint16_t* out, int64_t n) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + N <= n; i += N) StoreBf16(df, hn::LoadU(df, x + i), out + i);
  for (; i < n; ++i) out[i] = ScalarToBf16(x[i]);
}

// MaxF32ColsImpl over `rows` rows, `stride` floats apart, combined in row order (Note [Column sums
// by row groups]: the running max stays in registers across the rows; the same result).
void MaxF32ColsRowsImpl(const float* x, int64_t stride, int64_t rows, float* acc, int64_t n, bool is_max) {
  const hn::ScalableTag<float> d;
  const int64_t done = ColsRowsOf(
      d, acc, x, stride, rows, n, [&](const float* p) { return hn::LoadU(d, p); },
      [&](auto a, auto v) { return CombineMax(d, a, v, is_max); });
  for (int64_t r = 0; r < rows && done < n; ++r) MaxF32ColsImpl(x + r * stride + done, acc + done, n - done, is_max);
}

// Note [Softmax row groups] for contiguous bfloat16 rows: the float kernel's operations on the
// rows' values (a bfloat16 widens to float exactly), each result rounded once to bfloat16 as
// the float path's store rounds it (so the same bits as converting, computing in float and
// rounding), with the conversions in the passes that read and write: the float path spent a
// third of its time converting rows into float buffers and back. e[k] holds row k's
// exponentials (softmax only). y may be x.
void SoftmaxGroupBf16Impl(const uint16_t* const* x, uint16_t* const* y, float* const* e, int64_t cnt, int64_t n,
                          bool log) {
  const hn::CappedTag<float, 16> d;
  SoftmaxGroupOf(
      d, [&](int64_t k, int64_t i) TPU_LAMBDA_INLINE { return WidenBf16(d, x[k] + i); },
      [&](int64_t k, int64_t i) { return ScalarFromBf16(x[k][i]); }, e,
      [&](int64_t k, int64_t i, auto v) TPU_LAMBDA_INLINE { StoreBf16(d, v, y[k] + i); },
      [&](int64_t k, int64_t i, float v) { y[k][i] = ScalarToBf16(v); }, cnt, n, log);
}

void RoundF32ToBf16Impl(float* x, int64_t n) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    auto r = hn::And(RoundedBits(df, hn::LoadU(df, x + i)), hn::Set(du, 0xFFFF0000u));
    hn::StoreU(hn::BitCast(df, r), df, x + i);
  }
  for (; i < n; ++i) x[i] = ScalarFromBf16(ScalarToBf16(x[i]));
}

}  // namespace HWY_NAMESPACE
}  // namespace tpu::host
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tpu::host {
HWY_EXPORT(AddF32LanesImpl);
HWY_EXPORT(SumF32RowGroupImpl);
HWY_EXPORT(LayerNormGroupF32Impl);
HWY_EXPORT(RmsNormGroupF32Impl);
HWY_EXPORT(SquaredDeviationsGroupF32Impl);
HWY_EXPORT(SoftmaxGroupF32Impl);
HWY_EXPORT(SoftmaxGroupBf16Impl);
HWY_EXPORT(SoftmaxBackwardGroupF32Impl);
HWY_EXPORT(AddF32ColsFloatImpl);
HWY_EXPORT(AddF32ColsBlockImpl);
HWY_EXPORT(MaxF32RowImpl);
HWY_EXPORT(AddF32ColsImpl);
HWY_EXPORT(AddF32ColsRowsImpl);
HWY_EXPORT(MaxF32ColsImpl);
HWY_EXPORT(MaxF32ColsRowsImpl);
HWY_EXPORT(Bf16ToF32Impl);
HWY_EXPORT(F32ToBf16Impl);
HWY_EXPORT(RoundF32ToBf16Impl);
HWY_EXPORT(ArgF32RowImpl);
HWY_EXPORT(ArgF32ColsImpl);
HWY_EXPORT(ArgF32ColsStepImpl);

int64_t ArgF32Row(const float* x, int64_t n, bool is_max) { return HWY_DYNAMIC_DISPATCH(ArgF32RowImpl)(x, n, is_max); }
void ArgF32Cols(const float* p, int64_t n, int64_t stride, int64_t len, bool is_max, int64_t* out) {
  HWY_DYNAMIC_DISPATCH(ArgF32ColsImpl)(p, n, stride, len, is_max, out);
}
void ArgF32ColsStep(const float* q, int64_t len, bool is_max, float* bv, int32_t* bi, int32_t r) {
  HWY_DYNAMIC_DISPATCH(ArgF32ColsStepImpl)(q, len, is_max, bv, bi, r);
}

void AddF32Lanes(const float* x, int64_t groups, float* lanes) {
  HWY_DYNAMIC_DISPATCH(AddF32LanesImpl)(x, groups, lanes);
}
void AddF32ColsFloat(const float* x, float* acc, int64_t n) { HWY_DYNAMIC_DISPATCH(AddF32ColsFloatImpl)(x, acc, n); }
void AddF32ColsBlock(const float* p, int64_t stride, int64_t blen, float* lanes, int64_t lane_stride, int64_t len,
                     double* tot) {
  HWY_DYNAMIC_DISPATCH(AddF32ColsBlockImpl)(p, stride, blen, lanes, lane_stride, len, tot);
}

void LaneSum::Feed(const float* x, int64_t n) {
  while (n > 0) {
    int64_t b0 = pos / kBlock * kBlock, p = pos - b0;
    int64_t len = total_len - b0 < kBlock ? total_len - b0 : kBlock, full = len & ~int64_t{15};
    int64_t m;
    if (p < full) {
      m = n < full - p ? n : full - p;
      int64_t j = 0;
      if ((p & 15) == 0 && m >= 16) {  // aligned groups: vector adds
        AddF32Lanes(x, m / 16, lanes);
        j = m / 16 * 16;
      }
      for (; j < m; ++j) lanes[(p + j) & 15] += x[j];
    } else {
      m = n < len - p ? n : len - p;
      for (int64_t j = 0; j < m; ++j) lanes[0] += x[j];
    }
    pos += m, x += m, n -= m;
    if (pos - b0 == len) {  // block done: its lanes into the double total
      double block = 0;
      for (float& l : lanes) block += l, l = 0;
      total += block;
    }
  }
}

double SumF32Lanes(const float* x, int64_t n) {
  if (n <= LaneSum::kBlock) {
    double total;
    HWY_DYNAMIC_DISPATCH(SumF32RowGroupImpl)(&x, 1, n, &total);
    return total;
  }
  LaneSum s(n);
  s.Feed(x, n);
  return s.total;
}
void LayerNormGroupF32(const float* const* x, float* const* y, int64_t cnt, int64_t n, const float* w,
                       const float* b, float eps, float* mu, float* rs) {
  HWY_DYNAMIC_DISPATCH(LayerNormGroupF32Impl)(x, y, cnt, n, w, b, eps, mu, rs);
}
void SquaredDeviationsGroupF32(const float* const* x, int64_t cnt, int64_t n, float* mu, float* ss) {
  HWY_DYNAMIC_DISPATCH(SquaredDeviationsGroupF32Impl)(x, cnt, n, mu, ss);
}
void RmsNormGroupF32(const float* const* x, float* const* y, int64_t cnt, int64_t n, const float* w, float eps,
                     float* rs) {
  HWY_DYNAMIC_DISPATCH(RmsNormGroupF32Impl)(x, y, cnt, n, w, eps, rs);
}
void SoftmaxGroupBf16(const uint16_t* const* x, uint16_t* const* y, float* const* e, int64_t cnt, int64_t n,
                      bool log) {
  HWY_DYNAMIC_DISPATCH(SoftmaxGroupBf16Impl)(x, y, e, cnt, n, log);
}
void SoftmaxGroupF32(const float* const* x, float* const* y, int64_t cnt, int64_t n, bool log) {
  HWY_DYNAMIC_DISPATCH(SoftmaxGroupF32Impl)(x, y, cnt, n, log);
}
void SoftmaxBackwardGroupF32(const float* const* g, const float* const* y, float* const* dx, int64_t cnt, int64_t n,
                             bool log) {
  HWY_DYNAMIC_DISPATCH(SoftmaxBackwardGroupF32Impl)(g, y, dx, cnt, n, log);
}
void SumF32RowGroup(const float* const* rows, int64_t cnt, int64_t n, double* out) {
  HWY_DYNAMIC_DISPATCH(SumF32RowGroupImpl)(rows, cnt, n, out);
}
void SumF32Rows(const float* x, int64_t rows, int64_t n, int64_t stride, double* out) {
  const float* group[kSumRowGroup];
  for (int64_t r0 = 0; r0 < rows; r0 += kSumRowGroup) {
    const int64_t cnt = rows - r0 < kSumRowGroup ? rows - r0 : kSumRowGroup;
    for (int64_t k = 0; k < cnt; ++k) group[k] = x + (r0 + k) * stride;
    SumF32RowGroup(group, cnt, n, out + r0);
  }
}
float MaxF32Row(const float* x, int64_t n, float acc, bool is_max) {
  return HWY_DYNAMIC_DISPATCH(MaxF32RowImpl)(x, n, acc, is_max);
}
void AddF32Cols(const float* x, double* acc, int64_t n) { HWY_DYNAMIC_DISPATCH(AddF32ColsImpl)(x, acc, n); }
void AddF32ColsRows(const float* x, int64_t stride, int64_t rows, double* acc, int64_t n) {
  HWY_DYNAMIC_DISPATCH(AddF32ColsRowsImpl)(x, stride, rows, acc, n);
}
void MaxF32Cols(const float* x, float* acc, int64_t n, bool is_max) {
  HWY_DYNAMIC_DISPATCH(MaxF32ColsImpl)(x, acc, n, is_max);
}
void MaxF32ColsRows(const float* x, int64_t stride, int64_t rows, float* acc, int64_t n, bool is_max) {
  HWY_DYNAMIC_DISPATCH(MaxF32ColsRowsImpl)(x, stride, rows, acc, n, is_max);
}
void Bf16ToF32(const uint16_t* x, float* out, int64_t n) { HWY_DYNAMIC_DISPATCH(Bf16ToF32Impl)(x, out, n); }
void F32ToBf16(const float* x, uint16_t* out, int64_t n) { HWY_DYNAMIC_DISPATCH(F32ToBf16Impl)(x, out, n); }
void RoundF32ToBf16(float* x, int64_t n) { HWY_DYNAMIC_DISPATCH(RoundF32ToBf16Impl)(x, n); }
}  // namespace tpu::host
#endif
