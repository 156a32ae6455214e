// Factories that compute their values on the device: arange, linspace, logspace, eye. (full, zeros, ones
// and scalar_tensor are composites of empty + fill_, which are native already.)
#include <ATen/Dispatch.h>
#include <ATen/native/RangeUtils.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

#include "torch/lower/elementwise_util.h"

namespace tpu::torch_bridge {
namespace {

// PyTorch's CPU accumulation type for range factories: double for float/double, float for the
// 16-bit floats, int64 for integers.
at::ScalarType RangeAccType(at::ScalarType t) {
  if (t == at::kHalf || t == at::kBFloat16) return at::kFloat;
  if (at::isFloatingType(t)) return at::kDouble;
  return at::kLong;
}

// ATen's own size rule and checks: the bounds in double, then (for int64) the step as int64,
// which raises ValueError when a fractional step truncates to 0.
int64_t ArangeSize(at::ScalarType t, const at::Scalar& start, const at::Scalar& end, const at::Scalar& step) {
  int64_t size = 0;
  AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, t, "arange_cpu",
                             [&] { size = at::native::compute_arange_size<scalar_t>(start, end, step); });
  return size;
}

// out = start + step * i, computed in `acc` (start and step are runtime scalars).
int AffineRange(Lowering& l, int64_t n, const at::Scalar& start, const at::Scalar& step, at::ScalarType acc) {
  Builder& b = l.b();
  int i = b.Convert(b.Iota(TensorType{DType::kI64, {n}}, 0), ToDType(acc));
  int s = b.BroadcastTo(l.Scalar(step, acc), {n});
  int a = b.BroadcastTo(l.Scalar(start, acc), {n});
  return b.Binary(OpCode::kAdd, a, b.Binary(OpCode::kMultiply, s, i));
}

at::Tensor& arange_start_out(const at::Scalar& start, const at::Scalar& end, const at::Scalar& step, at::Tensor& out) {
  at::ScalarType t = out.scalar_type();
  TORCH_CHECK(t != at::kBool, "\"arange_cpu\" not implemented for 'Bool'");
  at::ScalarType acc = RangeAccType(t);
  int64_t size = ArangeSize(t, start, end, step);
  if (out.numel() != size) {
    if (out.numel() > 0) {
      TORCH_WARN("The number of elements in the out tensor of shape ", out.sizes(), " is ", out.numel(),
                 " which does not match the computed number of elements ", size,
                 ". Note that this may occur as a result of rounding error. "
                 "The out tensor will be resized to a tensor of shape (", size, ",).");
    }
    out.resize_({size});
  }
  if (size == 0) return out;
  Lowering l("aten::arange");
  l.Output(AffineRange(l, size, start, step, acc), out);
  l.Run();
  return out;
}

// As PyTorch's CPU kernel: the first half counts up from start, the second half down from end,
// so both ends are exact.
at::Tensor& linspace_out(const at::Scalar& start, const at::Scalar& end, int64_t steps, at::Tensor& out) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  at::ScalarType t = out.scalar_type();
  TORCH_CHECK(t != at::kBool, "\"linspace_cpu\" not implemented for 'Bool'");
  if (out.numel() != steps) out.resize_({steps});
  if (steps == 0) return out;
  // Integer results step in double; floats in their own precision (bfloat16/half in float).
  at::ScalarType ct = at::isFloatingType(t) ? OpMath(t) : at::kDouble;
  Lowering l("aten::linspace");
  Builder& b = l.b();
  if (steps == 1) {
    l.Output(b.BroadcastTo(l.Scalar(start, ct), {1}), out);
    l.Run();
    return out;
  }
  // start/end are first rounded to the result type, as the CPU kernel does.
  int s = b.BroadcastTo(b.ConvertIfNeeded(l.Scalar(start, t), ToDType(ct)), {steps});
  int e = b.BroadcastTo(b.ConvertIfNeeded(l.Scalar(end, t), ToDType(ct)), {steps});
  int step = b.Binary(OpCode::kDivide, b.Binary(OpCode::kSubtract, e, s), b.ScalarLike(steps - 1, s));
  int i = b.Convert(b.Iota(TensorType{DType::kI64, {steps}}, 0), ToDType(ct));
  int up = b.Binary(OpCode::kAdd, s, b.Binary(OpCode::kMultiply, step, i));
  int from_end = b.Binary(OpCode::kSubtract, b.ScalarLike(steps - 1, i), i);
  int down = b.Binary(OpCode::kSubtract, e, b.Binary(OpCode::kMultiply, step, from_end));
  int first_half = b.Compare(CompareDirection::kLT, i, b.ScalarLike(steps / 2, i));
  l.Output(b.Select(first_half, up, down), out);
  l.Run();
  return out;
}

// As PyTorch's CPU kernel: base ** (start + step * i) for the first half, base ** (end - step *
// (steps - 1 - i)) for the second, in double (start and end rounded to the result type first, the
// base to float for integer results), then converted to the result type.
at::Tensor& logspace_out(const at::Scalar& start, const at::Scalar& end, int64_t steps, double base, at::Tensor& out) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  at::ScalarType t = out.scalar_type();
  bool integral = at::isIntegralType(t, /*includeBool=*/false);
  TORCH_CHECK_NOT_IMPLEMENTED(integral || at::isFloatingType(t), "\"logspace_cpu\" not implemented for '",
                              c10::toString(t), "'");
  if (out.numel() != steps) out.resize_({steps});
  if (steps == 0) return out;
  Lowering l("aten::logspace");
  Builder& b = l.b();
  const at::ScalarType f64 = at::kDouble;
  if (steps == 1) {  // the CPU kernel's fill: pow(base, start), the unrounded start, in double
    int base_v = b.BroadcastTo(l.Scalar(base, f64), {1});
    int s = b.BroadcastTo(l.Scalar(start.toDouble(), f64), {1});
    l.Output(b.Binary(OpCode::kPower, base_v, s), out);
    l.Run();
    return out;
  }
  int base_v = b.BroadcastTo(l.Scalar(integral ? static_cast<double>(static_cast<float>(base)) : base, f64), {steps});
  int s = b.BroadcastTo(b.Convert(l.Scalar(start, t), DType::kF64), {steps});
  int e = b.BroadcastTo(b.Convert(l.Scalar(end, t), DType::kF64), {steps});
  int step = b.Binary(OpCode::kDivide, b.Binary(OpCode::kSubtract, e, s), b.ScalarLike(steps - 1, s));
  int i = b.Convert(b.Iota(TensorType{DType::kI64, {steps}}, 0), DType::kF64);
  int up = b.Binary(OpCode::kAdd, s, b.Binary(OpCode::kMultiply, step, i));
  int from_end = b.Binary(OpCode::kSubtract, b.ScalarLike(steps - 1, i), i);
  int down = b.Binary(OpCode::kSubtract, e, b.Binary(OpCode::kMultiply, step, from_end));
  int first_half = b.Compare(CompareDirection::kLT, i, b.ScalarLike(steps / 2, i));
  l.Output(b.Binary(OpCode::kPower, base_v, b.Select(first_half, up, down)), out);
  l.Run();
  return out;
}

at::Tensor& eye_m_out(int64_t n, int64_t m, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be greater or equal to 0, got ", n);
  TORCH_CHECK(m >= 0, "m must be greater or equal to 0, got ", m);
  out.resize_({n, m});
  if (out.numel() == 0) return out;
  Lowering l("aten::eye");
  Builder& b = l.b();
  TensorType type{DType::kI64, {n, m}};
  int diag = b.Compare(CompareDirection::kEQ, b.Iota(type, 0), b.Iota(type, 1));
  l.Output(diag, out);
  l.Run();
  return out;
}

at::Tensor& eye_out(int64_t n, at::Tensor& out) { return eye_m_out(n, n, out); }

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("arange.start_out", arange_start_out);
  m.impl("linspace.out", linspace_out);
  m.impl("logspace.out", logspace_out);
  m.impl("eye.out", eye_out);
  m.impl("eye.m_out", eye_m_out);
}

}  // namespace tpu::torch_bridge
