#include "torch/distributed/reduce_kernels.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

namespace tpu::dist {
namespace {

template <typename T>
struct AccOf {
  using type = T;
};
template <>
struct AccOf<c10::BFloat16> {
  using type = float;
};
template <>
struct AccOf<c10::Half> {
  using type = float;
};

// One step of the reduction: a = a op b. Floating min/max propagate NaN, as torch.minimum does.
template <RedOp op, typename A>
inline A Combine(A a, A b) {
  if constexpr (op == RedOp::kSum || op == RedOp::kAvg) {
    return a + b;
  } else if constexpr (op == RedOp::kProduct) {
    return a * b;
  } else if constexpr (op == RedOp::kMin || op == RedOp::kMax) {
    if constexpr (std::is_floating_point_v<A>) {
      if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;
    }
    if constexpr (op == RedOp::kMin) return b < a ? b : a;
    else return a < b ? b : a;
  } else {
    if constexpr (std::is_integral_v<A>) {
      if constexpr (op == RedOp::kBand) return a & b;
      else if constexpr (op == RedOp::kBor) return a | b;
      else return a ^ b;
    } else {
      return a;  // excluded by CheckReduction
    }
  }
}

// In blocks, so that bf16/f16 sources are widened once into a float accumulator that stays in
// the cache, and the inner loops over plain arrays vectorize.
template <typename T, RedOp op>
void ReduceT(T* dst, const T* const* srcs, int n, int64_t count, int64_t divisor) {
  using A = typename AccOf<T>::type;
  constexpr int64_t kBlock = 1024;
  A acc[kBlock];
  for (int64_t base = 0; base < count; base += kBlock) {
    const int64_t m = std::min(kBlock, count - base);
    const T* s0 = srcs[0] + base;
    for (int64_t i = 0; i < m; ++i) acc[i] = static_cast<A>(s0[i]);
    for (int s = 1; s < n; ++s) {
      const T* src = srcs[s] + base;
      for (int64_t i = 0; i < m; ++i) acc[i] = Combine<op, A>(acc[i], static_cast<A>(src[i]));
    }
    if constexpr (op == RedOp::kAvg) {
      const A d = static_cast<A>(divisor);
      for (int64_t i = 0; i < m; ++i) acc[i] = acc[i] / d;
    }
    T* out = dst + base;
    for (int64_t i = 0; i < m; ++i) out[i] = static_cast<T>(acc[i]);
  }
}

template <typename T>
void ReduceOp(void* dst, const void* const* srcs, int n, int64_t count, RedOp op, int64_t divisor) {
  auto* d = static_cast<T*>(dst);
  auto* s = reinterpret_cast<const T* const*>(srcs);
  switch (op) {
    case RedOp::kSum: return ReduceT<T, RedOp::kSum>(d, s, n, count, divisor);
    case RedOp::kAvg: return ReduceT<T, RedOp::kAvg>(d, s, n, count, divisor);
    case RedOp::kProduct: return ReduceT<T, RedOp::kProduct>(d, s, n, count, divisor);
    case RedOp::kMin: return ReduceT<T, RedOp::kMin>(d, s, n, count, divisor);
    case RedOp::kMax: return ReduceT<T, RedOp::kMax>(d, s, n, count, divisor);
    case RedOp::kBand: return ReduceT<T, RedOp::kBand>(d, s, n, count, divisor);
    case RedOp::kBor: return ReduceT<T, RedOp::kBor>(d, s, n, count, divisor);
    case RedOp::kBxor: return ReduceT<T, RedOp::kBxor>(d, s, n, count, divisor);
  }
}

// bool holds 0 or 1 in a byte: sum/max are OR, product/min are AND, and the bitwise ops keep the
// values 0/1.
RedOp BoolOp(RedOp op) {
  switch (op) {
    case RedOp::kSum:
    case RedOp::kMax: return RedOp::kBor;
    case RedOp::kProduct:
    case RedOp::kMin: return RedOp::kBand;
    default: return op;
  }
}

}  // namespace

const char* RedOpName(RedOp op) {
  switch (op) {
    case RedOp::kSum: return "SUM";
    case RedOp::kAvg: return "AVG";
    case RedOp::kProduct: return "PRODUCT";
    case RedOp::kMin: return "MIN";
    case RedOp::kMax: return "MAX";
    case RedOp::kBand: return "BAND";
    case RedOp::kBor: return "BOR";
    case RedOp::kBxor: return "BXOR";
  }
  return "?";
}

Status CheckReduction(RedOp op, DType dtype) {
  bool bitwise = op == RedOp::kBand || op == RedOp::kBor || op == RedOp::kBxor;
  if (bitwise && IsFloat(dtype))
    return InvalidArgument(std::string("ReduceOp.") + RedOpName(op) + " needs an integer or bool tensor, got " +
                           DTypeName(dtype));
  if (op == RedOp::kAvg && !IsFloat(dtype))
    return InvalidArgument(std::string("ReduceOp.AVG needs a floating-point tensor, got ") + DTypeName(dtype) +
                           " (use SUM and divide)");
  return Status::Ok();
}

void Reduce(void* dst, const void* const* srcs, int num_srcs, int64_t count, DType dtype, RedOp op, int64_t divisor) {
  switch (dtype) {
    case DType::kF32: return ReduceOp<float>(dst, srcs, num_srcs, count, op, divisor);
    case DType::kF64: return ReduceOp<double>(dst, srcs, num_srcs, count, op, divisor);
    case DType::kBF16: return ReduceOp<c10::BFloat16>(dst, srcs, num_srcs, count, op, divisor);
    case DType::kF16: return ReduceOp<c10::Half>(dst, srcs, num_srcs, count, op, divisor);
    case DType::kI64: return ReduceOp<int64_t>(dst, srcs, num_srcs, count, op, divisor);
    case DType::kI32: return ReduceOp<int32_t>(dst, srcs, num_srcs, count, op, divisor);
    case DType::kI16: return ReduceOp<int16_t>(dst, srcs, num_srcs, count, op, divisor);
    case DType::kI8: return ReduceOp<int8_t>(dst, srcs, num_srcs, count, op, divisor);
    case DType::kU8: return ReduceOp<uint8_t>(dst, srcs, num_srcs, count, op, divisor);
    case DType::kU32: return ReduceOp<uint32_t>(dst, srcs, num_srcs, count, op, divisor);
    case DType::kU64: return ReduceOp<uint64_t>(dst, srcs, num_srcs, count, op, divisor);
    case DType::kBool: return ReduceOp<uint8_t>(dst, srcs, num_srcs, count, BoolOp(op), divisor);
  }
}

}  // namespace tpu::dist
