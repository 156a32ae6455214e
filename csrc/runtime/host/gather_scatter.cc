// gather / scatter with StableHLO dimension numbers (index_vector_dim is the last index dim).
// Ops built with bounds checking (gather: attrs.kind = 1; scatter: bit 8 of attrs.kind) report an
// out-of-range index as an error instead of StableHLO's clamping, matching PyTorch. Large gathers
// and scatters are threaded: gathers over output rows, scatters over disjoint destination columns
// (so updates that hit the same row never race and sums keep their order).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "base/thread_pool.h"
#include "runtime/host/elementwise_simd.h"
#include "runtime/host/kernels.h"
#include "runtime/host/wrapping.h"

namespace tpu::host {
namespace {

// The indices as contiguous i64, read in place when they already are (else converted into
// `storage`): index tensors are as large as the result, so a copy costs as much as the gather.
const int64_t* IndicesAsI64(const View& idx, std::vector<char>& storage) {
  if (idx.dtype == DType::kI64 && idx.IsContiguous()) return static_cast<const int64_t*>(idx.data);
  View dst{nullptr, DType::kI64, idx.dims, ContiguousStrides(idx.dims)};
  storage.resize(std::max<int64_t>(1, dst.NumElements()) * 8);
  dst.data = storage.data();
  (void)CopyView(idx, dst);
  return reinterpret_cast<const int64_t*>(storage.data());
}

View Contiguous(const View& v, std::vector<char>& storage) {
  if (v.IsContiguous()) return v;
  View dst{nullptr, v.dtype, v.dims, ContiguousStrides(v.dims)};
  storage.resize(std::max<int64_t>(1, dst.NumElements()) * DTypeSize(v.dtype));
  dst.data = storage.data();
  (void)CopyView(v, dst);
  return dst;
}

bool Contains(const Dims& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// fn(begin, end) over [0, n) items of `per_item` bytes moved each: threaded when large.
template <typename F>
void ParallelItems(int64_t n, int64_t per_item, F&& fn) {
  if (ThreadPool::Worth(n * std::max<int64_t>(1, per_item) / 4))  // bytes moved, as float32 elements
    ThreadPool::Get().ParallelFor(n, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, per_item)), fn);
  else
    fn(0, n);
}

// One element of `elem` bytes (a typed move for the common sizes: a memcpy call per element is
// a library call).
inline void CopyElem(char* dst, const char* src, int elem) {
  switch (elem) {
    case 8: *reinterpret_cast<uint64_t*>(dst) = *reinterpret_cast<const uint64_t*>(src); break;
    case 4: *reinterpret_cast<uint32_t*>(dst) = *reinterpret_cast<const uint32_t*>(src); break;
    case 2: *reinterpret_cast<uint16_t*>(dst) = *reinterpret_cast<const uint16_t*>(src); break;
    default: std::memcpy(dst, src, elem); break;
  }
}

// The index_select pattern along one dim d: one collapsed/indexed dim d, the batch (indices
// [n, 1]) in place of d in the result or updates, every other dim whole. Returns d, or -1.
int64_t AlongOneDim(const Attrs& a, const Dims& operand, const Dims& result, const View& indices,
                    bool whole_slices) {
  if (a.b.size() != 1 || a.c.size() != 1 || a.b[0] != a.c[0] || indices.dims.size() != 2 ||
      indices.dims[1] != 1 || result.size() != operand.size())
    return -1;
  int64_t d = a.b[0];
  Dims rest;
  for (int64_t i = 0; i < static_cast<int64_t>(operand.size()); ++i) {
    if (i == d) continue;
    rest.push_back(i);
    if (result[i] != operand[i] || (whole_slices && a.d[i] != operand[i])) return -1;
  }
  return a.a == rest && result[d] == indices.dims[0] ? d : -1;
}

// Lowers `first` to b when b is earlier (the first bad position, in order, is the one reported).
void NoteFirstBad(std::atomic<int64_t>& first, int64_t b) {
  int64_t cur = first.load();
  while (b < cur && !first.compare_exchange_weak(cur, b)) {
  }
}

Status IndexError(int64_t index, int64_t dim, int64_t size) {
  return OutOfRange("index " + std::to_string(index) + " is out of bounds for dimension " +
                    std::to_string(dim) + " with size " + std::to_string(size));
}

// torch.gather's / torch.scatter's form with batching dims: every operand dim but d a batching
// dim paired with the same index dim, d indexed by a one-element index vector, nothing else.
// Returns d, or -1.
int64_t BatchedAlongDim(const Attrs& a, int64_t orank, const View& indices) {
  const size_t half = a.e.size() / 2;
  if (half == 0 || static_cast<int64_t>(half) + 1 != orank || a.c.size() != 1 || a.b.size() != 1 ||
      a.b[0] != a.c[0] || !a.a.empty() || static_cast<int64_t>(indices.dims.size()) != orank + 1 ||
      indices.dims.back() != 1)
    return -1;
  const int64_t d = a.c[0];
  size_t j = 0;
  for (int64_t k = 0; k < orank; ++k) {
    if (k == d) continue;
    if (a.e[j] != k || a.e[half + j] != k) return -1;
    ++j;
  }
  return d;
}

// One result row of the batched gather along d: dst[j] = base[j * step + idx[j] * sd], an
// out-of-range index clamped. Returns the first bad j, or -1.
template <typename T>
int64_t GatherRow(T* dst, const T* base, const int64_t* ix, int64_t len, int64_t step, int64_t n,
                  int64_t sd) {
  if constexpr (sizeof(T) == 4) {
    if (step == 0 && sd == 1 && n <= INT32_MAX && len >= 16)  // Note [Vector gathers]
      return GatherRowU32Simd(reinterpret_cast<const uint32_t*>(base), ix, len, n, reinterpret_cast<uint32_t*>(dst));
  }
  int64_t bad = -1;
  for (int64_t j = 0; j < len; ++j) {
    int64_t s = ix[j];
    if (static_cast<uint64_t>(s) >= static_cast<uint64_t>(n)) {
      if (bad < 0) bad = j;
      s = s < 0 ? 0 : n - 1;
    }
    dst[j] = base[j * step + s * sd];
  }
  return bad;
}

// Result rows [r0, r1) of the batched gather along d: dst[j] = base[j * step + idx[j] * sd] along
// each row, an out-of-range index clamped. Typed once per chunk: a gather along the last dim with
// one index per row (nll_loss's pick of each row's target) has rows of one element, so per-row work
// is the whole cost. Returns the first bad position, or -1.
template <typename T>
int64_t GatherRows(const View& operand, const View& out, const int64_t* idx, int64_t d, int64_t r0,
                   int64_t r1) {
  const int rank = static_cast<int>(out.dims.size());
  const int64_t last = out.dims[rank - 1], n = operand.dims[d];
  const int64_t sd = operand.strides[d], step = d == rank - 1 ? 0 : operand.strides[rank - 1];
  const T* src = static_cast<const T*>(operand.data);
  T* dst = static_cast<T*>(out.data);
  int64_t bad = -1;
  if (rank == 2 && last == 1 && d == 1) {  // one index per row: no row walk
    const int64_t rs = operand.strides[0];
    for (int64_t r = r0; r < r1; ++r)
      if (GatherRow(dst + r, src + r * rs, idx + r, 1, 0, n, sd) >= 0 && bad < 0) bad = r;
    return bad;
  }
  // The row's coordinates (dims 0..rank-2) and operand offset, stepped row by row.
  Dims coord(rank, 0);
  int64_t base = 0;
  for (int64_t k = rank - 2, rem = r0; k >= 0; --k) {
    coord[k] = rem % out.dims[k];
    rem /= out.dims[k];
    if (k != d) base += coord[k] * operand.strides[k];
  }
  // Note [Prefetching gathered rows]: a gather along a contiguous last dim picks at random from
  // each operand row, so the hardware prefetcher fetches nothing ahead and every line the picks
  // touch is a miss waited on. When the picks are dense enough to touch most of the row's lines,
  // the next row's lines are requested while this row is gathered (one operand row stride on: at
  // the end of an outer position that is another position's row or none -- a prefetch is a hint,
  // never a fault).
  const int64_t row_bytes = n * static_cast<int64_t>(sizeof(T));
  const bool prefetch = step == 0 && sd == 1 && rank >= 2 && row_bytes <= 64 * 1024 && last * 64 >= row_bytes &&
                        r1 - r0 > 1;
  for (int64_t r = r0; r < r1; ++r) {
    if (prefetch && r + 1 < r1) {
      const char* next = reinterpret_cast<const char*>(src + base + operand.strides[rank - 2]);
      for (int64_t off = 0; off < row_bytes; off += 64) __builtin_prefetch(next + off);
    }
    if (int64_t j = GatherRow(dst + r * last, src + base, idx + r * last, last, step, n, sd); j >= 0 && bad < 0)
      bad = r * last + j;
    for (int64_t k = rank - 2; k >= 0; --k) {  // next row
      if (k != d) base += operand.strides[k];
      if (++coord[k] < out.dims[k]) break;
      if (k != d) base -= coord[k] * operand.strides[k];
      coord[k] = 0;
    }
  }
  return bad;
}

// The batched gather along d (torch.gather): out[p] = operand[p with p_d = idx[p]]. The operand
// is read through its strides (no contiguous copy); out is contiguous.
Status GatherAlong(const View& operand, const int64_t* idx, int64_t d, const View& out, bool checked) {
  const int rank = static_cast<int>(out.dims.size());
  const int64_t total = out.NumElements();
  if (total == 0) return Status::Ok();
  const int64_t last = out.dims[rank - 1], rows = total / last, n = operand.dims[d];
  const int elem = DTypeSize(out.dtype);
  std::atomic<int64_t> first_bad{total};
  ParallelItems(rows, last * (elem + 8), [&](int64_t r0, int64_t r1) {
    int64_t bad;
    switch (elem) {
      case 8: bad = GatherRows<uint64_t>(operand, out, idx, d, r0, r1); break;
      case 4: bad = GatherRows<uint32_t>(operand, out, idx, d, r0, r1); break;
      case 2: bad = GatherRows<uint16_t>(operand, out, idx, d, r0, r1); break;
      default: bad = GatherRows<uint8_t>(operand, out, idx, d, r0, r1); break;
    }
    if (bad >= 0 && checked) NoteFirstBad(first_bad, bad);
  });
  if (int64_t b = first_bad.load(); b < total) return IndexError(idx[b], d, n);
  return Status::Ok();
}

}  // namespace

Status RunGather(const Op& op, const View& operand_in, const View& indices, const View& out) {
  const Attrs& a = op.attrs;
  bool checked = op.attrs.kind != 0;
  std::vector<char> s1, s2;
  if (int64_t d = BatchedAlongDim(a, static_cast<int64_t>(operand_in.dims.size()), indices);
      d >= 0 && out.IsContiguous() && DTypeSize(out.dtype) <= 8 &&
      std::all_of(a.d.begin(), a.d.end(), [](int64_t s) { return s == 1; }))
    return GatherAlong(operand_in, IndicesAsI64(indices, s2), d, out, checked);
  if (!a.e.empty())
    return Unimplemented("gather with batching dims other than torch.gather's (every dim but one)");
  View operand = Contiguous(operand_in, s1);
  const int64_t* idx = IndicesAsI64(indices, s2);
  int64_t nvec = static_cast<int64_t>(a.c.size());
  int64_t nbatch = nvec ? indices.NumElements() / nvec : 0;
  int orank = static_cast<int>(operand.dims.size());
  int elem = DTypeSize(operand.dtype);
  Dims ostr = ContiguousStrides(operand.dims);
  // Point gather (torch.gather's coordinates: every operand dim indexed, one element each, the
  // batch in result order): each element's offset and copy in one pass, no offset table.
  bool point = a.a.empty() && out.IsContiguous() && out.NumElements() == nbatch && orank <= 8 &&
               static_cast<int>(nvec) == orank && a.b.size() == static_cast<size_t>(orank);
  for (int d = 0; point && d < orank; ++d) point = a.d[d] == 1 && a.c[d] == d && a.b[d] == d;
  if (point) {
    std::atomic<int64_t> first_bad{nbatch};
    char* dst = static_cast<char*>(out.data);
    const char* src = static_cast<const char*>(operand.data);
    ParallelItems(nbatch, elem + 8 * nvec, [&, nvec, elem, dst, src, idx](int64_t b0, int64_t b1) {
      // Sizes and strides (and, by the captures, the pointers) in locals: the element stores may
      // alias anything the loop reads through a reference, which would reload it every element.
      int64_t sz[8], st[8];  // (a rank above 8 takes the general path below)
      for (int64_t d = 0; d < nvec; ++d) sz[d] = operand.dims[d], st[d] = ostr[d];
      int64_t bad_at = -1;
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t* c = idx + b * nvec;
        int64_t off = 0;
        bool bad = false;
        for (int64_t d = 0; d < nvec; ++d) {
          int64_t s = c[d];
          if (static_cast<uint64_t>(s) >= static_cast<uint64_t>(sz[d])) {
            bad = true;
            s = std::clamp<int64_t>(s, 0, sz[d] - 1);
          }
          off += s * st[d];
        }
        if (bad && bad_at < 0) bad_at = b;
        CopyElem(dst + b * elem, src + off * elem, elem);
      }
      if (bad_at >= 0 && checked) NoteFirstBad(first_bad, bad_at);
    });
    if (int64_t b = first_bad.load(); b < nbatch)
      for (int64_t d = 0; d < nvec; ++d)
        if (int64_t s = idx[b * nvec + d]; s < 0 || s >= operand.dims[d]) return IndexError(s, d, operand.dims[d]);
    return Status::Ok();
  }
  // Per batch position: the clamped (or checked) start offset in elements; the first bad
  // position (in order) is the one reported.
  Dims start_off(nbatch);
  std::atomic<int64_t> first_bad{nbatch};
  ParallelItems(nbatch, 8 * nvec, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      int64_t off = 0;
      for (int64_t k = 0; k < nvec; ++k) {
        int64_t d = a.c[k];
        int64_t s = idx[b * nvec + k];
        int64_t hi = operand.dims[d] - a.d[d];
        if (s < 0 || s > hi) {
          if (checked) NoteFirstBad(first_bad, b);
          s = std::clamp<int64_t>(s, 0, hi);
        }
        off += s * ostr[d];
      }
      start_off[b] = off;
    }
  });
  if (int64_t b = first_bad.load(); b < nbatch) {
    for (int64_t k = 0; k < nvec; ++k) {
      int64_t d = a.c[k], s = idx[b * nvec + k];
      if (s < 0 || s > operand.dims[d] - a.d[d]) return IndexError(s, d, operand.dims[d]);
    }
  }
  // The slice (window) as a set of element offsets, in result order of offset dims.
  Dims wdims, wstrides;
  for (int d = 0; d < orank; ++d)
    if (!Contains(a.b, d)) {
      wdims.push_back(a.d[d]);
      wstrides.push_back(ostr[d]);
    }
  int64_t wsize = 1;
  for (int64_t w : wdims) wsize *= w;
  // Fast path: offset dims are the trailing result dims and the window is contiguous rows.
  int out_rank = static_cast<int>(out.dims.size());
  bool trailing = true;
  for (size_t j = 0; j < a.a.size(); ++j) trailing &= a.a[j] == out_rank - static_cast<int64_t>(a.a.size()) + static_cast<int64_t>(j);
  bool window_contig = true;
  {
    int64_t expect = 1;
    for (int i = static_cast<int>(wdims.size()) - 1; i >= 0; --i) {
      if (wdims[i] != 1 && wstrides[i] != expect) window_contig = false;
      expect *= wdims[i];
      if (wdims[i] != operand.dims[orank - static_cast<int>(wdims.size()) + i] && i > 0) {
        // a partial inner window row is fine only for the outermost window dim
      }
    }
  }
  char* dst = static_cast<char*>(out.data);
  const char* src = static_cast<const char*>(operand.data);
  if (int64_t d = AlongOneDim(a, operand.dims, out.dims, indices, true);
      d >= 0 && out.IsContiguous()) {
    // index_select along d: rows of the dims after d, copied per (outer position, index).
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < d; ++i) outer *= operand.dims[i];
    for (int64_t i = d + 1; i < orank; ++i) inner *= operand.dims[i];
    int64_t n = operand.dims[d];
    // Rows picked at random from a large table (an embedding) are misses the prefetcher cannot
    // foresee; rows of a few lines are requested kAhead rows early (Note [Prefetching gathered
    // rows]), so several rows' misses overlap.
    constexpr int64_t kAhead = 4;
    const int64_t row_bytes = inner * elem;
    const bool prefetch = row_bytes >= 256 && row_bytes <= 4096;
    ParallelItems(outer * nbatch, inner * elem, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        if (prefetch && t + kAhead < t1) {
          const int64_t u = t + kAhead;
          const char* q = src + ((u / nbatch) * n * inner + start_off[u % nbatch]) * elem;
          for (int64_t off = 0; off < row_bytes; off += 64) __builtin_prefetch(q + off);
        }
        int64_t o = t / nbatch, b = t % nbatch;
        std::memcpy(dst + t * inner * elem, src + (o * n * inner + start_off[b]) * elem, inner * elem);
      }
    });
    return Status::Ok();
  }
  if (trailing && window_contig) {
    ParallelItems(nbatch, wsize * elem, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b)
        std::memcpy(dst + b * wsize * elem, src + start_off[b] * elem, wsize * elem);
    });
    return Status::Ok();
  }
  // General path: rows of the result (all dims but the last), each walked along its last dim.
  // Per result dim: whether it is a window (offset) dim and its stride in the operand.
  Dims wstride_of(out_rank, 0);
  std::vector<bool> is_window(out_rank, false);
  {
    size_t wi = 0;
    for (int d = 0; d < out_rank; ++d)
      if (Contains(a.a, d)) is_window[d] = true, wstride_of[d] = wstrides[wi++];
  }
  int64_t total = out.NumElements();
  int64_t last = out_rank ? out.dims[out_rank - 1] : 1;
  int64_t rows = last ? total / last : 0;
  ParallelItems(rows, last * elem, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      // batch index and window offset of the row's first element
      int64_t b = 0, woff = 0, rem = r;
      Dims idx_of(out_rank, 0);
      for (int d = out_rank - 2; d >= 0; --d) {
        idx_of[d] = rem % out.dims[d];
        rem /= out.dims[d];
      }
      for (int d = 0; d + 1 < out_rank; ++d) {
        if (is_window[d]) woff += idx_of[d] * wstride_of[d];
        else b = b * out.dims[d];
        if (!is_window[d]) b += idx_of[d];
      }
      char* q = dst + r * last * elem;
      if (out_rank == 0) {
        CopyElem(q, src + (start_off[0] + woff) * elem, elem);
      } else if (is_window[out_rank - 1]) {
        const int64_t ws = wstride_of[out_rank - 1];
        const char* p = src + (start_off[b] + woff) * elem;
        for (int64_t i = 0; i < last; ++i) CopyElem(q + i * elem, p + i * ws * elem, elem);
      } else {
        const int64_t* so = start_off.data() + b * last;
        for (int64_t i = 0; i < last; ++i) CopyElem(q + i * elem, src + (so[i] + woff) * elem, elem);
      }
    }
  });
  return Status::Ok();
}

namespace {
template <typename T>
inline void Apply(ReduceKind k, T* dst, const T* src) {
  switch (k) {
    case ReduceKind::kAdd: *dst = WrapAdd(*dst, *src); break;
    case ReduceKind::kMul: *dst = WrapMul(*dst, *src); break;
    case ReduceKind::kMax: *dst = (*src > *dst || *src != *src) ? *src : *dst; break;
    case ReduceKind::kMin: *dst = (*src < *dst || *src != *src) ? *src : *dst; break;
    case ReduceKind::kAnd: *dst = *dst && *src; break;
    case ReduceKind::kOr: *dst = *dst || *src; break;
    case ReduceKind::kReplace: *dst = *src; break;
  }
}
// Combines updates [t0, t1) of the batched scatter along d into dst: t counts (outer position o,
// column block) pairs, each a block of up to cb columns of the dims after d, walked along the
// updates' d in index order. Typed once per chunk and stepped without a division per pair: a
// scatter along the last dim (nll_loss's backward, a one-hot) has one column per pair, so the
// per-pair work is the whole cost (a division and a dtype switch per element took ~14 ns of its
// ~15).
template <typename T>
void ScatterColumns(ReduceKind kind, T* dst, const T* src, const int64_t* idx, int64_t n, int64_t m,
                    int64_t inner, int64_t cb, int64_t blocks, int64_t t0, int64_t t1) {
  int64_t o = t0 / blocks, i0 = (t0 % blocks) * cb;
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t i1 = std::min(inner, i0 + cb);
    T* out = dst + o * n * inner;
    for (int64_t j = 0; j < m; ++j) {
      const int64_t at = (o * m + j) * inner;
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t p = idx[at + i];
        if (static_cast<uint64_t>(p) >= static_cast<uint64_t>(n)) continue;  // skipped (StableHLO)
        T* q = out + p * inner + i;
        if (kind == ReduceKind::kReplace) *q = src[at + i];
        else if (kind == ReduceKind::kAdd) *q = WrapAdd(*q, src[at + i]);
        else Apply(kind, q, src + at + i);
      }
    }
    if (i1 == inner) ++o, i0 = 0;
    else i0 = i1;
  }
}

// The batched scatter along d (torch.scatter / scatter_add / scatter_reduce): out[p with p_d =
// idx[p]] combined with updates[p]. Threads own disjoint (outer position, column block) pairs and
// walk d in order, so updates of one destination element are applied by one thread in index order.
Status ScatterAlong(ReduceKind kind, bool checked, const View& indices, const View& updates_in,
                    int64_t d, const View& out) {
  // The updates have the index's shape (less its vector dim), which is the operand's but at d.
  Dims want(indices.dims.begin(), indices.dims.end() - 1);
  if (updates_in.dims != want) return Internal("scatter along a dim: the updates' shape is not the index's");
  std::vector<char> s1, s2;
  View updates = Contiguous(updates_in, s1);
  const int64_t* idx = IndicesAsI64(indices, s2);
  const int64_t total = updates.NumElements(), n = out.dims[d], m = updates.dims[d];
  if (checked)  // refused before any update is applied
    for (int64_t e = 0; e < total; ++e)
      if (static_cast<uint64_t>(idx[e]) >= static_cast<uint64_t>(n)) return IndexError(idx[e], d, n);
  if (total == 0) return Status::Ok();
  int64_t outer = 1, inner = 1, rank = static_cast<int64_t>(out.dims.size());
  for (int64_t i = 0; i < d; ++i) outer *= out.dims[i];
  for (int64_t i = d + 1; i < rank; ++i) inner *= out.dims[i];
  const int64_t cb = std::min<int64_t>(inner, 64), blocks = (inner + cb - 1) / cb;
  const int elem = DTypeSize(out.dtype);
  ParallelItems(outer * blocks, m * cb * elem, [&](int64_t t0, int64_t t1) {
    auto run = [&](auto* d, ReduceKind k) {
      using T = std::remove_pointer_t<decltype(d)>;
      ScatterColumns(k, d, static_cast<const T*>(updates.data), idx, n, m, inner, cb, blocks, t0, t1);
    };
    switch (out.dtype) {
      case DType::kF32: run(static_cast<float*>(out.data), kind); break;
      case DType::kF64: run(static_cast<double*>(out.data), kind); break;
      case DType::kI64: run(static_cast<int64_t*>(out.data), kind); break;
      case DType::kI32: run(static_cast<int32_t*>(out.data), kind); break;
      default:  // a replacement (combiners on other types were refused by the caller)
        switch (elem) {
          case 8: run(static_cast<uint64_t*>(out.data), ReduceKind::kReplace); break;
          case 4: run(static_cast<uint32_t*>(out.data), ReduceKind::kReplace); break;
          case 2: run(static_cast<uint16_t*>(out.data), ReduceKind::kReplace); break;
          default: run(static_cast<uint8_t*>(out.data), ReduceKind::kReplace); break;
        }
    }
  });
  return Status::Ok();
}
}  // namespace

Status RunScatter(const Op& op, const View& operand, const View& indices, const View& updates_in,
                  const View& out) {
  const Attrs& a = op.attrs;
  ReduceKind kind = static_cast<ReduceKind>(a.kind & 0xff);
  bool checked = (a.kind >> 8) != 0;
  bool typed = out.dtype == DType::kF32 || out.dtype == DType::kF64 || out.dtype == DType::kI64 ||
               out.dtype == DType::kI32;
  if (!typed && kind != ReduceKind::kReplace)  // refused before anything is written
    return Unimplemented(std::string("scatter with a combiner on ") + DTypeName(out.dtype) +
                         " (compute it in float32)");
  TPU_RETURN_IF_ERROR(CopyView(operand, out));
  if (int64_t d = BatchedAlongDim(a, static_cast<int64_t>(out.dims.size()), indices);
      d >= 0 && out.IsContiguous() && DTypeSize(out.dtype) <= 8)
    return ScatterAlong(kind, checked, indices, updates_in, d, out);
  if (!a.e.empty())
    return Unimplemented("scatter with batching dims other than torch.scatter's (every dim but one)");
  if (int64_t d = AlongOneDim(a, out.dims, updates_in.dims, indices, false);
      d >= 0 && out.dtype == DType::kF32 && out.IsContiguous()) {
    // index_add along d on float32 (max-pool and upsampling backward): rows of the dims after d
    // combined per (outer position, index), without per-element index arithmetic.
    std::vector<char> s1, s2;
    View updates = Contiguous(updates_in, s1);
    const int64_t* idx = IndicesAsI64(indices, s2);
    int64_t outer = 1, inner = 1, rank = static_cast<int64_t>(out.dims.size());
    for (int64_t i = 0; i < d; ++i) outer *= out.dims[i];
    for (int64_t i = d + 1; i < rank; ++i) inner *= out.dims[i];
    int64_t n = out.dims[d], nb = updates.dims[d];
    float* dst = static_cast<float*>(out.data);
    const float* src = static_cast<const float*>(updates.data);
    for (int64_t b = 0; b < nb; ++b)
      if (checked && (idx[b] < 0 || idx[b] >= n)) return IndexError(idx[b], d, n);
    // Threads own disjoint (outer position, column block, destination row range) triples: updates
    // of one destination row are applied by one thread, in index order. Row ranges split the work
    // when there are few column blocks (embedding backward: one block of D <= 64 columns); each
    // range's owner walks every index and applies those that land in it.
    const int64_t cb = std::min<int64_t>(inner, 64), blocks = (inner + cb - 1) / cb;
    const int64_t threads = ThreadPool::Get().num_threads();
    const int64_t parts = outer * blocks >= 2 * threads || n < 64 || !ThreadPool::Worth(outer * nb * inner)
                              ? 1
                              : std::min<int64_t>(4 * threads, n / 16);
    ParallelItems(outer * blocks * parts, nb * cb * 8 / parts, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t part = t % parts, ob = t / parts;
        const int64_t lo = n * part / parts, hi = n * (part + 1) / parts;
        int64_t o = ob / blocks, j0 = (ob % blocks) * cb, j1 = std::min(inner, j0 + cb);
        for (int64_t b = 0; b < nb; ++b) {
          int64_t i = idx[b];
          if (i < lo || i >= hi) continue;  // another range's (or out of bounds: StableHLO skips it)
          float* row = dst + (o * n + i) * inner;
          const float* from = src + (o * nb + b) * inner;
          if (kind == ReduceKind::kAdd) {
            for (int64_t j = j0; j < j1; ++j) row[j] += from[j];
          } else {
            for (int64_t j = j0; j < j1; ++j) Apply(kind, row + j, from + j);
          }
        }
      }
    });
    return Status::Ok();
  }
  // The general form: the updates' elements in row-major order (the order combiners apply in), each
  // batch position's start offset found once and the window's offsets kept by a counter, instead of
  // every element's coordinates divided out of its index (~20 ns an element: a DLRM interaction's
  // backward, [128, 36] updates into [128, 9, 9], took 90 us).
  std::vector<char> s1, s2;
  View updates = Contiguous(updates_in, s1);
  const int64_t* idx = IndicesAsI64(indices, s2);
  const int64_t nvec = static_cast<int64_t>(a.c.size());
  const int orank = static_cast<int>(out.dims.size()), urank = static_cast<int>(updates.dims.size());
  const int64_t total = updates.NumElements();
  if (total == 0) return Status::Ok();
  const Dims ostr = ContiguousStrides(out.dims);
  // Per update dim: the operand dim a window dim maps to (-1 for a scatter dim), and a scatter dim's
  // stride in the batch position (row-major over the scatter dims).
  std::vector<int> wdim(urank, -1);
  {
    Dims window_operand_dims;  // operand dims that window dims map to
    for (int d = 0; d < orank; ++d)
      if (!Contains(a.b, d)) window_operand_dims.push_back(d);
    size_t wi = 0;
    for (int d = 0; d < urank; ++d)
      if (Contains(a.a, d)) wdim[d] = static_cast<int>(window_operand_dims[wi++]);
  }
  Dims bstride(urank, 0);
  int64_t batches = 1;
  for (int d = urank - 1; d >= 0; --d)
    if (wdim[d] < 0) bstride[d] = batches, batches *= updates.dims[d];
  std::vector<int> index_pos(orank, -1);  // the index vector's component for an operand dim
  for (int64_t k = 0; k < nvec; ++k) index_pos[a.c[k]] = static_cast<int>(k);
  auto start = [&](int64_t b, int d) { return index_pos[d] < 0 ? 0 : idx[b * nvec + index_pos[d]]; };
  // Per batch position: its start's offset, -1 when an index is out of bounds (StableHLO skips the
  // whole update; checked, the first one in order is the error, before anything is written), and
  // whether its whole window lies inside the operand (else each element is checked).
  std::vector<int64_t> base(batches);
  std::vector<uint8_t> fits(batches);
  for (int64_t b = 0; b < batches; ++b) {
    int64_t off = 0;
    bool ok = true;
    for (int64_t k = 0; k < nvec && ok; ++k) {
      const int64_t d = a.c[k], s = idx[b * nvec + k];
      if (s < 0 || s >= out.dims[d]) {
        if (checked) return IndexError(s, d, out.dims[d]);
        ok = false;
      }
      off += s * ostr[d];
    }
    base[b] = ok ? off : -1;
    bool fit = true;
    for (int d = 0; d < urank && ok; ++d)
      if (wdim[d] >= 0) fit &= start(b, wdim[d]) + updates.dims[d] <= out.dims[wdim[d]];
    fits[b] = fit;
  }
  const int elem = DTypeSize(out.dtype);
  char* dst = static_cast<char*>(out.data);
  const char* src = static_cast<const char*>(updates.data);
  auto apply = [&](int64_t off, int64_t e) {
    char* p = dst + off * elem;
    const char* q = src + e * elem;
    switch (out.dtype) {
      case DType::kF32: Apply(kind, reinterpret_cast<float*>(p), reinterpret_cast<const float*>(q)); break;
      case DType::kF64: Apply(kind, reinterpret_cast<double*>(p), reinterpret_cast<const double*>(q)); break;
      case DType::kI64: Apply(kind, reinterpret_cast<int64_t*>(p), reinterpret_cast<const int64_t*>(q)); break;
      case DType::kI32: Apply(kind, reinterpret_cast<int32_t*>(p), reinterpret_cast<const int32_t*>(q)); break;
      default:  // a replacement (combiners on other types were refused above)
        std::memcpy(p, q, elem);
    }
  };
  // Rows of the innermost update dim; c counts the outer dims.
  const int last = urank - 1;
  const int64_t row = urank ? updates.dims[last] : 1;
  const int64_t row_b = urank ? bstride[last] : 0;                                   // batch step along a row
  const int64_t row_o = urank && wdim[last] >= 0 ? ostr[wdim[last]] : 0;             // operand step along a row
  Dims c(std::max(urank - 1, 0), 0);
  for (int64_t e0 = 0; e0 < total; e0 += row) {
    int64_t b0 = 0, w0 = 0;
    for (int d = 0; d < last; ++d) {
      if (wdim[d] < 0) b0 += c[d] * bstride[d];
      else w0 += c[d] * ostr[wdim[d]];
    }
    for (int64_t j = 0; j < row; ++j) {
      const int64_t b = b0 + j * row_b;
      if (base[b] < 0) continue;
      if (!fits[b]) {  // the element's own coordinates, each inside the operand
        bool in = true;
        for (int d = 0; d <= last && in; ++d) {
          if (wdim[d] < 0) continue;
          const int64_t w = d == last ? j : c[d];
          in = start(b, wdim[d]) + w < out.dims[wdim[d]];
        }
        if (!in) continue;
      }
      apply(base[b] + w0 + j * row_o, e0 + j);
    }
    for (int d = last - 1; d >= 0; --d) {  // next row
      if (++c[d] < updates.dims[d]) break;
      c[d] = 0;
    }
  }
  return Status::Ok();
}

}  // namespace tpu::host
