// bincount and histc.
//
// bincount's length is max(input) + 1, known only from the data: a first program computes the
// min and max (the min for CPU's "non-negative" check), the host reads both (one sync), and a
// second program scatter-adds the ones (or weights) into zeros of that length. Weights
// accumulate in float32 for float32 weights and in float64 otherwise, as on CPU (whose
// sequential order we do not keep: float results agree to rounding).
//
// histc follows CPU's linear-interpolation binning in the input dtype: an element in
// [min, max] goes to bin (x - min) * bins / (max - min), truncated, with x == max in the last
// bin; elements outside and NaN are skipped. With min == max the range is the data's (one sync,
// as on CPU, which reads it too).
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

#include "torch/lower/index_util.h"
#include "torch/lower/reduce_util.h"

namespace tpu::torch_bridge {
namespace {

// min and max of a tensor, read on the host (one program, one sync).
std::pair<double, double> MinMax(const char* op, const at::Tensor& t) {
  bool fp = at::isFloatingType(t.scalar_type());
  at::Tensor mm = at::empty({2}, t.options().dtype(fp ? at::kDouble : at::kLong));
  {
    Lowering l(op);
    Builder& b = l.b();
    int x = b.Reshape(l.Input(t), {t.numel()});
    int lo = b.Reshape(ReduceAlong(l, x, {0}, ReduceKind::kMin), {1});
    int hi = b.Reshape(ReduceAlong(l, x, {0}, ReduceKind::kMax), {1});
    l.Output(b.Concatenate({lo, hi}, 0), mm);
    l.Run();
  }
  at::Tensor host = mm.cpu();
  if (!fp) return {static_cast<double>(host[0].item<int64_t>()), static_cast<double>(host[1].item<int64_t>())};
  return {host[0].item<double>(), host[1].item<double>()};
}

at::Tensor bincount(const at::Tensor& self, const std::optional<at::Tensor>& weights_opt, int64_t minlength) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isIntegralType(self.scalar_type(), /*includeBool=*/false),
                              "\"bincount_cpu\" not implemented for '", toString(self.scalar_type()), "'");
  TORCH_CHECK(minlength >= 0, "minlength should be >= 0");
  bool has_weights = weights_opt.has_value() && weights_opt->defined();
  if (self.dim() == 1 && self.numel() == 0) return at::zeros({minlength}, self.options().dtype(at::kLong));
  TORCH_CHECK(self.dim() == 1, "bincount only supports 1-d non-negative integral inputs.");
  c10::DeviceGuard guard(self.device());
  auto [lo, hi] = MinMax("aten::bincount", self);
  TORCH_CHECK(lo >= 0, "bincount only supports 1-d non-negative integral inputs.");
  TORCH_CHECK(hi < static_cast<double>(std::numeric_limits<int64_t>::max()),
              "maximum value of input overflowed, it should be < ", std::numeric_limits<int64_t>::max(), " but got ",
              hi);
  const at::Tensor* weights = has_weights ? &*weights_opt : nullptr;
  TORCH_CHECK(!weights || (weights->dim() == 1 && weights->size(0) == self.size(0)),
              "weights should be 1-d and have the same length as input");
  int64_t bins = std::max(static_cast<int64_t>(hi) + 1, minlength);
  at::ScalarType out_type = !weights ? at::kLong : weights->scalar_type() == at::kFloat ? at::kFloat : at::kDouble;
  at::Tensor out = at::empty({bins}, self.options().dtype(out_type));
  int64_t n = self.numel();
  Lowering l("aten::bincount");
  Builder& b = l.b();
  int idx = b.Reshape(l.Input(self, at::kLong), {n, 1});
  int upd = weights ? l.Input(*weights, out_type) : b.BroadcastTo(b.Constant(1, DType::kI64), {n});
  int zeros = b.BroadcastTo(b.Constant(0, ToDType(out_type)), {bins});
  l.Output(b.Scatter(zeros, idx, upd, {}, {0}, {0}, ReduceKind::kAdd, /*checked=*/false), out);
  l.Run();
  return out;
}

// ---- histc -----------------------------------------------------------------------------------
// CPU's outer edges: min/max as given, the data's range when equal, widened when still equal.
std::pair<double, double> HistcEdges(const at::Tensor& self, const at::Scalar& min, const at::Scalar& max) {
  double lo = min.to<double>(), hi = max.to<double>();
  if (lo == hi && self.numel() > 0) std::tie(lo, hi) = MinMax("aten::histc", self);
  if (lo == hi) {
    switch (self.scalar_type()) {
      case at::kDouble:
        lo = std::min(std::nexttoward(lo, std::numeric_limits<double>::lowest()), lo - 1.);
        hi = std::max(std::nexttoward(hi, std::numeric_limits<double>::max()), hi + 1.);
        break;
      case at::kFloat:
        lo = std::min(static_cast<double>(std::nexttoward(static_cast<float>(lo), std::numeric_limits<float>::lowest())),
                      lo - 1.);
        hi = std::max(static_cast<double>(std::nexttoward(static_cast<float>(hi), std::numeric_limits<float>::max())),
                      hi + 1.);
        break;
      default:
        lo -= 1;
        hi += 1;
    }
  }
  TORCH_CHECK(!(std::isinf(lo) || std::isinf(hi) || std::isnan(lo) || std::isnan(hi)), "torch.histc: range of [", lo,
              ", ", hi, "] is not finite");
  TORCH_CHECK(lo < hi, "torch.histc: max must be larger than min");
  return {lo, hi};
}

at::Tensor& HistcOut(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max,
                     at::Tensor& out) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()), "\"histogram_cpu\" not implemented for '",
                              toString(self.scalar_type()), "'");
  TORCH_CHECK(self.scalar_type() == out.scalar_type(), "torch.histogram: input tensor and hist tensor should have the "
              "same dtype, but got input ", self.scalar_type(), " and hist ", out.scalar_type());
  TORCH_CHECK(bins > 0, "torch.histogram(): bins must be > 0, but got ", bins, " for dimension 0");
  at::native::resize_output(out, {bins});
  c10::DeviceGuard guard(self.device());
  auto [lo, hi] = HistcEdges(self, min, max);
  at::ScalarType t = self.scalar_type();
  at::ScalarType acc = OpMath(t);
  int64_t n = self.numel();
  Lowering l("aten::histc");
  Builder& b = l.b();
  int zeros = b.BroadcastTo(b.Constant(0, ToDType(acc)), {bins});
  if (n == 0) {
    l.Output(zeros, out);
    l.Run();
    return out;
  }
  // Parameters: the input, then the edges and the bin count in its dtype (the CPU kernel's
  // arithmetic: each step rounded to the input dtype).
  int x = b.Reshape(l.Input(self), {n});
  int left = b.BroadcastTo(l.Scalar(lo, t), {n});
  int right = b.BroadcastTo(l.Scalar(hi, t), {n});
  int count = b.BroadcastTo(l.Scalar(static_cast<double>(bins), t), {n});
  int inside = b.Binary(OpCode::kAnd, b.Compare(CompareDirection::kGE, x, left), b.Compare(CompareDirection::kLE, x, right));
  int scaled = b.Binary(OpCode::kMultiply, b.Binary(OpCode::kSubtract, x, left), count);
  int pos = b.Convert(b.Binary(OpCode::kDivide, scaled, b.Binary(OpCode::kSubtract, right, left)), DType::kI64);
  int last = b.ScalarLike(static_cast<double>(bins - 1), pos);
  pos = b.Binary(OpCode::kMinimum, pos, last);  // x == max lands in the last bin
  // Skipped elements aim past the end (an unchecked scatter drops them).
  pos = b.Select(inside, pos, b.ScalarLike(static_cast<double>(bins), pos));
  int ones = b.BroadcastTo(b.Constant(1, ToDType(acc)), {n});
  l.Output(b.Scatter(zeros, b.Reshape(pos, {n, 1}), ones, {}, {0}, {0}, ReduceKind::kAdd, /*checked=*/false), out);
  l.Run();
  return out;
}

at::Tensor histc(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max) {
  at::Tensor out = at::empty({std::max<int64_t>(bins, 0)}, self.options());  // at its size: no resize
  return HistcOut(self, bins, min, max, out);
}

at::Tensor& histc_out(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max,
                      at::Tensor& out) {
  return HistcOut(self, bins, min, max, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("bincount", bincount);
  m.impl("histc", histc);
  m.impl("histc.out", histc_out);
}

}  // namespace tpu::torch_bridge
