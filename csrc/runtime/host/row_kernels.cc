// Fused row kernels (row_kernels.h). Each row is converted to float32 once (or used in place when
// it already is contiguous float32), combined with the same vector pieces as the IR chain uses
// (Highway max, the reduce kernel's float sums, the fused tiles' exp and log), and stored once, so for float32 rows the results equal the chain's. Threaded over
// rows.
#include "runtime/host/row_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/thread_pool.h"
#include "runtime/host/axes.h"
#include "runtime/host/conv_util.h"
#include "runtime/host/half.h"
#include "runtime/host/elementwise_simd.h"
#include "runtime/host/reduce_simd.h"

namespace tpu::host {
namespace {

// The rows of a view: dims [first, last) as one strided run of n elements, the others as `outer`.
// `outer` is coalesced (SetOuter): rows evenly spaced in memory (any contiguous tensor's) are one
// axis, whose row address is a multiply; OffsetOf's divisions per axis, per row, cost a softmax's
// short rows more than their arithmetic.
struct RowSet {
  char* base = nullptr;
  DType dtype = DType::kF32;
  int64_t n = 1, stride = 1, rows = 1, esize = 4;
  Axes outer;
  char* Row(int64_t r) const {
    if (outer.size() == 1) return base + r * outer[0].stride * esize;
    return base + OffsetOf(outer, outer.size(), r) * esize;
  }
  // Sets the outer dims (size > 1, in order), merging neighbours that are one evenly strided run.
  void SetOuter(const Axes& dims) {
    outer.clear();
    for (const Axis& a : dims) {
      if (!outer.empty() && outer.back().stride == a.stride * a.size) {
        outer.back() = {outer.back().size * a.size, a.stride};
      } else {
        outer.push_back(a);
      }
    }
    rows = Count(outer, outer.size());
    esize = DTypeSize(dtype);
  }
};

bool Supported(DType t) { return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16; }

// Whether dims [first, last) of v are one strided run (size-1 dims aside; Note [Unmerged rows]).
bool RowDimsMerge(const View& v, int first, int last) {
  bool have = false;
  int64_t expect = 0;
  for (int d = last - 1; d >= first; --d) {
    if (v.dims[d] == 1) continue;
    if (have && v.strides[d] != expect) return false;
    have = true;
    expect = v.strides[d] * v.dims[d];
  }
  return true;
}

Status Rows(const View& v, int first, int last, RowSet* out, const char* what) {
  if (!Supported(v.dtype))
    return Unimplemented(std::string("row kernel on ") + DTypeName(v.dtype) + " " + what);
  int rank = static_cast<int>(v.dims.size());
  if (first < 0 || last > rank || first > last) return Internal(std::string("row dims out of range for ") + what);
  if (!RowDimsMerge(v, first, last))
    return Unimplemented(std::string("row kernel: the row dims of ") + what + " do not merge into one run");
  RowSet s;
  s.base = static_cast<char*>(v.data);
  s.dtype = v.dtype;
  bool have = false;
  for (int d = last - 1; d >= first; --d) {
    if (v.dims[d] == 1) continue;
    if (!have) s.stride = v.strides[d];
    have = true;
    s.n *= v.dims[d];
  }
  Axes outer;
  for (int d = 0; d < rank; ++d)
    if ((d < first || d >= last) && v.dims[d] != 1) outer.push_back({v.dims[d], v.strides[d]});
  s.SetOuter(outer);
  *out = std::move(s);
  return Status::Ok();
}

// Note [Unmerged rows]: a norm over several trailing dims reads each row as one strided run. A
// view whose row dims do not merge into one (a permuted tensor normalized over two dims, group
// norm's (C/G, HxW) of a channels_last tensor) is copied contiguous first, and an output written
// through a contiguous buffer: PyTorch accepts such tensors, so the row steps must too.

// Whether a norm of x into y over [axis, rank) needs WithMergedRows (the shapes checked first:
// a mismatch is the row kernel's own error).
bool RowsUnmerged(const View& x, const View& y, int axis) {
  const int rank = static_cast<int>(x.dims.size());
  return axis >= 0 && axis <= rank && x.dims == y.dims && (!RowDimsMerge(x, axis, rank) || !RowDimsMerge(y, axis, rank));
}

// Runs norm(x, y) with x and y as views whose rows [axis, rank) merge (Note [Unmerged rows]).
template <typename Norm>
Status WithMergedRows(const View& x, const View& y, int axis, Norm&& norm) {
  const int rank = static_cast<int>(x.dims.size());
  std::vector<char> xb, yb;
  const View xm = RowDimsMerge(x, axis, rank) ? x : Contiguous(x, x.dtype, xb);
  View ym = y;
  const bool y_through = !RowDimsMerge(y, axis, rank);
  if (y_through) {
    ym = View{nullptr, y.dtype, y.dims, ContiguousStrides(y.dims)};
    yb.resize(std::max<int64_t>(1, y.NumElements()) * DTypeSize(y.dtype));
    ym.data = yb.data();
  }
  TPU_RETURN_IF_ERROR(norm(xm, ym));
  return y_through ? CopyView(ym, y) : Status::Ok();
}

// The dims of x outside [first, last).
Dims OuterDims(const View& x, int first, int last) {
  Dims d;
  for (int i = 0; i < static_cast<int>(x.dims.size()); ++i)
    if (i < first || i >= last) d.push_back(x.dims[i]);
  return d;
}

// A per-row operand: x's outer dims, then any number of size-1 dims.
Status PerRow(const View& v, const View& x, int first, int last, RowSet* out, const char* what, bool index = false) {
  Dims want = OuterDims(x, first, last);
  bool ok = v.dims.size() >= want.size() && std::equal(want.begin(), want.end(), v.dims.begin());
  for (size_t d = want.size(); ok && d < v.dims.size(); ++d) ok = v.dims[d] == 1;
  if (!ok) return Internal(std::string("row kernel: ") + what + " does not have one element per row");
  if (index ? v.dtype != DType::kI64 : !Supported(v.dtype))
    return Unimplemented(std::string("row kernel on ") + DTypeName(v.dtype) + " " + what);
  RowSet s;
  s.base = static_cast<char*>(v.data);
  s.dtype = v.dtype;
  Axes outer;
  for (size_t d = 0; d < v.dims.size(); ++d)
    if (v.dims[d] != 1) outer.push_back({v.dims[d], v.strides[d]});
  s.SetOuter(outer);
  *out = std::move(s);
  return Status::Ok();
}

// A row-shaped operand (weight, bias): the dims of x's row.
Status RowShaped(const View& v, const View& x, int first, int last, RowSet* out, const char* what) {
  Dims want(x.dims.begin() + first, x.dims.begin() + last);
  if (v.dims != want) return Internal(std::string("row kernel: ") + what + " does not have the row's shape");
  return Rows(v, 0, static_cast<int>(v.dims.size()), out, what);
}

Status SameShape(const View& a, const View& b, const char* what) {
  return a.dims == b.dims ? Status::Ok() : Internal(std::string("row kernel: ") + what + " has another shape");
}

float LoadOne(DType t, const char* p) {
  switch (t) {
    case DType::kF32: { float f; std::memcpy(&f, p, 4); return f; }
    case DType::kBF16: { float f; Bf16ToF32(reinterpret_cast<const uint16_t*>(p), &f, 1); return f; }
    default: return static_cast<float>(*reinterpret_cast<const Half*>(p));
  }
}

void StoreOne(DType t, float f, char* p) {
  switch (t) {
    case DType::kF32: std::memcpy(p, &f, 4); break;
    case DType::kBF16: F32ToBf16(&f, reinterpret_cast<uint16_t*>(p), 1); break;
    default: *reinterpret_cast<Half*>(p) = static_cast<Half>(f); break;
  }
}

// Whether v's rows are float32 runs that kernels read and write where they are.
bool InPlace(const RowSet& v) { return v.dtype == DType::kF32 && (v.stride == 1 || v.n == 1); }

// Read, Target and Flush run once per row, and rows are often short (attention's 64): the common
// case -- a contiguous float32 row, used where it is -- is inline; conversions are out of line.
const float* ReadConverted(const RowSet& v, const char* p, float* buf) {
  if (v.dtype == DType::kBF16 && v.stride == 1) {
    Bf16ToF32(reinterpret_cast<const uint16_t*>(p), buf, v.n);
  } else {
    int64_t es = v.stride * DTypeSize(v.dtype);
    for (int64_t j = 0; j < v.n; ++j) buf[j] = LoadOne(v.dtype, p + j * es);
  }
  return buf;
}
void FlushConverted(const RowSet& v, char* p, const float* vals) {
  if (v.dtype == DType::kBF16 && v.stride == 1) return F32ToBf16(vals, reinterpret_cast<uint16_t*>(p), v.n);
  int64_t es = v.stride * DTypeSize(v.dtype);
  for (int64_t j = 0; j < v.n; ++j) StoreOne(v.dtype, vals[j], p + j * es);
}

// Row r of v as floats: v's own memory when it is contiguous float32, else converted into buf.
inline const float* Read(const RowSet& v, int64_t r, float* buf) {
  const char* p = v.Row(r);
  if (InPlace(v)) return reinterpret_cast<const float*>(p);
  return ReadConverted(v, p, buf);
}

// Where row r of v is computed: in place when contiguous float32, else in buf (then Flush).
inline float* Target(const RowSet& v, int64_t r, float* buf) {
  if (InPlace(v)) return reinterpret_cast<float*>(v.Row(r));
  return buf;
}
inline void Flush(const RowSet& v, int64_t r, const float* vals) {
  char* p = v.Row(r);
  if (reinterpret_cast<const char*>(vals) == p) return;
  FlushConverted(v, p, vals);
}

// A group's rows [g0, g0 + cnt) at once (Read, Target and Flush for each): rows in place in a
// single run of outer dims are a base and a step, with no per-row offset arithmetic; others go
// row by row, row k through buf + k * n.
// Rows [g0, g0 + cnt) of v as pointers when they are in place in one run of outer dims (a base
// and a step); false otherwise.
template <typename P>
bool LinearRows(const RowSet& v, int64_t g0, int64_t cnt, P** out) {
  if (!InPlace(v) || v.outer.size() > 1) return false;
  const int64_t step = v.outer.empty() ? 0 : v.outer[0].stride * v.esize;
  char* p = v.base + g0 * step;
  for (int64_t k = 0; k < cnt; ++k, p += step) out[k] = reinterpret_cast<P*>(p);
  return true;
}
void ReadRows(const RowSet& v, int64_t g0, int64_t cnt, float* buf, const float** out) {
  if (LinearRows(v, g0, cnt, out)) return;
  for (int64_t k = 0; k < cnt; ++k) out[k] = Read(v, g0 + k, buf + k * v.n);
}
void TargetRows(const RowSet& v, int64_t g0, int64_t cnt, float* buf, float** out) {
  if (LinearRows(v, g0, cnt, out)) return;
  for (int64_t k = 0; k < cnt; ++k) out[k] = Target(v, g0 + k, buf + k * v.n);
}
void FlushRows(const RowSet& v, int64_t g0, int64_t cnt, float* const* vals) {
  if (InPlace(v)) return;  // Target gave v's own rows
  for (int64_t k = 0; k < cnt; ++k) Flush(v, g0 + k, vals[k]);
}

float Scalar(const RowSet& v, int64_t r) { return LoadOne(v.dtype, v.Row(r)); }
void SetScalar(const RowSet& v, int64_t r, float f) { StoreOne(v.dtype, f, v.Row(r)); }

// A Note [Float sums] total as the reduce kernel returns it: from init 0, rounded to float.
float Rounded(double total) { return static_cast<float>(0.0 + total); }
// The reduce kernel's float sum of n contiguous floats.
float Sum(const float* x, int64_t n) { return Rounded(SumF32Lanes(x, n)); }

float Log(float z) {
  float r;
  UnaryF32Simd(OpCode::kLog, &z, &r, 1);  // the tiles' log, edge cases included
  return r;
}

// Note [Row groups]: a row's float sums end in a 16-add chain in double (Note [Float sums]),
// which cost a short row (softmax over 64, layer norm over 128) as much as its arithmetic. The
// row kernels therefore take short rows kSumRowGroup at a time, a group per kernel call (Note
// [Norm row groups], Note [Softmax row groups]) whose rows' lanes are combined together (the same
// additions per row, so the same bits).
//
// Rows of n <= 256 go in groups (a group's float buffers stay within 16 KiB each); longer rows one
// at a time (their sums' last additions are a small part of their work, and a group's buffers
// would leave L1).
int64_t GroupRows(int64_t n) { return n <= 256 ? kSumRowGroup : 1; }

// Note [Norm row groups] (reduce_simd.cc): rows take the norms' group kernels, kSumRowGroup at a
// time up to 256 and 4096 / n (at least 4) at a time above: a row's lane sums are one dependent
// chain of adds, and RowLanes walks up to four rows' chains together, so fewer than four rows
// leave the adder waiting (a group of 4 rows of 1024 is 16 KiB, in L1; layer norm over
// (4096, 1024) on one thread 1469-1651 -> 1417-1519 us in three alternating pairs, with groups
// of 2); rows longer than a lane block two at a time up to 4096, then one (their sums' four
// chains then run over two rows' blocks, or one).
int64_t NormGroupRows(int64_t n) {
  if (n > LaneSum::kBlock) return n <= 2 * LaneSum::kBlock ? 2 : 1;
  return n <= 256 ? GroupRows(n) : std::max<int64_t>(4, std::min<int64_t>(kSumRowGroup, 4096 / n));
}

// Runs fn(r0, r1, scratch) over row ranges; scratch holds `bufs` float rows of n per call.
template <typename F>
void ForRows(int64_t rows, int64_t n, int bufs, F&& fn) {
  auto body = [&](int64_t r0, int64_t r1) {
    std::vector<float> scratch(std::max<int64_t>(1, n) * bufs);
    fn(r0, r1, scratch.data());
  };
  if (ThreadPool::Worth(rows * n))
    ThreadPool::Get().ParallelFor(rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(1, n)), body);
  else
    body(0, rows);
}

// Max and shifted exponentials of a row: s[j] = x[j] - m into s, e = exp(s) into e (may be s).
float ShiftExp(const float* x, int64_t n, float* s, float* e) {
  float m = MaxF32Row(x, n, -std::numeric_limits<float>::infinity(), true);
  ShiftExpF32Simd(x, m, s == e ? nullptr : s, e, n);
  return m;
}

}  // namespace

Status SoftmaxRows(const View& x, int dim, bool log, const View& y, const View* fill) {
  RowSet X, Y;
  TPU_RETURN_IF_ERROR(SameShape(x, y, "the output"));
  TPU_RETURN_IF_ERROR(Rows(x, dim, dim + 1, &X, "input"));
  TPU_RETURN_IF_ERROR(Rows(y, dim, dim + 1, &Y, "output"));
  const int64_t n = X.n;
  float fill_value = 0.0f;
  if (fill) {
    if (log || fill->dtype != DType::kF32 || fill->NumElements() != 1)
      return Unimplemented("softmax rows: the all -inf rows' value is not one float32 (or log_softmax)");
    std::memcpy(&fill_value, fill->data, sizeof(float));
  }
  // Note [Safe softmax rows]: with a fill, rows whose every element is -inf are found before the
  // row is computed (y may be x's buffer) and overwritten after: fill where the chain's select
  // picks it, the softmax's own NaN nowhere. A row is checked from its first element and the
  // check stops at the first one that is not -inf, so a causal mask's rows (position 0 always
  // visible) cost one compare each. NaN == -inf is false: a row holding a NaN keeps its NaN.
  auto all_masked = [&](int64_t r) {
    const char* p = X.Row(r);
    const int64_t step = X.stride * X.esize;
    for (int64_t j = 0; j < n; ++j, p += step)
      if (LoadOne(X.dtype, p) != -std::numeric_limits<float>::infinity()) return false;
    return n > 0;
  };
  auto refill = [&](int64_t r) {
    char* p = Y.Row(r);
    const int64_t step = Y.stride * Y.esize;
    for (int64_t j = 0; j < n; ++j, p += step) StoreOne(Y.dtype, fill_value, p);
  };
  // Rows go in groups (Note [Row groups]), a group in one call (Note [Softmax row groups]): rows
  // read and written where they are when contiguous float32 or bfloat16 (converted as they are
  // read and written), else through float buffers.
  const int64_t G = GroupRows(n);
  const bool bf16 = X.dtype == DType::kBF16 && Y.dtype == DType::kBF16 && X.stride == 1 && Y.stride == 1;
  ForRows(X.rows, n, 2 * G, [&](int64_t r0, int64_t r1, float* buf) {
    const float* xr[kSumRowGroup];
    float* yr[kSumRowGroup];
    for (int64_t g0 = r0; g0 < r1; g0 += G) {
      const int64_t cnt = std::min(G, r1 - g0);
      bool masked[kSumRowGroup] = {};
      bool any_masked = false;
      if (fill)
        for (int64_t k = 0; k < cnt; ++k) any_masked |= masked[k] = all_masked(g0 + k);
      auto refill_masked = [&] {
        if (any_masked)
          for (int64_t k = 0; k < cnt; ++k)
            if (masked[k]) refill(g0 + k);
      };
      if (bf16) {  // converted as they are read and written
        const uint16_t* xb[kSumRowGroup];
        uint16_t* yb[kSumRowGroup];
        float* eb[kSumRowGroup];
        for (int64_t k = 0; k < cnt; ++k) {
          xb[k] = reinterpret_cast<const uint16_t*>(X.Row(g0 + k));
          yb[k] = reinterpret_cast<uint16_t*>(Y.Row(g0 + k));
          eb[k] = buf + k * n;
        }
        SoftmaxGroupBf16(xb, yb, eb, cnt, n, log);
        refill_masked();
        continue;
      }
      ReadRows(X, g0, cnt, buf, xr);
      TargetRows(Y, g0, cnt, buf + G * n, yr);
      SoftmaxGroupF32(xr, yr, cnt, n, log);
      FlushRows(Y, g0, cnt, yr);
      refill_masked();
    }
  });
  return Status::Ok();
}

Status SoftmaxBackwardRows(const View& g, const View& y, int dim, bool log, const View& dx) {
  RowSet G, Y, D;
  TPU_RETURN_IF_ERROR(SameShape(g, y, "the output"));
  TPU_RETURN_IF_ERROR(SameShape(g, dx, "the input gradient"));
  TPU_RETURN_IF_ERROR(Rows(g, dim, dim + 1, &G, "gradient"));
  TPU_RETURN_IF_ERROR(Rows(y, dim, dim + 1, &Y, "output"));
  TPU_RETURN_IF_ERROR(Rows(dx, dim, dim + 1, &D, "input gradient"));
  const int64_t n = G.n;
  // Rows in groups (Note [Row groups]), a group in one call (Note [Softmax row groups]): rows
  // read and written where they are when contiguous float32, else through float buffers.
  const int64_t R = GroupRows(n);
  ForRows(G.rows, n, 3 * R, [&](int64_t r0, int64_t r1, float* buf) {
    const float* gr[kSumRowGroup];
    const float* yr[kSumRowGroup];
    float* dr[kSumRowGroup];
    for (int64_t g0 = r0; g0 < r1; g0 += R) {
      const int64_t cnt = std::min(R, r1 - g0);
      ReadRows(G, g0, cnt, buf, gr);
      ReadRows(Y, g0, cnt, buf + R * n, yr);
      TargetRows(D, g0, cnt, buf + 2 * R * n, dr);
      SoftmaxBackwardGroupF32(gr, yr, dr, cnt, n, log);
      FlushRows(D, g0, cnt, dr);
    }
  });
  return Status::Ok();
}

namespace {

// Per-row-range partial sums of row-shaped gradients (dw, db), added in row order at the end.
struct Partials {
  std::mutex mu;
  std::vector<std::pair<int64_t, std::vector<double>>> parts;
  void Add(int64_t r0, std::vector<double> v) {
    std::lock_guard<std::mutex> lock(mu);
    parts.emplace_back(r0, std::move(v));
  }
  Status StoreInto(const View& out, int64_t n, int slot) {
    std::sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<float> total(std::max<int64_t>(1, n));
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (const auto& p : parts) s += p.second[slot * n + j];
      total[j] = static_cast<float>(s);
    }
    RowSet O;
    TPU_RETURN_IF_ERROR(Rows(out, 0, static_cast<int>(out.dims.size()), &O, "parameter gradient"));
    if (O.n != n) return Internal("row kernel: parameter gradient of the wrong size");
    Flush(O, 0, total.data());
    return Status::Ok();
  }
};

// The operands the two norms' backward kernels share: gradient, input, weight (as floats) and the
// input gradient's rows.
struct NormGrad {
  RowSet G, X, W, D;
  std::vector<float> wbuf;
  const float* w = nullptr;
  Status Init(const View& g, const View& x, int axis, const View* weight, const View* dx) {
    int rank = static_cast<int>(x.dims.size());
    TPU_RETURN_IF_ERROR(SameShape(g, x, "the gradient"));
    TPU_RETURN_IF_ERROR(Rows(g, axis, rank, &G, "gradient"));
    TPU_RETURN_IF_ERROR(Rows(x, axis, rank, &X, "input"));
    if (weight) {
      TPU_RETURN_IF_ERROR(RowShaped(*weight, x, axis, rank, &W, "weight"));
      wbuf.resize(std::max<int64_t>(1, X.n));
      w = Read(W, 0, wbuf.data());
    }
    if (dx) {
      TPU_RETURN_IF_ERROR(SameShape(x, *dx, "the input gradient"));
      TPU_RETURN_IF_ERROR(Rows(*dx, axis, rank, &D, "input gradient"));
    }
    return Status::Ok();
  }
};

}  // namespace

Status LayerNormRows(const View& x, int axis, const View* weight, const View* bias, double eps,
                     const View& y, const View* mean, const View* rstd) {
  int rank = static_cast<int>(x.dims.size());
  if (RowsUnmerged(x, y, axis))
    return WithMergedRows(x, y, axis, [&](const View& xm, const View& ym) {
      return LayerNormRows(xm, axis, weight, bias, eps, ym, mean, rstd);
    });
  RowSet X, Y, W, B, M, R;
  TPU_RETURN_IF_ERROR(SameShape(x, y, "the output"));
  TPU_RETURN_IF_ERROR(Rows(x, axis, rank, &X, "input"));
  TPU_RETURN_IF_ERROR(Rows(y, axis, rank, &Y, "output"));
  if (weight) TPU_RETURN_IF_ERROR(RowShaped(*weight, x, axis, rank, &W, "weight"));
  if (bias) TPU_RETURN_IF_ERROR(RowShaped(*bias, x, axis, rank, &B, "bias"));
  if (mean) TPU_RETURN_IF_ERROR(PerRow(*mean, x, axis, rank, &M, "mean"));
  if (rstd) TPU_RETURN_IF_ERROR(PerRow(*rstd, x, axis, rank, &R, "rstd"));
  const int64_t n = X.n;
  const float feps = static_cast<float>(eps);
  std::vector<float> wb(2 * std::max<int64_t>(1, n));
  const float* w = weight ? Read(W, 0, wb.data()) : nullptr;
  const float* b = bias ? Read(B, 0, wb.data() + n) : nullptr;
  const int64_t G = NormGroupRows(n);  // Note [Norm row groups]
  ForRows(X.rows, n, 2 * G, [&](int64_t r0, int64_t r1, float* buf) {
    float* xbuf = buf;           // input rows converted to float, row k at xbuf + k * n
    float* ybuf = buf + G * n;   // output rows not computed in place
    const float* rows[kSumRowGroup];
    float* yrows[kSumRowGroup];
    float mus[kSumRowGroup], rss[kSumRowGroup];
    for (int64_t g0 = r0; g0 < r1; g0 += G) {
      const int64_t cnt = std::min(G, r1 - g0);
      ReadRows(X, g0, cnt, xbuf, rows);
      TargetRows(Y, g0, cnt, ybuf, yrows);
      LayerNormGroupF32(rows, yrows, cnt, n, w, b, feps, mus, rss);
      FlushRows(Y, g0, cnt, yrows);
      for (int64_t k = 0; k < cnt; ++k) {
        if (mean) SetScalar(M, g0 + k, mus[k]);
        if (rstd) SetScalar(R, g0 + k, rss[k]);
      }
    }
  });
  return Status::Ok();
}

Status VarianceRows(const View& x, int axis, const View& ss, const View* mean) {
  const int rank = static_cast<int>(x.dims.size());
  std::vector<char> xb;
  const View xm = axis >= 0 && axis <= rank && !RowDimsMerge(x, axis, rank) ? Contiguous(x, x.dtype, xb) : x;
  RowSet X, S, M;
  TPU_RETURN_IF_ERROR(Rows(xm, axis, rank, &X, "input"));
  TPU_RETURN_IF_ERROR(PerRow(ss, xm, axis, rank, &S, "sum of squares"));
  if (mean) TPU_RETURN_IF_ERROR(PerRow(*mean, xm, axis, rank, &M, "mean"));
  const int64_t n = X.n;
  const int64_t G = NormGroupRows(n);  // Note [Norm row groups]
  ForRows(X.rows, n, G, [&](int64_t r0, int64_t r1, float* xbuf) {
    const float* rows[kSumRowGroup];
    float mus[kSumRowGroup], sss[kSumRowGroup];
    for (int64_t g0 = r0; g0 < r1; g0 += G) {
      const int64_t cnt = std::min(G, r1 - g0);
      ReadRows(X, g0, cnt, xbuf, rows);
      SquaredDeviationsGroupF32(rows, cnt, n, mus, sss);
      for (int64_t k = 0; k < cnt; ++k) {
        SetScalar(S, g0 + k, sss[k]);
        if (mean) SetScalar(M, g0 + k, mus[k]);
      }
    }
  });
  return Status::Ok();
}

Status LayerNormBackwardRows(const View& g, const View& x, int axis, const View& mean,
                             const View& rstd, const View* weight, const View* dx, const View* dw,
                             const View* db) {
  int rank = static_cast<int>(x.dims.size());
  NormGrad ng;
  RowSet M, R;
  TPU_RETURN_IF_ERROR(ng.Init(g, x, axis, weight, dx));
  TPU_RETURN_IF_ERROR(PerRow(mean, x, axis, rank, &M, "mean"));
  TPU_RETURN_IF_ERROR(PerRow(rstd, x, axis, rank, &R, "rstd"));
  const RowSet &G = ng.G, &X = ng.X, &D = ng.D;
  const int64_t n = X.n;
  const float fn = static_cast<float>(n);
  const float* w = ng.w;
  Partials partials;
  ForRows(X.rows, n, 5, [&](int64_t r0, int64_t r1, float* buf) {
    float *xhat = buf + 2 * n, *gw = buf + 3 * n, *t = buf + 4 * n;
    std::vector<double> acc((dw || db) ? 2 * n : 0, 0.0);
    for (int64_t r = r0; r < r1; ++r) {
      const float* gr = Read(G, r, buf);
      const float* xr = Read(X, r, buf + n);
      float mu = Scalar(M, r), rs = Scalar(R, r);
      for (int64_t j = 0; j < n; ++j) xhat[j] = (xr[j] - mu) * rs;
      if (dw || db)
        for (int64_t j = 0; j < n; ++j) {
          acc[j] += gr[j] * xhat[j];
          acc[n + j] += gr[j];
        }
      if (!dx) continue;
      for (int64_t j = 0; j < n; ++j) gw[j] = w ? gr[j] * w[j] : gr[j];
      float m1 = Sum(gw, n) / fn;
      for (int64_t j = 0; j < n; ++j) t[j] = gw[j] * xhat[j];
      float m2 = Sum(t, n) / fn;
      float* dr = Target(D, r, t);
      for (int64_t j = 0; j < n; ++j) dr[j] = rs * ((gw[j] - m1) - xhat[j] * m2);
      Flush(D, r, dr);
    }
    if (dw || db) partials.Add(r0, std::move(acc));
  });
  if (dw) TPU_RETURN_IF_ERROR(partials.StoreInto(*dw, n, 0));
  if (db) TPU_RETURN_IF_ERROR(partials.StoreInto(*db, n, 1));
  return Status::Ok();
}

Status RmsNormRows(const View& x, int axis, const View* weight, double eps, const View& y,
                   const View* rrms) {
  int rank = static_cast<int>(x.dims.size());
  if (RowsUnmerged(x, y, axis))
    return WithMergedRows(x, y, axis, [&](const View& xm, const View& ym) {
      return RmsNormRows(xm, axis, weight, eps, ym, rrms);
    });
  RowSet X, Y, W, R;
  TPU_RETURN_IF_ERROR(SameShape(x, y, "the output"));
  TPU_RETURN_IF_ERROR(Rows(x, axis, rank, &X, "input"));
  TPU_RETURN_IF_ERROR(Rows(y, axis, rank, &Y, "output"));
  if (weight) TPU_RETURN_IF_ERROR(RowShaped(*weight, x, axis, rank, &W, "weight"));
  if (rrms) TPU_RETURN_IF_ERROR(PerRow(*rrms, x, axis, rank, &R, "rrms"));
  const int64_t n = X.n;
  const float feps = static_cast<float>(eps);
  std::vector<float> wbuf(std::max<int64_t>(1, n));
  const float* w = weight ? Read(W, 0, wbuf.data()) : nullptr;
  const int64_t G = NormGroupRows(n);  // Note [Norm row groups]
  ForRows(X.rows, n, 2 * G, [&](int64_t r0, int64_t r1, float* buf) {
    const float* rows[kSumRowGroup];
    float* yrows[kSumRowGroup];
    float rss[kSumRowGroup];
    for (int64_t g0 = r0; g0 < r1; g0 += G) {
      const int64_t cnt = std::min(G, r1 - g0);
      ReadRows(X, g0, cnt, buf, rows);
      TargetRows(Y, g0, cnt, buf + G * n, yrows);
      RmsNormGroupF32(rows, yrows, cnt, n, w, feps, rss);
      FlushRows(Y, g0, cnt, yrows);
      if (rrms)
        for (int64_t k = 0; k < cnt; ++k) SetScalar(R, g0 + k, rss[k]);
    }
  });
  return Status::Ok();
}

Status RmsNormBackwardRows(const View& g, const View& x, int axis, const View& rrms,
                           const View* weight, const View* dx, const View* dw) {
  int rank = static_cast<int>(x.dims.size());
  NormGrad ng;
  RowSet R;
  TPU_RETURN_IF_ERROR(ng.Init(g, x, axis, weight, dx));
  TPU_RETURN_IF_ERROR(PerRow(rrms, x, axis, rank, &R, "rrms"));
  const RowSet &G = ng.G, &X = ng.X, &D = ng.D;
  const int64_t n = X.n;
  const float fn = static_cast<float>(n);
  const float* w = ng.w;
  Partials partials;
  ForRows(X.rows, n, 5, [&](int64_t r0, int64_t r1, float* buf) {
    float *xhat = buf + 2 * n, *gw = buf + 3 * n, *t = buf + 4 * n;
    std::vector<double> acc(dw ? n : 0, 0.0);
    for (int64_t r = r0; r < r1; ++r) {
      const float* gr = Read(G, r, buf);
      const float* xr = Read(X, r, buf + n);
      float rs = Scalar(R, r);
      for (int64_t j = 0; j < n; ++j) xhat[j] = xr[j] * rs;
      if (dw) for (int64_t j = 0; j < n; ++j) acc[j] += gr[j] * xhat[j];
      if (!dx) continue;
      for (int64_t j = 0; j < n; ++j) gw[j] = w ? gr[j] * w[j] : gr[j];
      for (int64_t j = 0; j < n; ++j) t[j] = gw[j] * xhat[j];
      float m2 = Sum(t, n) / fn;
      float* dr = Target(D, r, t);
      for (int64_t j = 0; j < n; ++j) dr[j] = rs * (gw[j] - xhat[j] * m2);
      Flush(D, r, dr);
    }
    if (dw) partials.Add(r0, std::move(acc));
  });
  if (dw) TPU_RETURN_IF_ERROR(partials.StoreInto(*dw, n, 0));
  return Status::Ok();
}

namespace {

// Targets checked before any row runs: an out-of-range class is an error, as in PyTorch.
Status CheckTargets(const RowSet& T, int64_t classes, int64_t ignore_index) {
  for (int64_t r = 0; r < T.rows; ++r) {
    int64_t t;
    std::memcpy(&t, T.Row(r), 8);
    if (t != ignore_index && (t < 0 || t >= classes))
      return OutOfRange("Target " + std::to_string(t) + " is out of bounds.");
  }
  return Status::Ok();
}

int64_t TargetOf(const RowSet& T, int64_t r) {
  int64_t t;
  std::memcpy(&t, T.Row(r), 8);
  return t;
}

}  // namespace

Status CrossEntropyRows(const View& x, int dim, const View& targets, int64_t ignore_index,
                        const View& loss, const View* lse) {
  RowSet X, T, L, S;
  TPU_RETURN_IF_ERROR(Rows(x, dim, dim + 1, &X, "logits"));
  TPU_RETURN_IF_ERROR(PerRow(targets, x, dim, dim + 1, &T, "targets", true));
  TPU_RETURN_IF_ERROR(PerRow(loss, x, dim, dim + 1, &L, "loss"));
  if (lse) TPU_RETURN_IF_ERROR(PerRow(*lse, x, dim, dim + 1, &S, "logsumexp"));
  const int64_t n = X.n;
  TPU_RETURN_IF_ERROR(CheckTargets(T, n, ignore_index));
  ForRows(X.rows, n, 3, [&](int64_t r0, int64_t r1, float* buf) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = Read(X, r, buf);
      float* s = buf + n;
      float m = ShiftExp(xr, n, s, buf + 2 * n);
      float lz = Log(Sum(buf + 2 * n, n));
      int64_t t = TargetOf(T, r);
      SetScalar(L, r, t == ignore_index ? 0.0f : -(s[t] - lz));
      if (lse) SetScalar(S, r, m + lz);
    }
  });
  return Status::Ok();
}

Status CrossEntropyBackwardRows(const View& x, int dim, const View& targets, int64_t ignore_index,
                                const View& gl, const View& dx) {
  RowSet X, T, GL, D;
  TPU_RETURN_IF_ERROR(SameShape(x, dx, "the input gradient"));
  TPU_RETURN_IF_ERROR(Rows(x, dim, dim + 1, &X, "logits"));
  TPU_RETURN_IF_ERROR(PerRow(targets, x, dim, dim + 1, &T, "targets", true));
  TPU_RETURN_IF_ERROR(PerRow(gl, x, dim, dim + 1, &GL, "loss gradient"));
  TPU_RETURN_IF_ERROR(Rows(dx, dim, dim + 1, &D, "input gradient"));
  const int64_t n = X.n;
  TPU_RETURN_IF_ERROR(CheckTargets(T, n, ignore_index));
  ForRows(X.rows, n, 3, [&](int64_t r0, int64_t r1, float* buf) {
    for (int64_t r = r0; r < r1; ++r) {
      float* dr = Target(D, r, buf + 2 * n);
      int64_t t = TargetOf(T, r);
      if (t == ignore_index) {
        std::fill(dr, dr + n, 0.0f);
      } else {
        // log-probabilities y = s - log(sum(exp(s))); dx = onehot * (-g) - exp(y) * (-g)
        const float* xr = Read(X, r, buf);
        float* s = buf + n;
        ShiftExp(xr, n, s, dr);
        float lz = Log(Sum(dr, n));
        for (int64_t j = 0; j < n; ++j) s[j] = s[j] - lz;
        UnaryF32Simd(OpCode::kExp, s, dr, n);
        float ng = -Scalar(GL, r);
        for (int64_t j = 0; j < n; ++j) dr[j] = (j == t ? ng : 0.0f) - dr[j] * ng;
      }
      Flush(D, r, dr);
    }
  });
  return Status::Ok();
}

}  // namespace tpu::host
