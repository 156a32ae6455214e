#include "torch/lower/reduce_util.h"

#include <limits>

namespace tpu::torch_bridge {
namespace {

// Extremes of the integer types the device holds (exact as doubles, except int64's highest).
double IntegerLowest(DType t) {
  switch (t) {
    case DType::kI64: return -0x1p63;
    case DType::kI32: return std::numeric_limits<int32_t>::lowest();
    case DType::kI16: return std::numeric_limits<int16_t>::lowest();
    case DType::kI8: return std::numeric_limits<int8_t>::lowest();
    default: return 0;  // unsigned
  }
}
double IntegerHighest(DType t) {
  switch (t) {
    case DType::kI32: return std::numeric_limits<int32_t>::max();
    case DType::kI16: return std::numeric_limits<int16_t>::max();
    case DType::kI8: return std::numeric_limits<int8_t>::max();
    case DType::kU8: return std::numeric_limits<uint8_t>::max();
    case DType::kU32: return std::numeric_limits<uint32_t>::max();
    default: TORCH_INTERNAL_ASSERT(false, "no max/min identity for ", DTypeName(t));
  }
}

// The identity of `kind` over `t` as a rank-0 IR value.
int Identity(Lowering& l, ReduceKind kind, DType t) {
  Builder& b = l.b();
  constexpr double kInf = std::numeric_limits<double>::infinity();
  switch (kind) {
    case ReduceKind::kAdd: case ReduceKind::kOr: return b.Constant(0, t);
    case ReduceKind::kMul: case ReduceKind::kAnd: return b.Constant(1, t);
    case ReduceKind::kReplace: break;
    case ReduceKind::kMax: case ReduceKind::kMin: {
      bool max = kind == ReduceKind::kMax;
      if (IsFloat(t)) return b.Constant(max ? -kInf : kInf, t);
      if (t == DType::kBool) return b.Constant(max ? 0 : 1, t);
      if (t == DType::kI64 && !max) {
        // 2^63 - 1 has no double: pass it as a parameter.
        return l.Scalar(std::numeric_limits<int64_t>::max(), at::kLong);
      }
      return b.Constant(max ? IntegerLowest(t) : IntegerHighest(t), t);
    }
  }
  TORCH_INTERNAL_ASSERT(false, "reduction kind without an identity");
}

}  // namespace

int ReduceAlong(Lowering& l, int x, const Dims& axes, ReduceKind kind) {
  if (axes.empty()) return x;
  DType t = l.b().TypeOf(x).dtype;
  return l.b().Reduce(x, Identity(l, kind, t), axes, kind);
}

int Unreduce(Builder& b, int x, const Dims& dims, const Dims& axes) {
  Dims kept;
  size_t a = 0;
  for (int64_t d = 0; d < static_cast<int64_t>(dims.size()); ++d) {
    if (a < axes.size() && axes[a] == d) ++a;
    else kept.push_back(d);
  }
  return b.BroadcastInDim(x, dims, kept);
}

}  // namespace tpu::torch_bridge
