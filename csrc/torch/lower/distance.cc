// cdist: _cdist_forward and _cdist_backward (torch.cdist and its gradients).
//
// cdist's composite chooses, for p = 2, between the matrix-multiply form (_euclidean_dist, a
// composite of native ops) and the direct form by compute_mode and the row counts, exactly as
// ATen's cdist_impl does here too. The direct form takes the differences of every pair of rows
// ([batch, r1, r2, m], materialized: memory grows as r1 * r2 * m) and reduces them with the CPU
// kernel's per-p formula: p = 0 counts non-zero differences, 1 sums |d|, 2 is sqrt(sum d^2), inf
// the max |d|, else (sum |d|^p)^(1/p). The backward uses the CPU kernel's gradients per p
// (0 where the distance is 0; for p < 1 also where a difference is 0). As on CPU, only float32
// and float64 are supported.
#include <ATen/ExpandUtils.h>
#include <torch/library.h>

#include <cmath>

#include "torch/lower/elementwise_util.h"

namespace tpu::torch_bridge {
namespace {

void CheckDtypes(const char* name, const at::Tensor& x1, const at::Tensor& x2) {
  TORCH_CHECK_NOT_IMPLEMENTED(x1.scalar_type() == at::kFloat || x1.scalar_type() == at::kDouble, "\"", name,
                              "\" not implemented for '", toString(x1.scalar_type()), "'");
  TORCH_CHECK(x2.scalar_type() == x1.scalar_type(), "expected scalar type ", x1.scalar_type(), " but found ",
              x2.scalar_type());
}

enum class Norm { kZero, kOne, kTwo, kInf, kLessThanTwo, kGeneral };

Norm NormOf(double p) {
  if (p == 0) return Norm::kZero;
  if (p == 1) return Norm::kOne;
  if (p == 2) return Norm::kTwo;
  if (std::isinf(p)) return Norm::kInf;
  return p < 2 ? Norm::kLessThanTwo : Norm::kGeneral;
}

// The sizes the rows broadcast to: (batch..., r, m) for each input.
struct Batched {
  std::vector<int64_t> batch;
  int64_t count = 1;  // product of the batch sizes
};

Batched BroadcastBatch(const at::Tensor& x1, const at::Tensor& x2) {
  Batched b;
  b.batch = at::infer_size(x1.sizes().slice(0, x1.dim() - 2), x2.sizes().slice(0, x2.dim() - 2));
  for (int64_t s : b.batch) b.count *= s;
  return b;
}

// x [batch..., r, m] expanded to the batch and viewed as [count, r, m].
int Rows(Lowering& l, const at::Tensor& x, const Batched& bt) {
  std::vector<int64_t> sizes = bt.batch;
  sizes.push_back(x.size(-2));
  sizes.push_back(x.size(-1));
  int v = l.b().BroadcastTo(l.Input(x), ToDims(sizes));
  return l.b().Reshape(v, {bt.count, x.size(-2), x.size(-1)});
}

// x1 [B, r1, m] - x2 [B, r2, m] for every pair: [B, r1, r2, m].
int PairDifferences(Builder& b, int x1, int x2) {
  Dims d1 = b.TypeOf(x1).dims, d2 = b.TypeOf(x2).dims;
  Dims out{d1[0], d1[1], d2[1], d1[2]};
  return b.Binary(OpCode::kSubtract, b.BroadcastInDim(x1, out, {0, 1, 3}), b.BroadcastInDim(x2, out, {0, 2, 3}));
}

at::Tensor cdist_forward(const at::Tensor& x1, const at::Tensor& x2, double p, std::optional<int64_t> compute_mode) {
  TORCH_CHECK(x1.dim() >= 2, "cdist only supports at least 2D tensors, X1 got: ", x1.dim(), "D");
  TORCH_CHECK(x2.dim() >= 2, "cdist only supports at least 2D tensors, X2 got: ", x2.dim(), "D");
  TORCH_CHECK(x1.size(-1) == x2.size(-1), "X1 and X2 must have the same number of columns. X1: ", x1.size(-1),
              " X2: ", x2.size(-1));
  TORCH_CHECK(at::isFloatingType(x1.scalar_type()), "cdist only supports floating-point dtypes, X1 got: ",
              x1.scalar_type());
  TORCH_CHECK(at::isFloatingType(x2.scalar_type()), "cdist only supports floating-point dtypes, X2 got: ",
              x2.scalar_type());
  TORCH_CHECK(p >= 0, "cdist only supports non-negative p values");
  TORCH_CHECK(x1.device().type() == x2.device().type(), "X1 and X2 must have the same device type. X1: ",
              x1.device().type(), " X2: ", x2.device().type());
  int64_t mode = compute_mode.value_or(0);
  TORCH_CHECK(mode >= 0 && mode <= 2, "possible modes: 0, 1, 2, but was: ", mode);
  int64_t r1 = x1.size(-2), r2 = x2.size(-2), m = x1.size(-1);
  Batched bt = BroadcastBatch(x1, x2);
  std::vector<int64_t> out_shape = bt.batch;
  out_shape.push_back(r1);
  out_shape.push_back(r2);
  if (r1 == 0 || r2 == 0 || bt.count == 0) return at::empty(out_shape, x1.options());
  if (m == 0) return at::zeros(out_shape, x1.options());
  if (p == 2 && (mode == 1 || (mode == 0 && (r1 > 25 || r2 > 25)))) {
    std::vector<int64_t> e1 = bt.batch, e2 = bt.batch;
    e1.insert(e1.end(), {r1, m});
    e2.insert(e2.end(), {r2, m});
    at::Tensor a = x1.expand(e1).contiguous().view({bt.count, r1, m});
    at::Tensor c = x2.expand(e2).contiguous().view({bt.count, r2, m});
    return at::_euclidean_dist(a, c).view(out_shape);
  }
  CheckDtypes("cdist", x1, x2);
  c10::DeviceGuard guard(x1.device());
  at::Tensor out = at::empty(out_shape, x1.options());
  Lowering l("aten::_cdist_forward");
  Builder& b = l.b();
  int rows1 = Rows(l, x1, bt);  // parameters in a fixed order: x1, x2 (then p)
  int rows2 = Rows(l, x2, bt);
  int a = b.Unary(OpCode::kAbs, PairDifferences(b, rows1, rows2));
  DType dt = b.TypeOf(a).dtype;
  int zero = b.Constant(0, dt);
  int r;
  switch (NormOf(p)) {
    case Norm::kZero:
      r = b.Reduce(b.Binary(OpCode::kMinimum, b.Unary(OpCode::kCeil, a), b.ScalarLike(1, a)), zero, {3}, ReduceKind::kAdd);
      break;
    case Norm::kOne: r = b.Reduce(a, zero, {3}, ReduceKind::kAdd); break;
    case Norm::kTwo: r = b.Unary(OpCode::kSqrt, b.Reduce(b.Binary(OpCode::kMultiply, a, a), zero, {3}, ReduceKind::kAdd)); break;
    case Norm::kInf: r = b.Reduce(a, zero, {3}, ReduceKind::kMax); break;
    default: {
      int pv = l.Scalar(p, x1.scalar_type());
      int sum = b.Reduce(b.Binary(OpCode::kPower, a, b.BroadcastTo(pv, b.TypeOf(a).dims)), zero, {3}, ReduceKind::kAdd);
      int inv = b.Binary(OpCode::kDivide, b.Constant(1, dt), pv);
      r = b.Binary(OpCode::kPower, sum, b.BroadcastTo(inv, b.TypeOf(sum).dims));
    }
  }
  l.Output(b.Reshape(r, ToDims(out_shape)), out);
  l.Run();
  return out;
}

// d/dx1 of cdist(x1, x2, p) contracted with grad: [batch..., r1, m].
at::Tensor cdist_backward(const at::Tensor& grad, const at::Tensor& x1, const at::Tensor& x2, double p,
                          const at::Tensor& cdist) {
  int64_t r1 = x1.size(-2), r2 = x2.size(-2), m = x1.size(-1);
  Batched bt = BroadcastBatch(x1, x2);
  if (r1 == 0 || r2 == 0 || m == 0 || bt.count == 0) return at::zeros_like(x1);
  CheckDtypes("cdist_backward", x1, x2);
  std::vector<int64_t> x1_shape = bt.batch;
  x1_shape.insert(x1_shape.end(), {r1, m});
  c10::DeviceGuard guard(x1.device());
  at::Tensor out = at::empty(x1_shape, x1.options());
  Norm norm = NormOf(p);
  Lowering l("aten::_cdist_backward");
  Builder& b = l.b();
  if (norm == Norm::kZero) {
    l.Output(b.BroadcastTo(b.Constant(0, ToDType(x1.scalar_type())), ToDims(x1_shape)), out);
    l.Run();
    return out;
  }
  int rows1 = Rows(l, x1, bt);  // parameters in a fixed order: x1, x2, grad, cdist (then p)
  int rows2 = Rows(l, x2, bt);
  int diff = PairDifferences(b, rows1, rows2);
  Dims pair = b.TypeOf(diff).dims;
  Dims grid{bt.count, r1, r2};
  auto per_pair = [&](const at::Tensor& t) {
    int v = b.Reshape(b.BroadcastTo(l.Input(t, x1.scalar_type()), ToDims(cdist.sizes())), grid);
    return b.BroadcastInDim(v, pair, {0, 1, 2});
  };
  int g = per_pair(grad);
  int dist = per_pair(cdist);
  int zero = b.ScalarLike(0, diff);
  int at_zero = b.Compare(CompareDirection::kEQ, dist, zero);
  int sign = b.Unary(OpCode::kSign, diff);
  int abs = b.Unary(OpCode::kAbs, diff);
  int r;
  switch (norm) {
    case Norm::kOne: r = b.Binary(OpCode::kMultiply, g, sign); break;
    case Norm::kTwo: r = b.Select(at_zero, zero, b.Binary(OpCode::kDivide, b.Binary(OpCode::kMultiply, g, diff), dist)); break;
    case Norm::kInf: {
      // grad * sign(d) where |d| is the maximum, as CPU's 1 - min(1, ceil(| |d| - dist |)).
      int off = b.Unary(OpCode::kCeil, b.Unary(OpCode::kAbs, b.Binary(OpCode::kSubtract, abs, dist)));
      int hit = b.Binary(OpCode::kSubtract, b.ScalarLike(1, off), b.Binary(OpCode::kMinimum, b.ScalarLike(1, off), off));
      r = b.Binary(OpCode::kMultiply, b.Binary(OpCode::kMultiply, g, sign), hit);
      break;
    }
    default: {
      int pv = b.BroadcastTo(l.Scalar(p, x1.scalar_type()), pair);
      int pm1 = b.Binary(OpCode::kSubtract, pv, b.ScalarLike(1, pv));
      int denom = b.Binary(OpCode::kPower, dist, pm1);
      int v;
      if (norm == Norm::kLessThanTwo) {
        v = b.Binary(OpCode::kMultiply, b.Binary(OpCode::kMultiply, sign, b.Binary(OpCode::kPower, abs, pm1)), g);
        v = b.Select(at_zero, zero, b.Binary(OpCode::kDivide, v, denom));
        if (p < 1) v = b.Select(b.Compare(CompareDirection::kEQ, diff, zero), zero, v);
      } else {
        int pm2 = b.Binary(OpCode::kSubtract, pv, b.ScalarLike(2, pv));
        v = b.Binary(OpCode::kMultiply, b.Binary(OpCode::kMultiply, diff, b.Binary(OpCode::kPower, abs, pm2)), g);
        v = b.Select(at_zero, zero, b.Binary(OpCode::kDivide, v, denom));
      }
      r = v;
    }
  }
  int sum = b.Reduce(r, b.Constant(0, b.TypeOf(r).dtype), {2}, ReduceKind::kAdd);  // over x2's rows
  l.Output(b.Reshape(sum, ToDims(x1_shape)), out);
  l.Run();
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_cdist_forward", cdist_forward);
  m.impl("_cdist_backward", cdist_backward);
}

}  // namespace tpu::torch_bridge
