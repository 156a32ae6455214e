// Layout and data-movement kernels: views for layout ops, constant, iota, concatenate, pad.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "base/thread_pool.h"
#include "runtime/host/kernels.h"

namespace tpu::host {
namespace {

// `v` as an integer of type T: truncated toward zero and wrapped to T's width as an integer
// conversion does (300 -> u8 44). NaN gives 0; values beyond 64 bits saturate first (a plain
// double -> integer cast is undefined there, and for any value outside T's range).
template <typename T>
T WrapToInt(double v) {
  if (std::isnan(v)) return 0;
  if constexpr (std::is_same_v<T, uint64_t>) {
    if (v >= 0x1p63) return v >= 0x1p64 ? std::numeric_limits<uint64_t>::max() : static_cast<uint64_t>(v);
  }
  int64_t i = v >= 0x1p63    ? std::numeric_limits<int64_t>::max()
              : v <= -0x1p63 ? std::numeric_limits<int64_t>::min()
                             : static_cast<int64_t>(v);
  return static_cast<T>(i);
}

// Writes `value` converted to `t` into dst.
void StoreScalar(DType t, double value, void* dst) {
  switch (t) {
    case DType::kF32: *static_cast<float*>(dst) = static_cast<float>(value); break;
    case DType::kF64: *static_cast<double*>(dst) = value; break;
    case DType::kBF16: case DType::kF16: {
      float f = static_cast<float>(value);
      View src{&f, DType::kF32, {}, {}};
      View out{dst, t, {}, {}};
      (void)CopyView(src, out);
      break;
    }
    case DType::kI64: *static_cast<int64_t*>(dst) = WrapToInt<int64_t>(value); break;
    case DType::kU64: *static_cast<uint64_t*>(dst) = WrapToInt<uint64_t>(value); break;
    case DType::kI32: *static_cast<int32_t*>(dst) = WrapToInt<int32_t>(value); break;
    case DType::kU32: *static_cast<uint32_t*>(dst) = WrapToInt<uint32_t>(value); break;
    case DType::kI16: *static_cast<int16_t*>(dst) = WrapToInt<int16_t>(value); break;
    case DType::kI8: *static_cast<int8_t*>(dst) = WrapToInt<int8_t>(value); break;
    case DType::kU8: *static_cast<uint8_t*>(dst) = WrapToInt<uint8_t>(value); break;
    case DType::kBool: *static_cast<uint8_t*>(dst) = value != 0; break;
  }
}

// Note [Transposing copies]: a copy whose destination runs along one dim and whose source runs
// along another (a permuted tensor made contiguous: attention's heads, a channels-last
// activation) read its source element by element at a stride, a cache line per element. It goes
// in square blocks instead: each block's source and destination lines stay in L1 while the block
// is copied.
template <typename T>
void TransposeBlocks(const char* src, char* dst, const Dims& dims, const Dims& ss, const Dims& ds, int k) {
  constexpr int64_t B = 32;
  const int rank = static_cast<int>(dims.size());
  const int64_t nk = dims[k], nl = dims[rank - 1], sl = ss[rank - 1], dk = ds[k];
  const int64_t bk = (nk + B - 1) / B, bl = (nl + B - 1) / B;
  int64_t outer = 1;
  for (int d = 0; d + 1 < rank; ++d)
    if (d != k) outer *= dims[d];
  // A block's source offset and the ranges it covers.
  auto block = [&](int64_t t, int64_t* so, int64_t* dso, int64_t* i0, int64_t* j0) {
    int64_t o = t / (bk * bl);
    *i0 = (t / bl) % bk * B, *j0 = t % bl * B;
    *so = 0, *dso = 0;  // the outer position's offsets
    for (int d = rank - 2; d >= 0; --d) {
      if (d == k) continue;
      const int64_t c = o % dims[d];
      o /= dims[d];
      *so += c * ss[d];
      *dso += c * ds[d];
    }
  };
  ThreadPool::Get().ParallelFor(outer * bk * bl, 1, [&](int64_t t0, int64_t t1) {
    int64_t nso, ndso, ni0, nj0;  // the next block's, found once
    block(t0, &nso, &ndso, &ni0, &nj0);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t so = nso, dso = ndso, i0 = ni0, j0 = nj0;
      if (t + 1 < t1) {
        // The next block's source rows are requested now: a source written long before (a
        // gradient's transposed operand late in a fused training step) comes from memory, and
        // its rows, a stride apart, are misses the hardware prefetcher does not foresee.
        block(t + 1, &nso, &ndso, &ni0, &nj0);
        const char* np = src + (nso + ni0) * static_cast<int64_t>(sizeof(T));
        const int64_t row = (std::min(nk, ni0 + B) - ni0) * static_cast<int64_t>(sizeof(T));
        for (int64_t j = nj0; j < std::min(nl, nj0 + B); ++j)
          for (int64_t off = 0; off < row; off += 64) __builtin_prefetch(np + j * sl * static_cast<int64_t>(sizeof(T)) + off);
      }
      const T* p = reinterpret_cast<const T*>(src) + so;
      T* q = reinterpret_cast<T*>(dst) + dso;
      const int64_t i1 = std::min(nk, i0 + B), j1 = std::min(nl, j0 + B);
      for (int64_t j = j0; j < j1; ++j)
        for (int64_t i = i0; i < i1; ++i) q[i * dk + j] = p[j * sl + i];
    }
  });
}

}  // namespace

bool CopyTransposed(const char* src, char* dst, int elem, const Dims& dims, const Dims& ss, const Dims& ds) {
  const int rank = static_cast<int>(dims.size());
  if (rank < 2 || ds[rank - 1] != 1 || ss[rank - 1] == 1 || !(elem == 2 || elem == 4 || elem == 8)) return false;
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  if (!ThreadPool::Worth(n)) return false;
  int k = -1;  // the dim the source runs along
  for (int d = 0; d + 1 < rank; ++d)
    if (ss[d] == 1 && dims[d] > 1) k = d;
  if (k < 0) return false;
  if (elem == 4) TransposeBlocks<uint32_t>(src, dst, dims, ss, ds, k);
  else if (elem == 8) TransposeBlocks<uint64_t>(src, dst, dims, ss, ds, k);
  else TransposeBlocks<uint16_t>(src, dst, dims, ss, ds, k);
  return true;
}

void ViewExtent(const View& v, const char** lo, const char** hi) {
  const char* base = static_cast<const char*>(v.data);
  int64_t last = 0;
  for (size_t d = 0; d < v.dims.size(); ++d) {
    if (v.dims[d] == 0) {
      *lo = *hi = base;
      return;
    }
    last += (v.dims[d] - 1) * v.strides[d];
  }
  *lo = base;
  *hi = base + (last + 1) * DTypeSize(v.dtype);
}

bool ViewOf(const Op& op, const View& in, View* out) {
  out->data = in.data;
  out->dtype = in.dtype;
  out->dims = op.type.dims;
  const Attrs& a = op.attrs;
  switch (op.code) {
    case OpCode::kBroadcastInDim: {
      out->strides.assign(op.type.dims.size(), 0);
      for (size_t i = 0; i < a.a.size(); ++i)
        if (in.dims[i] != 1) out->strides[a.a[i]] = in.strides[i];
      return true;
    }
    case OpCode::kTranspose: {
      out->strides.resize(a.a.size());
      for (size_t i = 0; i < a.a.size(); ++i) out->strides[i] = in.strides[a.a[i]];
      return true;
    }
    case OpCode::kSlice: {
      char* p = static_cast<char*>(in.data);
      out->strides.resize(in.dims.size());
      int64_t off = 0;
      for (size_t i = 0; i < in.dims.size(); ++i) {
        off += a.a[i] * in.strides[i];
        out->strides[i] = in.strides[i] * a.c[i];
      }
      out->data = p + off * DTypeSize(in.dtype);
      return true;
    }
    case OpCode::kReshape: {
      // Viewable when each run of operand dims that is contiguous in memory maps onto a run of
      // new dims with the same element count (walked from the innermost dim outwards).
      const Dims& od = in.dims;
      const Dims& nd = op.type.dims;
      out->strides.assign(nd.size(), 1);
      if (in.NumElements() == 0 || od.empty()) {
        out->strides = ContiguousStrides(nd);
        return true;
      }
      int view_d = static_cast<int>(nd.size()) - 1;
      int64_t base_stride = in.strides.back();
      int64_t tensor_numel = 1, view_numel = 1;
      for (int td = static_cast<int>(od.size()) - 1; td >= 0; --td) {
        tensor_numel *= od[td];
        bool chunk_end = td == 0 || (od[td - 1] != 1 && in.strides[td - 1] != tensor_numel * base_stride);
        if (!chunk_end) continue;
        while (view_d >= 0 && (view_numel < tensor_numel || nd[view_d] == 1)) {
          out->strides[view_d] = view_numel * base_stride;
          view_numel *= nd[view_d];
          --view_d;
        }
        if (view_numel != tensor_numel) return false;
        if (td > 0) {
          base_stride = in.strides[td - 1];
          tensor_numel = view_numel = 1;
        }
      }
      return view_d == -1;
    }
    default:
      return false;
  }
}

Status RunConstant(const Op& op, const View& out) {
  StoreScalar(op.type.dtype, op.attrs.f, out.data);
  return Status::Ok();
}

Status RunIota(const Op& op, const View& out) {
  const int64_t dim = op.attrs.i;
  const int64_t size = out.dims[dim];
  // Contiguous: outer x size x inner, each value repeated `inner` times. A compact iota's view
  // (Note [Compact iota], plan.h: stride 1 along dim, 0 elsewhere) is the one run of `size`.
  int64_t inner = 1, outer = 1;
  bool compact = !out.IsContiguous();
  for (size_t d = 0; d < out.dims.size(); ++d) {
    if (static_cast<int64_t>(d) > dim) inner *= out.dims[d];
    if (static_cast<int64_t>(d) < dim) outer *= out.dims[d];
    if (compact && out.strides[d] != (static_cast<int64_t>(d) == dim ? 1 : 0) && out.dims[d] != 1)
      return Internal("iota into a strided view");
  }
  if (compact) inner = outer = 1;
  char* p = static_cast<char*>(out.data);
  const int elem = DTypeSize(out.dtype);
  auto fill = [&](auto* q, int64_t b, int64_t e) {  // rows [b, e) of outer x size
    using T = std::remove_pointer_t<decltype(q)>;
    for (int64_t r = b; r < e; ++r) {
      T* row = q + r * inner;
      const T v = static_cast<T>(r % size);
      for (int64_t k = 0; k < inner; ++k) row[k] = v;
    }
  };
  auto body = [&](int64_t b, int64_t e) {
    switch (out.dtype) {  // typed fills for the common types
      case DType::kI64: fill(reinterpret_cast<int64_t*>(p), b, e); break;
      case DType::kI32: fill(reinterpret_cast<int32_t*>(p), b, e); break;
      case DType::kF32: fill(reinterpret_cast<float*>(p), b, e); break;
      default:
        for (int64_t r = b; r < e; ++r)
          for (int64_t k = 0; k < inner; ++k) StoreScalar(out.dtype, static_cast<double>(r % size), p + (r * inner + k) * elem);
    }
  };
  const int64_t rows = outer * size;
  if (ThreadPool::Worth(rows * inner))
    ThreadPool::Get().ParallelFor(rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(1, inner)), body);
  else
    body(0, rows);
  return Status::Ok();
}

Status RunConcatenate(const Op& op, const std::vector<View>& ins, const View& out) {
  int64_t dim = op.attrs.i;
  int64_t offset = 0;
  for (const View& in : ins) {
    View dst = out;
    dst.dims = in.dims;
    dst.data = static_cast<char*>(out.data) + offset * out.strides[dim] * DTypeSize(out.dtype);
    TPU_RETURN_IF_ERROR(CopyView(in, dst));
    offset += in.dims[dim];
  }
  return Status::Ok();
}

Status RunPad(const Op& op, const View& in, const View& pad_value, const View& out) {
  // Fill with the pad value (a broadcast view of the scalar), then place the operand.
  View fill = pad_value;
  fill.dims = out.dims;
  fill.strides.assign(out.dims.size(), 0);
  TPU_RETURN_IF_ERROR(CopyView(fill, out));
  const Attrs& a = op.attrs;
  View dst = out;
  dst.dims = in.dims;
  int64_t off = 0;
  View src = in;
  Dims start(in.dims.size(), 0);
  for (size_t d = 0; d < in.dims.size(); ++d) {
    dst.strides[d] = out.strides[d] * (1 + a.c[d]);
    // Negative low padding crops the operand.
    int64_t lo = a.a[d];
    int64_t skip = lo < 0 ? (-lo + a.c[d]) / (1 + a.c[d]) : 0;
    int64_t first = lo + skip * (1 + a.c[d]);
    int64_t count = in.dims[d] - skip;
    int64_t last_pos = first + (count - 1) * (1 + a.c[d]);
    while (count > 0 && last_pos >= out.dims[d]) { --count; last_pos -= 1 + a.c[d]; }
    if (count <= 0) return Status::Ok();
    dst.dims[d] = count;
    src.dims[d] = count;
    src.data = static_cast<char*>(src.data) + skip * in.strides[d] * DTypeSize(in.dtype);
    off += first * out.strides[d];
  }
  dst.data = static_cast<char*>(out.data) + off * DTypeSize(out.dtype);
  return CopyView(src, dst);
}

// Reverses each block of `block` elements (of E, the element size): out[o][j] = in[o][block - 1 - j].
template <typename E>
void ReverseBlocks(const E* in, E* out, int64_t blocks, int64_t block) {
  for (int64_t o = 0; o < blocks; ++o) std::reverse_copy(in + o * block, in + (o + 1) * block, out + o * block);
}

namespace {

// out (contiguous) = in with its last `nrev` dims reversed, for blocks of at most 16 elements in
// any layout of in (a channels-last convolution kernel, reversed over its 3 x 3 window for the
// input gradient): each block's elements gathered through its positions' offsets, last first.
// (The reversed view, copied by CopyView, was rows of 3 floats 64 apart, a call per row: 100 us
// for a [64, 64, 3, 3] kernel.)
template <typename E>
void ReverseSmallBlocks(const View& in, E* out, int nrev, int64_t block) {
  const int rank = static_cast<int>(in.dims.size()), lead = rank - nrev;
  int64_t offs[16];
  for (int64_t b = 0; b < block; ++b) {
    int64_t off = 0;
    for (int d = rank - 1, r = static_cast<int>(b); d >= lead; --d) {
      off += (r % in.dims[d]) * in.strides[d];
      r /= static_cast<int>(in.dims[d]);
    }
    offs[block - 1 - b] = off;  // output position b reads input position block - 1 - b
  }
  const E* x = static_cast<const E*>(in.data);
  int64_t outer = 1;
  for (int d = 0; d < lead; ++d) outer *= in.dims[d];
  SmallVector<int64_t, 6> c(lead, 0);
  int64_t base = 0;
  for (int64_t o = 0; o < outer; ++o, out += block) {
    for (int64_t b = 0; b < block; ++b) out[b] = x[base + offs[b]];
    for (int d = lead - 1; d >= 0; --d) {  // the next leading position
      base += in.strides[d];
      if (++c[d] < in.dims[d]) break;
      base -= c[d] * in.strides[d];
      c[d] = 0;
    }
  }
}

}  // namespace

Status RunReverse(const Op& op, const View& in, const View& out) {
  // Reversing every dim of a trailing run of a dense layout (a convolution kernel's spatial dims,
  // which autodiff reverses for the input gradient) is reversing each block of their elements:
  // whole blocks, not CopyView's walk of 3-element rows backwards (~3 ns an element).
  const int rank = static_cast<int>(in.dims.size());
  Dims reversed = op.attrs.a;
  std::sort(reversed.begin(), reversed.end());
  reversed.erase(std::unique(reversed.begin(), reversed.end()), reversed.end());
  bool trailing = !reversed.empty() && out.IsContiguous() && in.data != out.data;
  for (size_t i = 0; trailing && i < reversed.size(); ++i)
    trailing = reversed[i] == rank - static_cast<int64_t>(reversed.size()) + static_cast<int64_t>(i);
  const int64_t esize = DTypeSize(in.dtype);
  int64_t block = 1;
  for (int64_t d : reversed) block *= in.dims[d];
  if (trailing && !in.IsContiguous() && block <= 16 && in.dtype == out.dtype && in.NumElements() > 0) {
    const int nrev = static_cast<int>(reversed.size());
    switch (esize) {
      case 1: ReverseSmallBlocks(in, static_cast<uint8_t*>(out.data), nrev, block); return Status::Ok();
      case 2: ReverseSmallBlocks(in, static_cast<uint16_t*>(out.data), nrev, block); return Status::Ok();
      case 4: ReverseSmallBlocks(in, static_cast<uint32_t*>(out.data), nrev, block); return Status::Ok();
      case 8: ReverseSmallBlocks(in, static_cast<uint64_t*>(out.data), nrev, block); return Status::Ok();
      default: break;
    }
  }
  if (trailing && in.IsContiguous() && in.dtype == out.dtype && (esize == 1 || esize == 2 || esize == 4 || esize == 8)) {
    int64_t total = in.NumElements();
    if (total == 0) return Status::Ok();
    int64_t blocks = total / block;
    switch (esize) {
      case 1: ReverseBlocks(static_cast<const uint8_t*>(in.data), static_cast<uint8_t*>(out.data), blocks, block); break;
      case 2: ReverseBlocks(static_cast<const uint16_t*>(in.data), static_cast<uint16_t*>(out.data), blocks, block); break;
      case 4: ReverseBlocks(static_cast<const uint32_t*>(in.data), static_cast<uint32_t*>(out.data), blocks, block); break;
      default: ReverseBlocks(static_cast<const uint64_t*>(in.data), static_cast<uint64_t*>(out.data), blocks, block); break;
    }
    return Status::Ok();
  }
  // Otherwise a view of the operand with the reversed dims walked backwards, copied out.
  View src = in;
  char* p = static_cast<char*>(in.data);
  for (int64_t d : op.attrs.a) {
    if (in.dims[d] == 0) return Status::Ok();
    p += (in.dims[d] - 1) * in.strides[d] * DTypeSize(in.dtype);
    src.strides[d] = -in.strides[d];
  }
  src.data = p;
  return CopyView(src, out);
}

}  // namespace tpu::host
