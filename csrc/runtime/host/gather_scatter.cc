// gather / scatter with StableHLO dimension numbers (index_vector_dim is the last index dim).
// Ops built with bounds checking (gather: attrs.kind = 1; scatter: bit 8 of attrs.kind) report an
// out-of-range index as an error instead of StableHLO's clamping, matching PyTorch.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/host/kernels.h"
#include "runtime/host/wrapping.h"

namespace tpu::host {
namespace {

Dims IndicesAsI64(const View& idx, std::vector<char>& storage) {
  View dst{nullptr, DType::kI64, idx.dims, ContiguousStrides(idx.dims)};
  storage.resize(std::max<int64_t>(1, dst.NumElements()) * 8);
  dst.data = storage.data();
  (void)CopyView(idx, dst);
  const int64_t* p = reinterpret_cast<const int64_t*>(storage.data());
  return Dims(p, p + dst.NumElements());
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

Status IndexError(int64_t index, int64_t dim, int64_t size) {
  return OutOfRange("index " + std::to_string(index) + " is out of bounds for dimension " +
                    std::to_string(dim) + " with size " + std::to_string(size));
}

}  // namespace

Status RunGather(const Op& op, const View& operand_in, const View& indices, const View& out) {
  const Attrs& a = op.attrs;
  bool checked = op.attrs.kind != 0;
  std::vector<char> s1, s2;
  View operand = Contiguous(operand_in, s1);
  Dims idx = IndicesAsI64(indices, s2);
  int64_t nvec = static_cast<int64_t>(a.c.size());
  int64_t nbatch = nvec ? static_cast<int64_t>(idx.size()) / nvec : 0;
  int orank = static_cast<int>(operand.dims.size());
  int elem = DTypeSize(operand.dtype);
  Dims ostr = ContiguousStrides(operand.dims);
  // Per batch position: the clamped (or checked) start offset in elements.
  Dims start_off(nbatch);
  for (int64_t b = 0; b < nbatch; ++b) {
    int64_t off = 0;
    for (int64_t k = 0; k < nvec; ++k) {
      int64_t d = a.c[k];
      int64_t s = idx[b * nvec + k];
      int64_t hi = operand.dims[d] - a.d[d];
      if (s < 0 || s > hi) {
        if (checked) return IndexError(s, d, operand.dims[d]);
        s = std::clamp<int64_t>(s, 0, hi);
      }
      off += s * ostr[d];
    }
    start_off[b] = off;
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
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t b = 0; b < nbatch; ++b)
        std::memcpy(dst + (o * nbatch + b) * inner * elem,
                    src + (o * n * inner + start_off[b]) * elem, inner * elem);
    return Status::Ok();
  }
  if (trailing && window_contig) {
    for (int64_t b = 0; b < nbatch; ++b)
      std::memcpy(dst + b * wsize * elem, src + start_off[b] * elem, wsize * elem);
    return Status::Ok();
  }
  // General path: walk result elements.
  Dims rstr = ContiguousStrides(out.dims);
  Dims batch_dims;
  for (int d = 0; d < out_rank; ++d)
    if (!Contains(a.a, d)) batch_dims.push_back(d);
  int64_t total = out.NumElements();
  for (int64_t e = 0; e < total; ++e) {
    int64_t b = 0, woff = 0;
    size_t wi = 0;
    for (int d = 0; d < out_rank; ++d) {
      int64_t i = (e / rstr[d]) % out.dims[d];
      if (Contains(a.a, d)) woff += i * wstrides[wi++];
      else b = b * out.dims[d] + i;
    }
    std::memcpy(dst + e * elem, src + (start_off[b] + woff) * elem, elem);
  }
  return Status::Ok();
}

namespace {
template <typename T>
void Apply(ReduceKind k, T* dst, const T* src) {
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
  if (int64_t d = AlongOneDim(a, out.dims, updates_in.dims, indices, false);
      d >= 0 && out.dtype == DType::kF32 && out.IsContiguous()) {
    // index_add along d on float32 (max-pool and upsampling backward): rows of the dims after d
    // combined per (outer position, index), without per-element index arithmetic.
    std::vector<char> s1, s2;
    View updates = Contiguous(updates_in, s1);
    Dims idx = IndicesAsI64(indices, s2);
    int64_t outer = 1, inner = 1, rank = static_cast<int64_t>(out.dims.size());
    for (int64_t i = 0; i < d; ++i) outer *= out.dims[i];
    for (int64_t i = d + 1; i < rank; ++i) inner *= out.dims[i];
    int64_t n = out.dims[d], nb = updates.dims[d];
    float* dst = static_cast<float*>(out.data);
    const float* src = static_cast<const float*>(updates.data);
    for (int64_t b = 0; b < nb; ++b)
      if (checked && (idx[b] < 0 || idx[b] >= n)) return IndexError(idx[b], d, n);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t b = 0; b < nb; ++b) {
        int64_t i = idx[b];
        if (i < 0 || i >= n) continue;  // StableHLO skips out-of-bounds updates
        float* row = dst + (o * n + i) * inner;
        const float* from = src + (o * nb + b) * inner;
        if (kind == ReduceKind::kAdd) {
          for (int64_t j = 0; j < inner; ++j) row[j] += from[j];
        } else {
          for (int64_t j = 0; j < inner; ++j) Apply(kind, row + j, from + j);
        }
      }
    return Status::Ok();
  }
  std::vector<char> s1, s2;
  View updates = Contiguous(updates_in, s1);
  Dims idx = IndicesAsI64(indices, s2);
  int64_t nvec = static_cast<int64_t>(a.c.size());
  int orank = static_cast<int>(out.dims.size());
  Dims ostr = ContiguousStrides(out.dims);
  Dims window_operand_dims;  // operand dims that window dims map to
  for (int d = 0; d < orank; ++d)
    if (!Contains(a.b, d)) window_operand_dims.push_back(d);
  int urank = static_cast<int>(updates.dims.size());
  Dims ustr = ContiguousStrides(updates.dims);
  int64_t total = updates.NumElements();
  int elem = DTypeSize(out.dtype);
  char* dst = static_cast<char*>(out.data);
  const char* src = static_cast<const char*>(updates.data);
  Dims full(orank);
  for (int64_t e = 0; e < total; ++e) {
    int64_t b = 0;
    std::fill(full.begin(), full.end(), 0);
    size_t wi = 0;
    for (int d = 0; d < urank; ++d) {
      int64_t i = (e / ustr[d]) % updates.dims[d];
      if (Contains(a.a, d)) full[window_operand_dims[wi++]] += i;
      else b = b * updates.dims[d] + i;
    }
    bool in_bounds = true;
    for (int64_t k = 0; k < nvec; ++k) {
      int64_t d = a.c[k];
      int64_t s = idx[b * nvec + k];
      if (s < 0 || s >= out.dims[d]) {
        if (checked) return IndexError(s, d, out.dims[d]);
        in_bounds = false;
      }
      full[d] += s;
    }
    int64_t off = 0;
    for (int d = 0; d < orank; ++d) {
      if (full[d] < 0 || full[d] >= out.dims[d]) in_bounds = false;
      off += full[d] * ostr[d];
    }
    if (!in_bounds) continue;  // StableHLO skips out-of-bounds updates
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
  }
  return Status::Ok();
}

}  // namespace tpu::host
