// Reductions: the reduced dims are brought innermost or kept as one block between kept dims,
// then each output is accumulated in its register class (float sums accumulate in blocks that
// are flushed into double, which keeps long sums close to PyTorch's cascade summation).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "runtime/host/kernels.h"
#include "runtime/host/wrapping.h"

namespace tpu::host {
namespace {

DType AccType(DType t) {
  switch (t) {
    case DType::kF32: case DType::kBF16: case DType::kF16: return DType::kF32;
    case DType::kF64: return DType::kF64;
    case DType::kI64: case DType::kU64: case DType::kU32: return DType::kI64;
    default: return DType::kI32;
  }
}

template <typename T>
inline T Combine(ReduceKind k, T a, T b) {
  switch (k) {
    case ReduceKind::kAdd: return WrapAdd(a, b);
    case ReduceKind::kMul: return WrapMul(a, b);
    case ReduceKind::kMax: return (a > b || a != a) ? a : b;
    case ReduceKind::kMin: return (a < b || a != a) ? a : b;
    case ReduceKind::kAnd: return (a != T(0)) && (b != T(0));
    case ReduceKind::kOr: return (a != T(0)) || (b != T(0));
    case ReduceKind::kReplace: return b;
  }
  return a;
}

// Sum of n contiguous floats with 16 independent lanes flushed into double every 2048 elements.
double SumRowF32(const float* x, int64_t n) {
  double total = 0;
  int64_t i = 0;
  while (i < n) {
    int64_t end = std::min(n, i + 2048);
    float lanes[16] = {};
    for (; i + 16 <= end; i += 16)
      for (int j = 0; j < 16; ++j) lanes[j] += x[i + j];
    for (; i < end; ++i) lanes[0] += x[i];
    double block = 0;
    for (float l : lanes) block += l;
    total += block;
  }
  return total;
}

template <typename T>
void ReduceBlock(ReduceKind kind, const T* in, T init, T* out, int64_t outer, int64_t red, int64_t inner) {
  if (inner == 1) {
    for (int64_t o = 0; o < outer; ++o) {
      const T* row = in + o * red;
      if constexpr (std::is_same_v<T, float>) {
        if (kind == ReduceKind::kAdd) {
          out[o] = static_cast<float>(static_cast<double>(init) + SumRowF32(row, red));
          continue;
        }
      }
      T acc = init;
      for (int64_t r = 0; r < red; ++r) acc = Combine(kind, acc, row[r]);
      out[o] = acc;
    }
    return;
  }
  for (int64_t o = 0; o < outer; ++o) {
    T* dst = out + o * inner;
    if constexpr (std::is_same_v<T, float>) {
      if (kind == ReduceKind::kAdd) {
        // Column sums accumulate in double so long columns keep their precision.
        std::vector<double> acc(inner, static_cast<double>(init));
        for (int64_t r = 0; r < red; ++r) {
          const float* src = in + (o * red + r) * inner;
          for (int64_t i = 0; i < inner; ++i) acc[i] += src[i];
        }
        for (int64_t i = 0; i < inner; ++i) dst[i] = static_cast<float>(acc[i]);
        continue;
      }
    }
    for (int64_t i = 0; i < inner; ++i) dst[i] = init;
    for (int64_t r = 0; r < red; ++r) {
      const T* src = in + (o * red + r) * inner;
      for (int64_t i = 0; i < inner; ++i) dst[i] = Combine(kind, dst[i], src[i]);
    }
  }
}

template <typename F>
void DispatchAcc(DType acc, F&& f) {
  switch (acc) {
    case DType::kF32: f(float{}); break;
    case DType::kF64: f(double{}); break;
    case DType::kI64: f(int64_t{}); break;
    default: f(int32_t{}); break;
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
  const auto& rdims = op.attrs.a;
  int rank = static_cast<int>(in.dims.size());
  std::vector<bool> reduced(rank, false);
  for (int64_t d : rdims) reduced[d] = true;
  // Kept dims first, reduced dims last: one contiguous block per output element.
  Dims perm;
  int64_t outer = 1, red = 1;
  for (int d = 0; d < rank; ++d)
    if (!reduced[d]) { perm.push_back(d); outer *= in.dims[d]; }
  for (int d = 0; d < rank; ++d)
    if (reduced[d]) { perm.push_back(d); red *= in.dims[d]; }
  // Reducing leading dims of a contiguous operand keeps the natural layout (column sums).
  bool leading = true;
  for (int d = 0; d < static_cast<int>(rdims.size()); ++d) leading &= rdims[d] == d;
  DType acc = AccType(in.dtype);
  std::vector<char> storage;
  std::vector<char> out_storage(std::max<int64_t>(1, out.NumElements()) * 8);
  View acc_init{nullptr, acc, {}, {}};
  alignas(8) char init_bytes[8];
  acc_init.data = init_bytes;
  TPU_RETURN_IF_ERROR(CopyView(init, acc_init));
  int64_t inner = 1;
  View src;
  if (leading && !rdims.empty() && in.IsContiguous() && in.dtype == acc) {
    src = in;
    inner = outer;
    outer = 1;
  } else {
    bool identity = true;
    for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == static_cast<int64_t>(i);
    // Trailing-dim reductions of a contiguous input (softmax, norms, losses) read it in place.
    src = identity && in.IsContiguous() && in.dtype == acc ? in : Materialize(in, perm, acc, storage);
  }
  DispatchAcc(acc, [&](auto t) {
    using T = decltype(t);
    ReduceBlock<T>(kind, static_cast<const T*>(src.data), *reinterpret_cast<T*>(init_bytes),
                   reinterpret_cast<T*>(out_storage.data()), outer, red, inner);
  });
  View result{out_storage.data(), acc, out.dims, ContiguousStrides(out.dims)};
  return CopyView(result, out);
}

Status RunArgReduce(const Op& op, const View& in, const View& out) {
  int64_t dim = op.attrs.a[0];
  bool is_max = static_cast<ReduceKind>(op.attrs.kind) == ReduceKind::kMax;
  int rank = static_cast<int>(in.dims.size());
  Dims perm;
  for (int d = 0; d < rank; ++d)
    if (d != dim) perm.push_back(d);
  perm.push_back(dim);
  std::vector<char> storage;
  DType acc = IsFloat(in.dtype) ? DType::kF64 : DType::kI64;
  View src = Materialize(in, perm, acc, storage);
  int64_t red = in.dims[dim];
  int64_t outer = red ? src.NumElements() / red : 0;
  int64_t* o = static_cast<int64_t*>(out.data);
  DispatchAcc(acc, [&](auto t) {
    using T = decltype(t);
    const T* x = static_cast<const T*>(src.data);
    for (int64_t i = 0; i < outer; ++i) {
      const T* row = x + i * red;
      int64_t best = 0;
      for (int64_t r = 1; r < red; ++r) {
        if (row[best] != row[best]) break;  // NaN wins and stays
        bool better = is_max ? (row[r] > row[best]) : (row[r] < row[best]);
        if (better || row[r] != row[r]) best = r;
      }
      o[i] = best;
    }
  });
  return Status::Ok();
}

}  // namespace tpu::host
