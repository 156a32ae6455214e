// Random ops on the device generator: uniform_, normal_ (and normal's tensor forms), bernoulli_,
// random_, exponential_, cauchy_, log_normal_, geometric_, and dropout's forward/backward.
//
// A draw reserves an offset range of the tpu generator's Philox stream (seed, offset) and passes
// both to the program as a runtime parameter, so results depend only on the generator state:
// manual_seed and get/set_rng_state replay them exactly. Values differ from the CPU generator's,
// as CUDA's do. Argument checks come from ATen's own DistributionTemplates (PyTorch's messages);
// the values are built in IR from the Philox bits.
#include <ATen/MemoryOverlap.h>
#include <ATen/native/DistributionTemplates.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <mutex>

#include "torch/generator.h"
#include "torch/lower/random_util.h"

namespace tpu::torch_bridge {
namespace {

using at::native::templates::bernoulli_impl_;
using at::native::templates::bernoulli_out_impl;
using at::native::templates::cauchy_impl_;
using at::native::templates::exponential_impl_;
using at::native::templates::geometric_impl_;
using at::native::templates::log_normal_impl_;
using at::native::templates::normal_impl_;
using at::native::templates::random_from_to_impl;
using at::native::templates::random_impl;
using at::native::templates::uniform_impl_;

}  // namespace

// ---- building blocks (random_util.h) ---------------------------------------------------------
// `words` ui32 Philox words [words] from the generator (the device default or `gen`).
int RandomWords(Lowering& l, const std::optional<at::Generator>& gen, const at::Tensor& like, int64_t words) {
  TpuGenerator* g = GetGenerator(gen, like.device().index());
  std::pair<uint64_t, uint64_t> state;
  {
    std::lock_guard<std::mutex> lock(g->mutex_);
    state = g->Reserve(words);
  }
  return l.b().RngBits(l.RngState(g, state, words), {words});
}

// The low `bits` (<= 31) bits of each word, as non-negative `dtype` values. (Masks stay below
// 2^31, so the result never depends on whether ui32 is read as signed.)
int LowBits(Builder& b, int words, int bits, DType dtype) {
  int m = b.Binary(OpCode::kAnd, words, b.ScalarLike(static_cast<double>((int64_t{1} << bits) - 1), words));
  return b.Convert(m, dtype);
}

namespace {

Dims Range(int64_t n) {
  Dims d(n);
  for (int64_t i = 0; i < n; ++i) d[i] = i;
  return d;
}

int Slice1(Builder& b, int v, int64_t lo, int64_t hi) { return b.Slice(v, {lo}, {hi}, {1}); }

int Mul(Builder& b, int x, double c) { return b.Binary(OpCode::kMultiply, x, b.ScalarLike(c, x)); }

}  // namespace

// n uniform values in [0, 1) from the low `digits` bits of the words, as PyTorch's uniform_real
// does (the same distribution as the high bits; the IR has no shift op): f64
// for digits > 24 (two words each), else f32.
int Uniform01(Lowering& l, const std::optional<at::Generator>& gen, const at::Tensor& like, int64_t n, int digits) {
  Builder& b = l.b();
  if (digits <= 24) {
    int w = RandomWords(l, gen, like, n);
    return Mul(b, LowBits(b, w, digits, DType::kF32), std::ldexp(1.0, -digits));
  }
  int w = RandomWords(l, gen, like, 2 * n);
  int hi = LowBits(b, Slice1(b, w, 0, n), 26, DType::kF64);
  int lo = LowBits(b, Slice1(b, w, n, 2 * n), 27, DType::kF64);
  return Mul(b, b.Binary(OpCode::kAdd, Mul(b, hi, std::ldexp(1.0, 27)), lo), std::ldexp(1.0, -53));
}

namespace {

int Digits(at::ScalarType t) {
  switch (t) {
    case at::kDouble: return 53;
    case at::kHalf: return 11;
    case at::kBFloat16: return 8;
    default: return 24;
  }
}

// n standard normal values (Box-Muller on pairs of uniforms; log1p(-u) never sees 0), in f64 for
// double results and f32 otherwise.
int StandardNormal(Lowering& l, const std::optional<at::Generator>& gen, const at::Tensor& like, int64_t n,
                   at::ScalarType t) {
  Builder& b = l.b();
  int64_t half = (n + 1) / 2;
  int u = Uniform01(l, gen, like, 2 * half, t == at::kDouble ? 53 : 24);
  int u1 = Slice1(b, u, 0, half), u2 = Slice1(b, u, half, 2 * half);
  int r = b.Unary(OpCode::kSqrt, Mul(b, b.Unary(OpCode::kLog1p, b.Unary(OpCode::kNegate, u1)), -2.0));
  int theta = Mul(b, u2, 2 * M_PI);
  int z = b.Concatenate({b.Binary(OpCode::kMultiply, r, b.Unary(OpCode::kCosine, theta)),
                         b.Binary(OpCode::kMultiply, r, b.Unary(OpCode::kSine, theta))}, 0);
  return n == 2 * half ? z : Slice1(b, z, 0, n);
}

// Writes the flat [numel] value v into `self` (any strides).
void WriteFlat(Lowering& l, int v, const at::Tensor& self) {
  l.Output(l.b().Reshape(v, ToDims(self.sizes())), self);
  l.Run();
}

int ScalarVec(Lowering& l, double v, at::ScalarType t, int64_t n) { return l.b().BroadcastTo(l.Scalar(v, t), {n}); }

// ---- kernels plugged into ATen's DistributionTemplates ---------------------------------------
template <typename RNG>
struct UniformKernel {
  void operator()(at::TensorIteratorBase& iter, double from, double to, std::optional<at::Generator> gen) {
    const at::Tensor& self = iter.tensor(0);
    c10::DeviceGuard guard(self.device());
    at::ScalarType t = self.scalar_type(), ct = t == at::kDouble ? at::kDouble : at::kFloat;
    int64_t n = self.numel();
    Lowering l("aten::uniform_");
    Builder& b = l.b();
    int u = Uniform01(l, gen, self, n, Digits(t));
    // Parameters in a fixed order (not left to argument evaluation order): range, then from.
    int range = ScalarVec(l, to - from, ct, n);
    int lo = ScalarVec(l, from, ct, n);
    int v = b.Binary(OpCode::kAdd, b.Binary(OpCode::kMultiply, u, range), lo);
    WriteFlat(l, v, self);
  }
};

template <typename RNG>
struct NormalKernel {
  void operator()(const at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
    if (self.numel() == 0) return;
    TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()), "\"normal_kernel_cpu\" not implemented for '",
                                toString(self.scalar_type()), "'");
    c10::DeviceGuard guard(self.device());
    at::ScalarType t = self.scalar_type(), ct = t == at::kDouble ? at::kDouble : at::kFloat;
    int64_t n = self.numel();
    Lowering l("aten::normal_");
    Builder& b = l.b();
    int z = StandardNormal(l, gen, self, n, t);
    int sd = ScalarVec(l, std, ct, n);  // parameters in a fixed order: std, then mean
    int mu = ScalarVec(l, mean, ct, n);
    WriteFlat(l, b.Binary(OpCode::kAdd, b.Binary(OpCode::kMultiply, z, sd), mu), self);
  }
};

template <typename RNG>
struct ExponentialKernel {
  void operator()(at::TensorIteratorBase& iter, double lambda, std::optional<at::Generator> gen) {
    const at::Tensor& self = iter.tensor(0);
    TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()), "\"exponential_cpu\" not implemented for '",
                                toString(self.scalar_type()), "'");
    c10::DeviceGuard guard(self.device());
    at::ScalarType t = self.scalar_type(), ct = t == at::kDouble ? at::kDouble : at::kFloat;
    int64_t n = self.numel();
    Lowering l("aten::exponential_");
    Builder& b = l.b();
    int u = Uniform01(l, gen, self, n, t == at::kDouble ? 53 : 24);
    // -log(1 - u) / lambda, as PyTorch's CPU transformation: finite, and 0 only when u == 0.
    int e = b.Unary(OpCode::kNegate, b.Unary(OpCode::kLog1p, b.Unary(OpCode::kNegate, u)));
    WriteFlat(l, b.Binary(OpCode::kDivide, e, ScalarVec(l, lambda, ct, n)), self);
  }
};

// median + sigma * tan(pi * (u - 1/2)), PyTorch's transformation of a uniform u in [0, 1).
template <typename RNG>
struct CauchyKernel {
  void operator()(at::TensorIteratorBase& iter, double median, double sigma, std::optional<at::Generator> gen) {
    const at::Tensor& self = iter.tensor(0);
    c10::DeviceGuard guard(self.device());
    at::ScalarType t = self.scalar_type(), ct = t == at::kDouble ? at::kDouble : at::kFloat;
    int64_t n = self.numel();
    Lowering l("aten::cauchy_");
    Builder& b = l.b();
    int u = Uniform01(l, gen, self, n, t == at::kDouble ? 53 : 24);
    int a = Mul(b, b.Binary(OpCode::kSubtract, u, b.ScalarLike(0.5, u)), M_PI);
    int tan = b.Binary(OpCode::kDivide, b.Unary(OpCode::kSine, a), b.Unary(OpCode::kCosine, a));
    int s = ScalarVec(l, sigma, ct, n);  // parameters in a fixed order: sigma, then median
    int m = ScalarVec(l, median, ct, n);
    WriteFlat(l, b.Binary(OpCode::kAdd, b.Binary(OpCode::kMultiply, tan, s), m), self);
  }
};

// exp(mean + std * z) for a standard normal z.
template <typename RNG>
struct LogNormalKernel {
  void operator()(at::TensorIteratorBase& iter, double mean, double std, std::optional<at::Generator> gen) {
    const at::Tensor& self = iter.tensor(0);
    TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()), "\"log_normal_cpu\" not implemented for '",
                                toString(self.scalar_type()), "'");
    c10::DeviceGuard guard(self.device());
    at::ScalarType t = self.scalar_type(), ct = t == at::kDouble ? at::kDouble : at::kFloat;
    int64_t n = self.numel();
    Lowering l("aten::log_normal_");
    Builder& b = l.b();
    int z = StandardNormal(l, gen, self, n, t);
    int sd = ScalarVec(l, std, ct, n);  // parameters in a fixed order: std, then mean
    int mu = ScalarVec(l, mean, ct, n);
    WriteFlat(l, b.Unary(OpCode::kExp, b.Binary(OpCode::kAdd, b.Binary(OpCode::kMultiply, z, sd), mu)), self);
  }
};

// The number of Bernoulli(p) trials up to the first success: ceil(log(v) / log1p(-p)) for v
// uniform in (0, 1] (1 - u, so log(v) is finite; the same distribution as PyTorch's), >= 1.
// Computed in double; any dtype (as on the CPU), integers get the exact count.
template <typename RNG>
struct GeometricKernel {
  void operator()(at::TensorIteratorBase& iter, double p, std::optional<at::Generator> gen) {
    const at::Tensor& self = iter.tensor(0);
    TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != at::kBool, "\"geometric_cpu\" not implemented for 'Bool'");
    c10::DeviceGuard guard(self.device());
    int64_t n = self.numel();
    Lowering l("aten::geometric_");
    Builder& b = l.b();
    int u = Uniform01(l, gen, self, n, 53);
    int v = b.Binary(OpCode::kSubtract, b.ScalarLike(1.0, u), u);
    int denom = b.Unary(OpCode::kLog1p, b.Unary(OpCode::kNegate, ScalarVec(l, p, at::kDouble, n)));
    int k = b.Unary(OpCode::kCeil, b.Binary(OpCode::kDivide, b.Unary(OpCode::kLog, v), denom));
    WriteFlat(l, b.Binary(OpCode::kMaximum, k, b.ScalarLike(1.0, k)), self);
  }
};

// from + (random % range) for range in [1, 2^63], or every int64 value when full64.
void RandomInts(const at::Tensor& self, uint64_t range, int64_t from, bool full64, std::optional<at::Generator> gen) {
  TORCH_CHECK_NOT_IMPLEMENTED(full64 || range <= (uint64_t{1} << 63), "random_: a range of ", range,
                              " values is not supported on the tpu device (at most 2^63, or the full int64 range)");
  c10::DeviceGuard guard(self.device());
  int64_t n = self.numel();
  Lowering l("aten::random_");
  Builder& b = l.b();
  int v;
  if (!full64 && range <= (uint64_t{1} << 31)) {
    v = LowBits(b, RandomWords(l, gen, self, n), 31, DType::kI64);
  } else {  // 31 + 31 + 1 bits from three words (+ a sign bit from a fourth for full64)
    int w = RandomWords(l, gen, self, (full64 ? 4 : 3) * n);
    int hi = LowBits(b, Slice1(b, w, 0, n), 31, DType::kI64);
    int mid = LowBits(b, Slice1(b, w, n, 2 * n), 31, DType::kI64);
    int low = LowBits(b, Slice1(b, w, 2 * n, 3 * n), 1, DType::kI64);
    v = b.Binary(OpCode::kAdd, Mul(b, b.Binary(OpCode::kAdd, Mul(b, hi, std::ldexp(1.0, 31)), mid), 2.0), low);
    if (full64) {  // two's complement with a random sign bit spans every int64 value
      int sign = b.Compare(CompareDirection::kEQ, LowBits(b, Slice1(b, w, 3 * n, 4 * n), 1, DType::kI64), b.ScalarLike(1, v));
      v = b.Select(sign, b.Binary(OpCode::kAdd, v, b.BroadcastTo(l.Scalar(INT64_MIN, at::kLong), {n})), v);
    }
  }
  if (!full64) {
    if (range < (uint64_t{1} << 63))
      v = b.Binary(OpCode::kRemainder, v, b.BroadcastTo(l.Scalar(static_cast<int64_t>(range), at::kLong), {n}));
    v = b.Binary(OpCode::kAdd, v, b.BroadcastTo(l.Scalar(from, at::kLong), {n}));
  }
  WriteFlat(l, v, self);
}

template <typename RNG>
struct RandomFromToKernel {
  void operator()(at::TensorIteratorBase& iter, uint64_t range, int64_t from, std::optional<at::Generator> gen) {
    RandomInts(iter.tensor(0), range, from, false, gen);
  }
  void operator()(at::TensorIteratorBase& iter, std::optional<at::Generator> gen) {
    RandomInts(iter.tensor(0), 0, 0, true, gen);
  }
};

// random_() without bounds: [0, max] for integers, [0, 2^digits] for floats (PyTorch's ranges).
template <typename RNG>
struct RandomKernel {
  void operator()(at::TensorIteratorBase& iter, std::optional<at::Generator> gen) {
    const at::Tensor& self = iter.tensor(0);
    at::ScalarType t = self.scalar_type();
    uint64_t range;
    if (t == at::kBool) {
      range = 2;
    } else if (at::isFloatingType(t)) {
      range = (uint64_t{1} << Digits(t)) + 1;
    } else {
      range = AT_DISPATCH_INTEGRAL_TYPES(t, "random_", [&] { return static_cast<uint64_t>(std::numeric_limits<scalar_t>::max()) + 1; });
    }
    RandomInts(self, range, 0, false, gen);
  }
};

// self = (u < p) in self's dtype; p a runtime scalar (p_tensor undefined) or a tensor.
void Bernoulli(const at::Tensor& self, const at::Tensor& p_tensor, double p, std::optional<at::Generator> gen) {
  c10::DeviceGuard guard(self.device());
  int64_t n = self.numel();
  bool wide = p_tensor.defined() && p_tensor.scalar_type() == at::kDouble;
  at::ScalarType ct = wide ? at::kDouble : at::kFloat;
  Lowering l("aten::bernoulli_");
  Builder& b = l.b();
  int u = Uniform01(l, gen, self, n, wide ? 53 : 24);
  int pv;
  if (p_tensor.defined()) {
    at::Tensor pt = p_tensor.to(self.device()).expand(self.sizes());
    pv = b.Reshape(l.Input(pt, ct), {n});
    // Note [Check op]: CPU raises for a probability outside [0, 1] (NaN included).
    int ok = b.Binary(OpCode::kAnd, b.Compare(CompareDirection::kGE, pv, b.ScalarLike(0, pv)),
                      b.Compare(CompareDirection::kLE, pv, b.ScalarLike(1, pv)));
    pv = l.Checked(pv, ok, CheckKind::kProbabilityRange);
  } else {
    pv = ScalarVec(l, p, ct, n);
  }
  WriteFlat(l, b.Compare(CompareDirection::kLT, u, pv), self);
}

template <typename RNG>
struct BernoulliTensorKernel {
  void operator()(const at::Tensor& self, const at::Tensor& p, std::optional<at::Generator> gen) {
    TORCH_CHECK(at::isFloatingType(p.scalar_type()), "bernoulli_: expected a floating-point probability tensor, got ",
                p.scalar_type());
    Bernoulli(self, p, 0, gen);
  }
};

template <typename RNG>
struct BernoulliScalarKernel {
  void operator()(const at::Tensor& self, double p, std::optional<at::Generator> gen) { Bernoulli(self, at::Tensor(), p, gen); }
};

// ---- registered ops --------------------------------------------------------------------------
at::Tensor& uniform_(at::Tensor& self, double from, double to, std::optional<at::Generator> gen) {
  return uniform_impl_<UniformKernel, TpuGenerator>(self, from, to, gen);
}
at::Tensor& normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  return normal_impl_<NormalKernel, TpuGenerator>(self, mean, std, gen);
}
at::Tensor& exponential_(at::Tensor& self, double lambda, std::optional<at::Generator> gen) {
  return exponential_impl_<ExponentialKernel, TpuGenerator>(self, lambda, gen);
}
at::Tensor& cauchy_(at::Tensor& self, double median, double sigma, std::optional<at::Generator> gen) {
  return cauchy_impl_<CauchyKernel, TpuGenerator>(self, median, sigma, gen);
}
at::Tensor& log_normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  return log_normal_impl_<LogNormalKernel, TpuGenerator>(self, mean, std, gen);
}
at::Tensor& geometric_(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  return geometric_impl_<GeometricKernel, TpuGenerator>(self, p, gen);
}
at::Tensor& random_(at::Tensor& self, std::optional<at::Generator> gen) {
  return random_impl<RandomKernel, TpuGenerator>(self, gen);
}
at::Tensor& random_from(at::Tensor& self, int64_t from, std::optional<int64_t> to, std::optional<at::Generator> gen) {
  return random_from_to_impl<RandomFromToKernel, TpuGenerator>(self, from, to, gen);
}
at::Tensor& random_to(at::Tensor& self, int64_t to, std::optional<at::Generator> gen) {
  return random_from_to_impl<RandomFromToKernel, TpuGenerator>(self, 0, to, gen);
}
// The result must not write one element twice (an expanded tensor), as ATen's kernels check.
at::Tensor& bernoulli_tensor(at::Tensor& self, const at::Tensor& p, std::optional<at::Generator> gen) {
  at::assert_no_internal_overlap(self);
  return bernoulli_impl_<BernoulliTensorKernel, TpuGenerator>(self, p, gen);
}
at::Tensor& bernoulli_float(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  at::assert_no_internal_overlap(self);
  return bernoulli_impl_<BernoulliScalarKernel, TpuGenerator>(self, p, gen);
}
at::Tensor& bernoulli_out(const at::Tensor& self, std::optional<at::Generator> gen, at::Tensor& out) {
  at::assert_no_internal_overlap(out);
  return bernoulli_out_impl<BernoulliTensorKernel, TpuGenerator>(out, self, gen);
}

// normal(mean, std) with tensor arguments: out = z * std + mean, in one program.
void NormalTensorInto(const at::Tensor& out, const at::Tensor& mean, const at::Tensor& std, double mean_v, double std_v,
                      std::optional<at::Generator> gen) {
  if (std.defined()) {
    TORCH_CHECK(!std.is_complex(), "normal expects standard deviation to be non-complex");
  } else {
    TORCH_CHECK(std_v >= 0.0, "normal expects std >= 0.0, but found std ", std_v);
  }
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(out.scalar_type()), "\"normal_kernel_cpu\" not implemented for '",
                              toString(out.scalar_type()), "'");
  if (out.numel() == 0) return;
  c10::DeviceGuard guard(out.device());
  at::ScalarType ct = out.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  Dims dims = ToDims(out.sizes());
  int64_t n = out.numel();
  if (std.defined()) {
    // A negative std is an error, as on CPU and CUDA (a data-dependent check: one sync).
    Lowering check("aten::normal");
    int s = check.Input(std, ct);
    int mn = check.b().Reduce(s, check.b().Constant(std::numeric_limits<double>::infinity(), ToDType(ct)),
                              Range(std.dim()), ReduceKind::kMin);
    at::Tensor ok = at::empty({}, out.options().dtype(at::kBool));
    check.Output(check.b().Compare(CompareDirection::kGE, mn, check.b().ScalarLike(0, mn)), ok);
    check.Run();
    TORCH_CHECK(ok.item<bool>(), "normal expects all elements of std >= 0.0");
  }
  Lowering l("aten::normal");
  Builder& b = l.b();
  int z = b.Reshape(StandardNormal(l, gen, out, n, out.scalar_type()), dims);
  int sv = std.defined() ? b.BroadcastTo(l.Input(std, ct), dims) : b.BroadcastTo(l.Scalar(std_v, ct), dims);
  int mv = mean.defined() ? b.BroadcastTo(l.Input(mean, ct), dims) : b.BroadcastTo(l.Scalar(mean_v, ct), dims);
  l.Output(b.Binary(OpCode::kAdd, b.Binary(OpCode::kMultiply, z, sv), mv), out);
  l.Run();
}

at::Tensor normal_tf(const at::Tensor& mean, double std, std::optional<at::Generator> gen) {
  at::Tensor out = at::empty(mean.sizes(), mean.options());
  NormalTensorInto(out, mean, at::Tensor(), 0, std, gen);
  return out;
}
at::Tensor& normal_tf_out(const at::Tensor& mean, double std, std::optional<at::Generator> gen, at::Tensor& out) {
  at::native::resize_output(out, mean.sizes());
  NormalTensorInto(out, mean, at::Tensor(), 0, std, gen);
  return out;
}
at::Tensor normal_ft(double mean, const at::Tensor& std, std::optional<at::Generator> gen) {
  at::Tensor out = at::empty(std.sizes(), std.options());
  NormalTensorInto(out, at::Tensor(), std, mean, 0, gen);
  return out;
}
at::Tensor& normal_ft_out(double mean, const at::Tensor& std, std::optional<at::Generator> gen, at::Tensor& out) {
  at::native::resize_output(out, std.sizes());
  NormalTensorInto(out, at::Tensor(), std, mean, 0, gen);
  return out;
}
at::Tensor normal_tt(const at::Tensor& mean, const at::Tensor& std, std::optional<at::Generator> gen) {
  at::Tensor out = at::empty(at::infer_size(mean.sizes(), std.sizes()), mean.options());
  NormalTensorInto(out, mean, std, 0, 0, gen);
  return out;
}
at::Tensor& normal_tt_out(const at::Tensor& mean, const at::Tensor& std, std::optional<at::Generator> gen, at::Tensor& out) {
  at::native::resize_output(out, at::infer_size(mean.sizes(), std.sizes()));
  NormalTensorInto(out, mean, std, 0, 0, gen);
  return out;
}

// ---- dropout ---------------------------------------------------------------------------------
// Training: mask = u < 1-p (bool), out = x * mask / (1-p), one program; the mask is kept for the
// backward. Evaluation: out = copy of x, mask all true (as PyTorch's CPU kernel).
std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p, std::optional<bool> train) {
  if (input.numel() == 0) return {input, at::empty_like(input, input.options())};
  bool training = !train.has_value() || *train;
  TORCH_CHECK(!training || at::isFloatingType(input.scalar_type()),
              "result type Float can't be cast to the desired output type ", input.scalar_type());
  at::Tensor out = at::empty_like(input);
  at::Tensor mask = at::empty_like(input, input.options().dtype(at::kBool));
  c10::DeviceGuard guard(input.device());
  Lowering l("aten::native_dropout");
  Builder& b = l.b();
  Dims dims = ToDims(input.sizes());
  at::ScalarType ct = OpMath(input.scalar_type());
  int x = l.Input(input, ct);
  if (!training) {
    l.Output(x, out);
    l.Output(b.BroadcastTo(b.Constant(1, DType::kBool), dims), mask);
    l.Run();
    return {out, mask};
  }
  double p1m = 1. - p;
  double scale = p1m == 0 ? 0. : 1. / p1m;  // p = 1 drops everything, without 0 * inf
  int64_t n = input.numel();
  int u = Uniform01(l, std::nullopt, input, n, ct == at::kDouble ? 53 : 24);
  int keep = b.Reshape(b.Compare(CompareDirection::kLT, u, ScalarVec(l, p1m, ct == at::kDouble ? at::kDouble : at::kFloat, n)), dims);
  int kept = b.Select(keep, x, b.ScalarLike(0, x));
  l.Output(b.Binary(OpCode::kMultiply, kept, b.BroadcastTo(l.Scalar(scale, ct), dims)), out);
  l.Output(keep, mask);
  l.Run();
  return {out, mask};
}

at::Tensor native_dropout_backward(const at::Tensor& grad, const at::Tensor& mask, double scale) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "Mask should be Bool Scalar Type", mask.scalar_type());
  // grad * mask * scale with `scale` a Python float: an integer or bool grad gives the default
  // float dtype, as ATen's composite does.
  return LowerElementwise("aten::native_dropout_backward", {grad, mask}, Functional(), ResultKind::kFloat,
                          [&](Lowering& l, const ValueList& v, DType t) {
                            Builder& b = l.b();
                            int kept = b.Binary(OpCode::kMultiply, v[0], v[1]);
                            return b.Binary(OpCode::kMultiply, kept, b.BroadcastTo(l.Scalar(scale, ToScalarType(t)), b.TypeOf(kept).dims));
                          });
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("uniform_", uniform_);
  m.impl("normal_", normal_);
  m.impl("normal.Tensor_float", normal_tf);
  m.impl("normal.Tensor_float_out", normal_tf_out);
  m.impl("normal.float_Tensor", normal_ft);
  m.impl("normal.float_Tensor_out", normal_ft_out);
  m.impl("normal.Tensor_Tensor", normal_tt);
  m.impl("normal.Tensor_Tensor_out", normal_tt_out);
  m.impl("exponential_", exponential_);
  m.impl("cauchy_", cauchy_);
  m.impl("log_normal_", log_normal_);
  m.impl("geometric_", geometric_);
  m.impl("random_", random_);
  m.impl("random_.from", random_from);
  m.impl("random_.to", random_to);
  m.impl("bernoulli_.Tensor", bernoulli_tensor);
  m.impl("bernoulli_.float", bernoulli_float);
  m.impl("bernoulli.out", bernoulli_out);
  m.impl("native_dropout", native_dropout);
  m.impl("native_dropout_backward", native_dropout_backward);
}

}  // namespace tpu::torch_bridge
