#include "runtime/host/elementwise_simd.h"

#include <cmath>
#include <limits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/host/elementwise_simd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
#include "runtime/host/no_contract-inl.h"
#include "runtime/host/exp_log-inl.h"

HWY_BEFORE_NAMESPACE();
namespace tpu::host {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class F>
HWY_INLINE void Map1(const float* a, float* out, int64_t n, F f) {
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(f(d, hn::LoadU(d, a + i)), d, out + i);
  if (i < n) {  // tail through a lane-sized buffer
    HWY_ALIGN float ta[hn::MaxLanes(d)] = {}, to[hn::MaxLanes(d)];
    for (int64_t j = i; j < n; ++j) ta[j - i] = a[j];
    hn::Store(f(d, hn::Load(d, ta)), d, to);
    for (int64_t j = i; j < n; ++j) out[j] = to[j - i];
  }
}

template <class F>
HWY_INLINE void Map2(const float* a, const float* b, float* out, int64_t n, F f) {
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(f(d, hn::LoadU(d, a + i), hn::LoadU(d, b + i)), d, out + i);
  if (i < n) {
    HWY_ALIGN float ta[hn::MaxLanes(d)] = {}, tb[hn::MaxLanes(d)] = {}, to[hn::MaxLanes(d)];
    for (int64_t j = i; j < n; ++j) ta[j - i] = a[j], tb[j - i] = b[j];
    hn::Store(f(d, hn::Load(d, ta), hn::Load(d, tb)), d, to);
    for (int64_t j = i; j < n; ++j) out[j] = to[j - i];
  }
}

// Highway's exp/log are accurate only inside their valid ranges and return garbage outside them
// (exp(1000) ~ 1e-28, exp(nan) = 0, log(0) ~ -105, log(-1) ~ 177): give the IEEE results there.
template <class D, class V>
HWY_INLINE V ExpEdges(D d, V v, V r, float below_value) {
  const V inf = hn::Set(d, std::numeric_limits<float>::infinity());
  r = hn::IfThenElse(hn::Ge(v, hn::Set(d, 88.72283935546875f)), inf, r);  // > ln(FLT_MAX): overflow
  r = hn::IfThenElse(hn::Lt(v, hn::Set(d, -104.0f)), hn::Set(d, below_value), r);
  return hn::IfThenElse(hn::IsNaN(v), v, r);
}
template <class D, class V>
HWY_INLINE V IeeeExpm1(D d, V v) { return ExpEdges(d, v, hn::Expm1(d, v), -1.0f); }
template <class D, class V>
HWY_INLINE V IeeeLog1p(D d, V v) { return LogEdges(d, v, hn::Log1p(d, v), -1.0f); }

// 1 / (1 + exp(-x)) in the symmetric form: e = exp(-|x|) in (0, 1], q = 1 / (1 + e), the result
// q for x >= 0 and e * q below (no overflow anywhere: for x < -88.7 the result is e itself, down
// to the subnormals, where 1 / (1 + inf) gave 0). The reciprocal of 1 + e in (1, 2] is the
// hardware estimate (14 bits on AVX-512, 12 on AVX2, less on NEON) and two Newton steps, which
// reach float32's precision from any of them: within 2 ulp with AVX-512 (checked against double,
// elementwise_simd_test.cc), with no divide (a divide per vector was the kernel's bottleneck).
// NaN stays NaN (exp's), +-inf give 1 and 0.
template <class D, class V>
HWY_INLINE V Logistic(D d, V x) {
  const V one = hn::Set(d, 1.0f);
  const V e = IeeeExp(d, hn::Neg(hn::Abs(x)));
  const V den = hn::Add(one, e);
  V q = hn::ApproximateReciprocal(den);
  q = hn::MulAdd(q, hn::NegMulAdd(den, q, one), q);  // q += q * (1 - den * q), twice
  q = hn::MulAdd(q, hn::NegMulAdd(den, q, one), q);
  return hn::IfThenElse(hn::Lt(x, hn::Zero(d)), hn::Mul(e, q), q);
}

// erf on float32 within ~3 ulp (checked against double on a dense grid, elementwise_simd_test.cc):
//   |x| < 1: x * P(x^2), P of degree 6 fitted (least squares on Chebyshev nodes) to erf(x)/x;
//   1 <= |x| <= 4: sign(x) * (1 - exp(Q(u))), u = (|x| - 2.5) / 1.5, Q of degree 11 fitted to
//   log(erfc(|x|)); beyond 4, erf is 1 in float32 (erfc(3.92) is below half an ulp of 1).
// (Coefficients highest degree first, for Horner.)
constexpr float kErfSmallPoly[] = {7.897490619055108e-05f, -0.0008024124849801685f,
                                   0.005190025535326644f, -0.026854792130376396f,
                                   0.1128361196473341f, -0.3761262878806916f, 1.1283791664921252f};
constexpr float kErfLargePoly[] = {1.5374798958800095e-06f, -2.3671184560556647e-06f,
                                   -6.758737407407414e-06f, 4.7284416803320946e-05f,
                                   -0.00021748133932762495f, 0.0008763928294553119f,
                                   -0.0031965930934182807f, 0.010962973367189374f,
                                   -0.03664597834860688f, -2.1237609217750846f, -8.029021127094053f,
                                   -7.8068152724286906f};
template <class D, class V>
HWY_INLINE V Erf(D d, V x) {
  const V ax = hn::Abs(x);
  const V t = hn::Mul(x, x);
  const V p = Horner(d, t, kErfSmallPoly);
  const V small = hn::Mul(x, p);
  const V u = hn::Mul(hn::Sub(hn::Min(ax, hn::Set(d, 4.0f)), hn::Set(d, 2.5f)), hn::Set(d, 1.0f / 1.5f));
  const V q = Horner(d, u, kErfLargePoly);
  V large = hn::Sub(hn::Set(d, 1.0f), ScaledExpNormal(d, q, 1.0f));  // q in [-17.8, -1.8]
  large = hn::IfThenElse(hn::Gt(ax, hn::Set(d, 4.0f)), hn::Set(d, 1.0f), large);
  large = hn::CopySign(large, x);
  V r = hn::IfThenElse(hn::Lt(ax, hn::Set(d, 1.0f)), small, large);
  return hn::IfThenElse(hn::IsNaN(x), x, r);
}

// gelu(x) = x/2 * erfc(z), z = -x/sqrt(2), in one pass (Note [Region composites], composite.cc).
// The op-by-op chain computes 1 + erf(-z): for x < -2 that cancels (1 - 0.998...) and loses up to
// about 10 bits. Here erfc is computed directly: erfc(|z|) = exp(|z| * S(u)), u = |z|/2 - 1,
// S of degree 11 fitted (least squares on Chebyshev nodes, toward minimax) to log(erfc(z))/z on
// [0, 4] (within 1.1e-8); erfc(z) = 2 - erfc(|z|) for z < 0. For x >= 0 the result is within
// 3 ulp; for x < 0 it is exp(t), t = log(erfc(z)) rounded to float32, so within about
// |t| * 1.2e-7 relative (2e-6 at x = -4 sqrt(2), where erfc(4) = 1.5e-8) where the chain loses
// up to 10 bits; below -4 sqrt(2) the exact value is under 4.4e-8 in magnitude and the kernel
// returns -0, as the chain does. gelu(-inf) = 0, gelu(inf) = inf, NaN stays NaN
// (elementwise_simd_test.cc checks all of it against double).
constexpr float kGeluErfcPoly[] = {-1.631671875657048e-05f, 0.0001024153534672223f,
                                   -0.0002253218844998628f, 0.00024307794228661805f,
                                   3.918494621757418e-05f, -0.0013412802945822477f,
                                   0.0056578549556434155f, -0.017383895814418793f,
                                   0.045952096581459045f, -0.1118115559220314f,
                                   -1.7356902360916138f, -2.6824705600738525f};
template <class D, class V>
HWY_INLINE V GeluErf(D d, V x) {
  const V z = hn::Mul(x, hn::Set(d, static_cast<float>(-M_SQRT1_2)));
  const V az = hn::Min(hn::Abs(z), hn::Set(d, 4.0f));  // (Min(NaN, 4) may be 4: x stays NaN below)
  const V u = hn::MulAdd(az, hn::Set(d, 0.5f), hn::Set(d, -1.0f));
  const V s = Horner(d, u, kGeluErfcPoly);
  const V e = ScaledExpNormal(d, hn::Mul(az, s), 0.5f);  // erfc(|z|) / 2; the argument is in [-17.8, 0]
  V phi = hn::IfThenElse(hn::Lt(z, hn::Zero(d)), hn::Sub(hn::Set(d, 1.0f), e), e);  // Phi(x)
  phi = hn::IfThenZeroElse(hn::Gt(z, hn::Set(d, 4.0f)), phi);  // x < -4 sqrt(2): x * 0 = -0
  return hn::IfThenZeroElse(hn::Eq(x, hn::Set(d, -std::numeric_limits<float>::infinity())), hn::Mul(x, phi));
}

void GeluErfF32(const float* x, float* out, int64_t n) {
  Map1(x, out, n, [](auto d, auto v) { return GeluErf(d, v); });
}

// gelu's erf-form derivative times dy, the backward lowering's formula (activation.cc):
// dy * (0.5 * (1 + erf(x / sqrt 2)) + x * (exp(-x^2 / 2) / sqrt(2 pi))), with the chain's own
// erf and exp, and x * pdf + cdf as one fused multiply-add.
void GeluErfBackwardF32(const float* x, const float* dy, float* out, int64_t n) {
  Map2(x, dy, out, n, [](auto d, auto v, auto g) {
    const auto cdf = hn::Mul(hn::Set(d, 0.5f), hn::Add(hn::Set(d, 1.0f), Erf(d, hn::Mul(v, hn::Set(d, static_cast<float>(M_SQRT1_2))))));
    const auto ex = IeeeExp(d, hn::Mul(hn::Mul(v, v), hn::Set(d, -0.5f)));
    const auto pdf = hn::Mul(hn::Set(d, static_cast<float>(M_2_SQRTPI * M_SQRT1_2 * 0.5)), ex);
    return hn::Mul(g, hn::MulAdd(v, pdf, cdf));
  });
}

// silu and its backward as the lowerings' chains compute them (activation.cc), op for op and
// rounding for rounding -- the logistic is the kLogistic kernel's, and the one product an add
// reads passes through Rounded() -- so the same bits in one pass (Note [Region composites]).
void SiluF32(const float* x, float* out, int64_t n) {
  Map1(x, out, n, [](auto d, auto v) { return hn::Mul(v, Logistic(d, v)); });
}
void SiluBackwardF32(const float* x, const float* dy, float* out, int64_t n) {
  Map2(x, dy, out, n, [](auto d, auto v, auto g) {
    const auto one = hn::Set(d, 1.0f);
    const auto s = Logistic(d, v);
    const auto inner = hn::Add(one, Rounded(hn::Mul(v, hn::Sub(one, s))));
    return hn::Mul(hn::Mul(g, s), inner);
  });
}

bool UnaryF32(int code_int, const float* a, float* out, int64_t n) {
  switch (static_cast<OpCode>(code_int)) {
    case OpCode::kNegate: Map1(a, out, n, [](auto d, auto v) { return hn::Neg(v); }); return true;
    case OpCode::kAbs: Map1(a, out, n, [](auto d, auto v) { return hn::Abs(v); }); return true;
    case OpCode::kSqrt: Map1(a, out, n, [](auto d, auto v) { return hn::Sqrt(v); }); return true;
    case OpCode::kRsqrt:
      Map1(a, out, n, [](auto d, auto v) { return hn::Div(hn::Set(d, 1.0f), hn::Sqrt(v)); });
      return true;
    case OpCode::kExp: Map1(a, out, n, [](auto d, auto v) { return IeeeExp(d, v); }); return true;
    case OpCode::kExpm1: Map1(a, out, n, [](auto d, auto v) { return IeeeExpm1(d, v); }); return true;
    case OpCode::kLog: Map1(a, out, n, [](auto d, auto v) { return IeeeLog(d, v); }); return true;
    case OpCode::kLog1p: Map1(a, out, n, [](auto d, auto v) { return IeeeLog1p(d, v); }); return true;
    case OpCode::kTanh: Map1(a, out, n, [](auto d, auto v) { return hn::Tanh(d, v); }); return true;
    case OpCode::kLogistic: Map1(a, out, n, [](auto d, auto v) { return Logistic(d, v); }); return true;
    case OpCode::kFloor: Map1(a, out, n, [](auto d, auto v) { return hn::Floor(v); }); return true;
    case OpCode::kCeil: Map1(a, out, n, [](auto d, auto v) { return hn::Ceil(v); }); return true;
    case OpCode::kRoundNearestEven: Map1(a, out, n, [](auto d, auto v) { return hn::Round(v); }); return true;
    case OpCode::kErf: Map1(a, out, n, [](auto d, auto v) { return Erf(d, v); }); return true;
    default: return false;
  }
}

// r[i] = r[0] for i < n (a broadcast operand's value spread over a tile): whole vectors from r
// itself (tiles are 64-byte aligned: a store from r + 1 would cross a cache line every time),
// where the compiler's fill of the baseline build stored 16 bytes at a time.
template <typename T>
HWY_INLINE void Splat(T* r, int64_t n) {
  const hn::ScalableTag<T> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const auto v = hn::Set(d, r[0]);
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(v, d, r + i);
  for (; i < n; ++i) r[i] = hn::GetLane(v);
}
void SplatU32(uint32_t* r, int64_t n) { Splat(r, n); }
void SplatU64(uint64_t* r, int64_t n) { Splat(r, n); }

void ShiftExpF32(const float* x, float m, float* s, float* e, int64_t n) {
  const hn::ScalableTag<float> d;
  const auto vm = hn::Set(d, m);
  if (s && s != e) {  // one pass, both stores
    const int64_t N = static_cast<int64_t>(hn::Lanes(d));
    int64_t i = 0;
    for (; i + N <= n; i += N) {
      const auto v = hn::Sub(hn::LoadU(d, x + i), vm);
      hn::StoreU(v, d, s + i);
      hn::StoreU(IeeeExp(d, v), d, e + i);
    }
    if (i < n) {
      Map1(x + i, s + i, n - i, [&](auto d, auto v) { return hn::Sub(v, vm); });
      Map1(s + i, e + i, n - i, [](auto d, auto v) { return IeeeExp(d, v); });
    }
  } else {
    Map1(x, e, n, [&](auto d, auto v) { return IeeeExp(d, hn::Sub(v, vm)); });
  }
}

// a[i] / b (Note [Division by a scalar], exp_log-inl.h).
void DivideByScalar(const float* a, float b, float* out, int64_t n) {
  const hn::ScalableTag<float> d0;
  const bool usable = ScalarQuotientUsable(b);
  const auto vb = hn::Set(d0, b), vr = hn::Set(d0, usable ? 1.0f / b : 1.0f);
  Map1(a, out, n, [&](auto d, auto v) { return QuotientByScalar(d, v, vb, vr, usable); });
}

bool BinaryF32(int code_int, const float* a, const float* b, float* out, int64_t n) {
  switch (static_cast<OpCode>(code_int)) {
    case OpCode::kAdd: Map2(a, b, out, n, [](auto d, auto x, auto y) { return hn::Add(x, y); }); return true;
    case OpCode::kSubtract: Map2(a, b, out, n, [](auto d, auto x, auto y) { return hn::Sub(x, y); }); return true;
    case OpCode::kMultiply: Map2(a, b, out, n, [](auto d, auto x, auto y) { return hn::Mul(x, y); }); return true;
    case OpCode::kDivide: Map2(a, b, out, n, [](auto d, auto x, auto y) { return hn::Div(x, y); }); return true;
    case OpCode::kMaximum:
      // NaN-propagating like StableHLO and PyTorch: pick x where x is NaN (IsNaN, not Ne(x, x):
      // x86 compares are ordered, so Ne(NaN, NaN) is false).
      Map2(a, b, out, n, [](auto d, auto x, auto y) {
        return hn::IfThenElse(hn::Or(hn::Gt(x, y), hn::IsNaN(x)), x, y);
      });
      return true;
    case OpCode::kMinimum:
      Map2(a, b, out, n, [](auto d, auto x, auto y) {
        return hn::IfThenElse(hn::Or(hn::Lt(x, y), hn::IsNaN(x)), x, y);
      });
      return true;
    default: return false;
  }
}

// Integer binary ops that wrap like the scalar loops (two's complement), for i64 and i32 registers.
template <typename T>
bool BinaryInt(int code_int, const T* a, const T* b, T* out, int64_t n) {
  const hn::ScalableTag<T> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  auto go = [&](auto f) {
    int64_t i = 0;
    for (; i + N <= n; i += N) hn::StoreU(f(hn::LoadU(d, a + i), hn::LoadU(d, b + i)), d, out + i);
    if (i < n) {
      HWY_ALIGN T ta[hn::MaxLanes(d)] = {}, tb[hn::MaxLanes(d)] = {}, to[hn::MaxLanes(d)];
      for (int64_t j = i; j < n; ++j) ta[j - i] = a[j], tb[j - i] = b[j];
      hn::Store(f(hn::Load(d, ta), hn::Load(d, tb)), d, to);
      for (int64_t j = i; j < n; ++j) out[j] = to[j - i];
    }
  };
  switch (static_cast<OpCode>(code_int)) {
    case OpCode::kAdd: go([](auto x, auto y) { return hn::Add(x, y); }); return true;
    case OpCode::kSubtract: go([](auto x, auto y) { return hn::Sub(x, y); }); return true;
    case OpCode::kMultiply: go([](auto x, auto y) { return hn::Mul(x, y); }); return true;
    case OpCode::kAnd: go([](auto x, auto y) { return hn::And(x, y); }); return true;
    case OpCode::kOr: go([](auto x, auto y) { return hn::Or(x, y); }); return true;
    case OpCode::kXor: go([](auto x, auto y) { return hn::Xor(x, y); }); return true;
    case OpCode::kMaximum: go([](auto x, auto y) { return hn::Max(x, y); }); return true;
    case OpCode::kMinimum: go([](auto x, auto y) { return hn::Min(x, y); }); return true;
    default: return false;
  }
}
bool BinaryI64(int code, const int64_t* a, const int64_t* b, int64_t* out, int64_t n) {
  return BinaryInt(code, a, b, out, n);
}
bool BinaryI32(int code, const int32_t* a, const int32_t* b, int32_t* out, int64_t n) {
  return BinaryInt(code, a, b, out, n);
}

// out[i] = a[i] <dir> b[i] for int64 (0/1 as int32): the one-hot compares of nll_loss, index
// masks and iota comparisons run on int64; the plain loop was scalar (x86-64's baseline has no
// 64-bit vector compare).
bool CompareI64(int dir, const int64_t* a, const int64_t* b, int32_t* out, int64_t n) {
  const hn::ScalableTag<int64_t> d;
  const hn::RebindToUnsigned<decltype(d)> du;
  const hn::Rebind<uint32_t, decltype(du)> d32;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  auto go = [&](auto cmp) {
    int64_t i = 0;
    for (; i + N <= n; i += N) {
      const auto one = hn::IfThenElseZero(cmp(hn::LoadU(d, a + i), hn::LoadU(d, b + i)), hn::Set(d, 1));
      hn::StoreU(hn::TruncateTo(d32, hn::BitCast(du, one)), d32, reinterpret_cast<uint32_t*>(out + i));
    }
    for (; i < n; ++i) out[i] = hn::GetLane(hn::IfThenElseZero(cmp(hn::Set(d, a[i]), hn::Set(d, b[i])), hn::Set(d, 1))) != 0;
  };
  switch (static_cast<CompareDirection>(dir)) {
    case CompareDirection::kEQ: go([](auto x, auto y) { return hn::Eq(x, y); }); return true;
    case CompareDirection::kNE: go([](auto x, auto y) { return hn::Not(hn::Eq(x, y)); }); return true;
    case CompareDirection::kLT: go([](auto x, auto y) { return hn::Lt(x, y); }); return true;
    case CompareDirection::kLE: go([](auto x, auto y) { return hn::Not(hn::Gt(x, y)); }); return true;
    case CompareDirection::kGT: go([](auto x, auto y) { return hn::Gt(x, y); }); return true;
    case CompareDirection::kGE: go([](auto x, auto y) { return hn::Not(hn::Lt(x, y)); }); return true;
  }
  return false;
}

bool CompareF32(int dir, const float* a, const float* b, int32_t* out, int64_t n) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  auto go = [&](auto cmp) {
    int64_t i = 0;
    for (; i + N <= n; i += N) {
      auto m = hn::RebindMask(di, cmp(hn::LoadU(d, a + i), hn::LoadU(d, b + i)));
      hn::StoreU(hn::IfThenElseZero(m, hn::Set(di, 1)), di, out + i);
    }
    for (; i < n; ++i) {
      auto m = hn::RebindMask(di, cmp(hn::Set(d, a[i]), hn::Set(d, b[i])));
      out[i] = hn::GetLane(hn::IfThenElseZero(m, hn::Set(di, 1)));
    }
  };
  switch (static_cast<CompareDirection>(dir)) {  // IEEE: every comparison with NaN is false but NE
    case CompareDirection::kEQ: go([](auto x, auto y) { return hn::Eq(x, y); }); return true;
    case CompareDirection::kNE: go([](auto x, auto y) { return hn::Not(hn::Eq(x, y)); }); return true;
    case CompareDirection::kLT: go([](auto x, auto y) { return hn::Lt(x, y); }); return true;
    case CompareDirection::kLE: go([](auto x, auto y) { return hn::Le(x, y); }); return true;
    case CompareDirection::kGT: go([](auto x, auto y) { return hn::Gt(x, y); }); return true;
    case CompareDirection::kGE: go([](auto x, auto y) { return hn::Ge(x, y); }); return true;
  }
  return false;
}

void SelectF32(const int32_t* p, const float* a, const float* b, float* out, int64_t n) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    auto m = hn::RebindMask(d, hn::Ne(hn::LoadU(di, p + i), hn::Zero(di)));
    hn::StoreU(hn::IfThenElse(m, hn::LoadU(d, a + i), hn::LoadU(d, b + i)), d, out + i);
  }
  for (; i < n; ++i) out[i] = p[i] ? a[i] : b[i];
}

}  // namespace HWY_NAMESPACE
}  // namespace tpu::host
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tpu::host {
HWY_EXPORT(UnaryF32);
HWY_EXPORT(GeluErfF32);
HWY_EXPORT(GeluErfBackwardF32);
HWY_EXPORT(SiluF32);
HWY_EXPORT(SiluBackwardF32);
HWY_EXPORT(ShiftExpF32);
HWY_EXPORT(DivideByScalar);
HWY_EXPORT(SplatU32);
HWY_EXPORT(SplatU64);
HWY_EXPORT(BinaryF32);
HWY_EXPORT(CompareF32);
HWY_EXPORT(CompareI64);
HWY_EXPORT(BinaryI64);
HWY_EXPORT(BinaryI32);

bool BinaryI64Simd(OpCode code, const int64_t* a, const int64_t* b, int64_t* out, int64_t n) {
  return HWY_DYNAMIC_DISPATCH(BinaryI64)(static_cast<int>(code), a, b, out, n);
}
bool BinaryI32Simd(OpCode code, const int32_t* a, const int32_t* b, int32_t* out, int64_t n) {
  return HWY_DYNAMIC_DISPATCH(BinaryI32)(static_cast<int>(code), a, b, out, n);
}
HWY_EXPORT(SelectF32);

bool CompareF32Simd(CompareDirection dir, const float* a, const float* b, int32_t* out, int64_t n) {
  return HWY_DYNAMIC_DISPATCH(CompareF32)(static_cast<int>(dir), a, b, out, n);
}
bool CompareI64Simd(CompareDirection dir, const int64_t* a, const int64_t* b, int32_t* out, int64_t n) {
  return HWY_DYNAMIC_DISPATCH(CompareI64)(static_cast<int>(dir), a, b, out, n);
}
void SelectF32Simd(const int32_t* p, const float* a, const float* b, float* out, int64_t n) {
  HWY_DYNAMIC_DISPATCH(SelectF32)(p, a, b, out, n);
}

void GeluErfF32Simd(const float* x, float* out, int64_t n) { HWY_DYNAMIC_DISPATCH(GeluErfF32)(x, out, n); }
void GeluErfBackwardF32Simd(const float* x, const float* dy, float* out, int64_t n) {
  HWY_DYNAMIC_DISPATCH(GeluErfBackwardF32)(x, dy, out, n);
}
void SiluF32Simd(const float* x, float* out, int64_t n) { HWY_DYNAMIC_DISPATCH(SiluF32)(x, out, n); }
void SiluBackwardF32Simd(const float* x, const float* dy, float* out, int64_t n) {
  HWY_DYNAMIC_DISPATCH(SiluBackwardF32)(x, dy, out, n);
}
bool UnaryF32Simd(OpCode code, const float* a, float* out, int64_t n) {
  return HWY_DYNAMIC_DISPATCH(UnaryF32)(static_cast<int>(code), a, out, n);
}
bool BinaryF32Simd(OpCode code, const float* a, const float* b, float* out, int64_t n) {
  return HWY_DYNAMIC_DISPATCH(BinaryF32)(static_cast<int>(code), a, b, out, n);
}
void SplatU32Simd(uint32_t* r, int64_t n) { HWY_DYNAMIC_DISPATCH(SplatU32)(r, n); }
void SplatU64Simd(uint64_t* r, int64_t n) { HWY_DYNAMIC_DISPATCH(SplatU64)(r, n); }
void DivideByScalarF32Simd(const float* a, float b, float* out, int64_t n) {
  HWY_DYNAMIC_DISPATCH(DivideByScalar)(a, b, out, n);
}
void ShiftExpF32Simd(const float* x, float m, float* s, float* e, int64_t n) {
  HWY_DYNAMIC_DISPATCH(ShiftExpF32)(x, m, s, e, n);
}
}  // namespace tpu::host
#endif
