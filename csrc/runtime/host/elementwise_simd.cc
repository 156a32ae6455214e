#include "runtime/host/elementwise_simd.h"

#include <cmath>
#include <limits>
#include <type_traits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/host/elementwise_simd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
#include "runtime/host/no_contract-inl.h"
#include "runtime/host/exp_log-inl.h"
#include "runtime/host/bf16-inl.h"

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

// out[i] = f(a[i], b[i]); an operand whose flag is set (AScalar, BScalar) is one value, a[0] or
// b[0], held in a register (Note [Scalar operands]).
template <bool AScalar = false, bool BScalar = false, class F>
HWY_INLINE void Map2(const float* a, const float* b, float* out, int64_t n, F f) {
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const auto va = hn::Set(d, AScalar ? a[0] : 0.0f), vb = hn::Set(d, BScalar ? b[0] : 0.0f);
  int64_t i = 0;
  for (; i + N <= n; i += N)
    hn::StoreU(f(d, AScalar ? va : hn::LoadU(d, a + i), BScalar ? vb : hn::LoadU(d, b + i)), d, out + i);
  if (i < n) {
    HWY_ALIGN float ta[hn::MaxLanes(d)] = {}, tb[hn::MaxLanes(d)] = {}, to[hn::MaxLanes(d)];
    for (int64_t j = i; j < n; ++j) ta[j - i] = a[AScalar ? 0 : j], tb[j - i] = b[BScalar ? 0 : j];
    hn::Store(f(d, hn::Load(d, ta), hn::Load(d, tb)), d, to);
    for (int64_t j = i; j < n; ++j) out[j] = to[j - i];
  }
}

// Map1 from bfloat16 to bfloat16: each value widened, f computed in float32, the result rounded
// to nearest even -- the bits of converting, running the float32 kernel and converting back.
template <class F>
HWY_INLINE void MapBf16(const uint16_t* a, uint16_t* out, int64_t n, F f) {
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + N <= n; i += N) StoreBf16(d, f(d, WidenBf16(d, a + i)), out + i);
  if (i < n) {
    HWY_ALIGN float ta[hn::MaxLanes(d)] = {}, to[hn::MaxLanes(d)];
    for (int64_t j = i; j < n; ++j) ta[j - i] = ScalarFromBf16(a[j]);
    hn::Store(f(d, hn::Load(d, ta)), d, to);
    for (int64_t j = i; j < n; ++j) out[j] = ScalarToBf16(to[j - i]);
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

// Note [Gelu by table]: the form above takes about 45 vector instructions a vector, most of them
// multiply-adds (the degree-11 fit and the exp): on AVX-512 it was compute-bound at 0.7 ns an
// element on one core, where PyTorch's CPU gelu takes 0.4. Where a vector holds 16 float32
// lanes the kernel instead computes Phi(-|x|) = erfc(|x| / sqrt 2) / 2 on
// |x| in [0, 4 sqrt 2] by a piecewise polynomial: 16 intervals of width h = sqrt(2) / 4 (as
// float32), on each a degree-6 fit in u = |x| - k h (weighted least squares toward minimax
// relative error), the coefficients of a lane's interval picked by one in-register table lookup
// per power (a lane permute, which runs beside the multiply-adds): about 25 instructions. No
// scaled z is formed, so its rounding does not enter. Phi(x) = 1 - Phi(-|x|) for x > 0. The
// same test holds it to the same bounds (1.8 ulp for x >= 0; 1.6e-7 * (1 + |t|) relative
// below); the lanes past 4 sqrt 2 in magnitude, rare in a gelu's input, take a branch that gives
// what the first form gives: -0 below -4 sqrt 2, 0 at -inf, NaN for NaN.
alignas(64) constexpr float kGeluPhiTable[7][16] = {  // [power, highest first][interval]
    {0.00141899684f, 0.00311122951f, 0.00255551864f, 0.000630166032f, -0.000970955472f,
     -0.00137343991f, -0.000888429291f, -0.000249742996f, 0.000114980649f, 0.00019302142f,
     0.000138501913f, 7.0001639e-05f, 2.76719566e-05f, 8.92474873e-06f, 2.40065901e-06f,
     5.45744626e-07f},
    {-0.0106557924f, -0.00730626844f, -0.000320779189f, 0.00522816647f, 0.00642709294f, 0.00416522427f,
     0.00114567799f, -0.000736574642f, -0.00122196367f, -0.00094368821f, -0.000521297043f,
     -0.000226909018f, -8.09649282e-05f, -2.41778162e-05f, -6.11823361e-06f, -1.3227932e-06f},
    {0.000164517769f, -0.0158230625f, -0.0229708701f, -0.0189651214f, -0.00872201286f, 0.000774487155f,
     0.00561811123f, 0.00605020439f, 0.00432115421f, 0.00238532689f, 0.00107271702f, 0.0004030329f,
     0.00012832247f, 3.49361544e-05f, 8.1828166e-06f, 1.65606991e-06f},
    {0.0664698556f, 0.0546484925f, 0.0259027537f, -0.00471909624f, -0.0244512241f, -0.0296172872f,
     -0.0245338418f, -0.0159425586f, -0.00852666888f, -0.00384034007f, -0.00147541263f,
     -0.000487407757f, -0.000139198703f, -3.44971922e-05f, -7.43945839e-06f, -1.39901022e-06f},
    {1.22758536e-06f, 0.0662512034f, 0.109847106f, 0.120548561f, 0.103776321f, 0.0739129186f,
     0.0445992313f, 0.0230893642f, 0.0103336163f, 0.0040175505f, 0.00136138231f, 0.000403028855f,
     0.000104420527f, 2.37084187e-05f, 4.72203737e-06f, 8.25693576e-07f},
    {-0.398942322f, -0.374771595f, -0.310696542f, -0.227310449f, -0.146762654f, -0.083622843f,
     -0.0420482233f, -0.0186587833f, -0.00730688684f, -0.00252519199f, -0.000770138635f,
     -0.000207279445f, -4.92329345e-05f, -1.03196953e-05f, -1.90892115e-06f, -3.11616418e-07f},
    {0.5f, 0.361836821f, 0.239750057f, 0.144422188f, 0.0786496103f, 0.0385499373f, 0.0169474315f,
     0.00666416343f, 0.00233886787f, 0.000731358654f, 0.000203476011f, 5.03109768e-05f,
     1.10452556e-05f, 2.15139175e-06f, 3.71548708e-07f, 5.68635521e-08f},
};
constexpr float kGeluTableStep = 0.353553385f;  // h = sqrt(2) / 4 as float32

template <class D, class V>
HWY_INLINE V GeluErfByTable(D d, V x) {
  const hn::RebindToSigned<D> di;
  const V ax = hn::Abs(x);
  // |x| below 16 h (the largest float32 under it; beyond it Phi(-|x|) < 1e-8); a NaN lane takes
  // that bound on x86 or stays NaN, and its result is NaN either way.
  const V a = hn::Min(ax, hn::Set(d, 5.65685368f));
  // The interval k = round(|x| / h - 1/2) in [0, 15], by the 1.5 * 2^23 rounding trick (k in the
  // low mantissa bits): floor(|x| / h), except that an |x| at an interval's end may take either
  // side, where u = 0 or h (the fits hold on their closed intervals).
  const V magic = hn::Set(d, 12582912.0f);
  const V t = hn::Add(hn::MulAdd(a, hn::Set(d, 1.0f / kGeluTableStep), hn::Set(d, -0.5f)), magic);
  const V u = hn::NegMulAdd(hn::Sub(t, magic), hn::Set(d, kGeluTableStep), a);
  const auto idx = hn::IndicesFromVec(d, hn::And(hn::BitCast(di, t), hn::Set(di, 15)));
  V e = hn::TableLookupLanes(hn::Load(d, kGeluPhiTable[0]), idx);
  for (int j = 1; j < 7; ++j) e = hn::MulAdd(e, u, hn::TableLookupLanes(hn::Load(d, kGeluPhiTable[j]), idx));
  const V phi = hn::IfThenElse(hn::Gt(x, hn::Zero(d)), hn::Sub(hn::Set(d, 1.0f), e), e);  // Phi(x)
  V r = hn::Mul(x, phi);
  const auto far = hn::Not(hn::Le(ax, hn::Set(d, 5.65685415f)));  // |x| > 16 h, or NaN
  if (HWY_UNLIKELY(!hn::AllFalse(d, far))) {
    const V ninf = hn::Set(d, -std::numeric_limits<float>::infinity());
    const auto below = hn::Lt(x, hn::Set(d, -5.65685415f));  // x * 0 = -0, and 0 at -inf
    r = hn::IfThenElse(below, hn::IfThenZeroElse(hn::Eq(x, ninf), hn::Set(d, -0.0f)), r);
  }
  return r;
}

// The gelu of one vector: by table where a vector holds 16 lanes (Note [Gelu by table]).
template <class D, class V>
HWY_INLINE V GeluErfVector(D d, V x) {
#if !HWY_HAVE_SCALABLE
  if constexpr (hn::MaxLanes(D()) == 16) return GeluErfByTable(d, x);
#endif
  return GeluErf(d, x);
}

void GeluErfF32(const float* x, float* out, int64_t n) {
  Map1(x, out, n, [](auto d, auto v) { return GeluErfVector(d, v); });
}
void GeluErfBf16(const uint16_t* x, uint16_t* out, int64_t n) {
  MapBf16(x, out, n, [](auto d, auto v) { return GeluErfVector(d, v); });
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
void SiluBf16(const uint16_t* x, uint16_t* out, int64_t n) {
  MapBf16(x, out, n, [](auto d, auto v) { return hn::Mul(v, Logistic(d, v)); });
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

// Calls go(f) with the float32 binary op's vector function; false for other ops.
template <class Go>
HWY_INLINE bool WithBinaryF32(int code_int, Go&& go) {
  switch (static_cast<OpCode>(code_int)) {
    case OpCode::kAdd: go([](auto d, auto x, auto y) { return hn::Add(x, y); }); return true;
    case OpCode::kSubtract: go([](auto d, auto x, auto y) { return hn::Sub(x, y); }); return true;
    case OpCode::kMultiply: go([](auto d, auto x, auto y) { return hn::Mul(x, y); }); return true;
    case OpCode::kDivide: go([](auto d, auto x, auto y) { return hn::Div(x, y); }); return true;
    case OpCode::kMaximum:
      // NaN-propagating like StableHLO and PyTorch: pick x where x is NaN (IsNaN, not Ne(x, x):
      // x86 compares are ordered, so Ne(NaN, NaN) is false).
      go([](auto d, auto x, auto y) { return hn::IfThenElse(hn::Or(hn::Gt(x, y), hn::IsNaN(x)), x, y); });
      return true;
    case OpCode::kMinimum:
      go([](auto d, auto x, auto y) { return hn::IfThenElse(hn::Or(hn::Lt(x, y), hn::IsNaN(x)), x, y); });
      return true;
    default: return false;
  }
}

bool BinaryF32(int code_int, const float* a, const float* b, float* out, int64_t n) {
  return WithBinaryF32(code_int, [&](auto f) { Map2(a, b, out, n, f); });
}

// Note [Scalar operands]: a float32 binary op one of whose operands is a scalar broadcast over the
// region holds it in a register, where it read the region's splat of it (a tile's worth: 16 KiB for
// x * 0.5) from memory beside the real operand -- on a CPU with a 32 KiB L1 the splat was evicted
// by the streaming operand and the output every tile, and x * 0.5 over (4096, 1024) ran at half
// the speed of x.neg() (1544 against 816 us for PyTorch, 1 thread). The same operation on the same
// values: the same bits.
bool BinaryF32Scalar(int code_int, const float* a, bool a_scalar, const float* b, bool b_scalar, float* out,
                     int64_t n) {
  return WithBinaryF32(code_int, [&](auto f) {
    if (a_scalar && b_scalar) Map2<true, true>(a, b, out, n, f);
    else if (a_scalar) Map2<true, false>(a, b, out, n, f);
    else if (b_scalar) Map2<false, true>(a, b, out, n, f);
    else Map2(a, b, out, n, f);
  });
}

// Note [Binary chains] (composite.cc): each vector goes through every step in registers, each
// step's result rounded (Rounded: never contracted with the next step into a multiply-add).
template <bool OBf16>
void BinaryChainOut(const BinaryChainStep* steps, int nsteps, void* out, int64_t n) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  // The chain over U vectors at element offset i, reading each array operand's vector u of step k
  // through `at(k, side, u)`: U vectors per step, so U loads of each operand are in flight at once
  // (one vector at a time, the loop waited on memory at every step).
  auto chain = [&](auto unroll, auto at, V* acc) {
    constexpr int U = decltype(unroll)::value;
    for (int k = 0; k < nsteps; ++k) {
      const BinaryChainStep& s = steps[k];
      V a[U], b[U];
      for (int side : {0, 1}) {
        V* v = side == 0 ? a : b;
        if (s.acc == side) {
          for (int u = 0; u < U; ++u) v[u] = acc[u];
        } else if (s.scalar[side]) {
          for (int u = 0; u < U; ++u) v[u] = hn::Set(d, static_cast<const float*>(s.in[side])[0]);
        } else {
          for (int u = 0; u < U; ++u) v[u] = at(k, side, u);
        }
      }
      WithBinaryF32(static_cast<int>(s.code), [&](auto f) {
        for (int u = 0; u < U; ++u) acc[u] = Rounded(f(d, a[u], b[u]));
      });
    }
  };
  auto load = [&](int k, int side, int64_t at) {
    const BinaryChainStep& s = steps[k];
    return s.bf16[side] ? WidenBf16(d, static_cast<const uint16_t*>(s.in[side]) + at)
                        : hn::LoadU(d, static_cast<const float*>(s.in[side]) + at);
  };
  auto store = [&](V v, int64_t at) {
    if constexpr (OBf16) StoreBf16(d, v, static_cast<uint16_t*>(out) + at);
    else hn::StoreU(v, d, static_cast<float*>(out) + at);
  };
  constexpr int kUnroll = 4;
  V acc[kUnroll];
  int64_t i = 0;
  for (; i + kUnroll * N <= n; i += kUnroll * N) {
    chain(std::integral_constant<int, kUnroll>(), [&](int k, int side, int u) { return load(k, side, i + u * N); }, acc);
    for (int u = 0; u < kUnroll; ++u) store(acc[u], i + u * N);
  }
  for (; i + N <= n; i += N) {
    chain(std::integral_constant<int, 1>(), [&](int k, int side, int) { return load(k, side, i); }, acc);
    store(acc[0], i);
  }
  if (i < n) {  // the tail through zero-padded float32 copies of each array operand
    HWY_ALIGN float t[kMaxBinaryChain][2][hn::MaxLanes(d)] = {};
    HWY_ALIGN float to[hn::MaxLanes(d)];
    for (int k = 0; k < nsteps && k < kMaxBinaryChain; ++k)
      for (int side : {0, 1}) {
        const BinaryChainStep& s = steps[k];
        if (s.acc == side || s.scalar[side]) continue;
        for (int64_t j = i; j < n; ++j)
          t[k][side][j - i] = s.bf16[side] ? ScalarFromBf16(static_cast<const uint16_t*>(s.in[side])[j])
                                           : static_cast<const float*>(s.in[side])[j];
      }
    chain(std::integral_constant<int, 1>(), [&](int k, int side, int) { return hn::Load(d, t[k][side]); }, acc);
    hn::Store(acc[0], d, to);
    for (int64_t j = i; j < n; ++j) {
      if constexpr (OBf16) static_cast<uint16_t*>(out)[j] = ScalarToBf16(to[j - i]);
      else static_cast<float*>(out)[j] = to[j - i];
    }
  }
}

void BinaryChainF32(const BinaryChainStep* steps, int nsteps, void* out, bool out_bf16, int64_t n) {
  if (out_bf16) BinaryChainOut<true>(steps, nsteps, out, n);
  else BinaryChainOut<false>(steps, nsteps, out, n);
}

// Map2 whose operands are float32 or bfloat16 (ABf16, BBf16), each bfloat16 one widened (exactly)
// as it is read, and whose result is stored as float32 or rounded to bfloat16 (OBf16, nearest
// even, as a convert rounds): Note [Widening reads] (elementwise.cc).
template <bool ABf16, bool BBf16, bool OBf16, class F>
HWY_INLINE void Map2Widening(const void* a, const void* b, void* out, int64_t n, F f) {
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  auto load = [&](auto is_bf16, const void* p, int64_t i) {
    if constexpr (decltype(is_bf16)::value) return WidenBf16(d, static_cast<const uint16_t*>(p) + i);
    else return hn::LoadU(d, static_cast<const float*>(p) + i);
  };
  auto scalar = [&](auto is_bf16, const void* p, int64_t i) {
    if constexpr (decltype(is_bf16)::value) return ScalarFromBf16(static_cast<const uint16_t*>(p)[i]);
    else return static_cast<const float*>(p)[i];
  };
  auto store = [&](auto v, int64_t i) {
    if constexpr (OBf16) StoreBf16(d, v, static_cast<uint16_t*>(out) + i);
    else hn::StoreU(v, d, static_cast<float*>(out) + i);
  };
  const std::integral_constant<bool, ABf16> ab;
  const std::integral_constant<bool, BBf16> bb;
  int64_t i = 0;
  for (; i + N <= n; i += N) store(f(d, load(ab, a, i), load(bb, b, i)), i);
  if (i < n) {
    HWY_ALIGN float ta[hn::MaxLanes(d)] = {}, tb[hn::MaxLanes(d)] = {}, to[hn::MaxLanes(d)];
    for (int64_t j = i; j < n; ++j) ta[j - i] = scalar(ab, a, j), tb[j - i] = scalar(bb, b, j);
    hn::Store(f(d, hn::Load(d, ta), hn::Load(d, tb)), d, to);
    for (int64_t j = i; j < n; ++j) {
      if constexpr (OBf16) static_cast<uint16_t*>(out)[j] = ScalarToBf16(to[j - i]);
      else static_cast<float*>(out)[j] = to[j - i];
    }
  }
}

template <bool OBf16, class F>
HWY_INLINE void Map2WideningOut(const void* a, bool a_bf16, const void* b, bool b_bf16, void* out, int64_t n, F f) {
  if (a_bf16 && b_bf16) Map2Widening<true, true, OBf16>(a, b, out, n, f);
  else if (a_bf16) Map2Widening<true, false, OBf16>(a, b, out, n, f);
  else if (b_bf16) Map2Widening<false, true, OBf16>(a, b, out, n, f);
  else Map2Widening<false, false, OBf16>(a, b, out, n, f);
}

bool BinaryF32Widening(int code_int, const void* a, bool a_bf16, const void* b, bool b_bf16, void* out, bool out_bf16,
                       int64_t n) {
  return WithBinaryF32(code_int, [&](auto f) {
    if (out_bf16) Map2WideningOut<true>(a, a_bf16, b, b_bf16, out, n, f);
    else Map2WideningOut<false>(a, a_bf16, b, b_bf16, out, n, f);
  });
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

// Note [Vector gathers]: one row of a gather of 32-bit elements along a contiguous last dim,
// dst[j] = base[ix[j]] for j < len, the 64-bit indices checked and clamped into [0, n) (n < 2^31)
// a vector at a time and narrowed for the hardware gather: the scalar loop spent ~3 cycles an
// element on the index's load, check and address. Returns the first j whose index is out of
// range, or -1.
int64_t GatherRowU32(const uint32_t* base, const int64_t* ix, int64_t len, int64_t n, uint32_t* dst) {
  const hn::ScalableTag<int64_t> d64;
  const hn::RebindToUnsigned<decltype(d64)> du64;
  const hn::Rebind<uint32_t, decltype(d64)> du32;
  const hn::Rebind<int32_t, decltype(d64)> di32;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d64));
  const auto zero = hn::Zero(d64), hi = hn::Set(d64, n - 1);
  auto bad = hn::Zero(d64);  // lanes that saw an index outside [0, n): all ones
  int64_t j = 0;
  for (; j + N <= len; j += N) {
    const auto v = hn::LoadU(d64, ix + j);
    bad = hn::Or(bad, hn::VecFromMask(d64, hn::Or(hn::Lt(v, zero), hn::Gt(v, hi))));
    const auto c = hn::Min(hn::Max(v, zero), hi);
    const auto at = hn::BitCast(di32, hn::TruncateTo(du32, hn::BitCast(du64, c)));
    hn::StoreU(hn::GatherIndex(di32, reinterpret_cast<const int32_t*>(base), at), di32,
               reinterpret_cast<int32_t*>(dst) + j);
  }
  bool any = !hn::AllTrue(d64, hn::Eq(bad, zero));
  for (; j < len; ++j) {
    const int64_t s = ix[j];
    any |= static_cast<uint64_t>(s) >= static_cast<uint64_t>(n);
    dst[j] = base[s < 0 ? 0 : (s >= n ? n - 1 : s)];
  }
  if (!any) return -1;
  for (int64_t k = 0; k < len; ++k)
    if (static_cast<uint64_t>(ix[k]) >= static_cast<uint64_t>(n)) return k;
  return -1;
}

}  // namespace HWY_NAMESPACE
}  // namespace tpu::host
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tpu::host {
HWY_EXPORT(UnaryF32);
HWY_EXPORT(GatherRowU32);
HWY_EXPORT(GeluErfF32);
HWY_EXPORT(GeluErfBf16);
HWY_EXPORT(GeluErfBackwardF32);
HWY_EXPORT(SiluF32);
HWY_EXPORT(SiluBf16);
HWY_EXPORT(SiluBackwardF32);
HWY_EXPORT(ShiftExpF32);
HWY_EXPORT(DivideByScalar);
HWY_EXPORT(SplatU32);
HWY_EXPORT(SplatU64);
HWY_EXPORT(BinaryF32);
HWY_EXPORT(BinaryF32Widening);
HWY_EXPORT(BinaryF32Scalar);
HWY_EXPORT(BinaryChainF32);
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
int64_t GatherRowU32Simd(const uint32_t* base, const int64_t* ix, int64_t len, int64_t n, uint32_t* dst) {
  return HWY_DYNAMIC_DISPATCH(GatherRowU32)(base, ix, len, n, dst);
}
void GeluErfBf16Simd(const uint16_t* x, uint16_t* out, int64_t n) { HWY_DYNAMIC_DISPATCH(GeluErfBf16)(x, out, n); }
void GeluErfBackwardF32Simd(const float* x, const float* dy, float* out, int64_t n) {
  HWY_DYNAMIC_DISPATCH(GeluErfBackwardF32)(x, dy, out, n);
}
void SiluF32Simd(const float* x, float* out, int64_t n) { HWY_DYNAMIC_DISPATCH(SiluF32)(x, out, n); }
void SiluBf16Simd(const uint16_t* x, uint16_t* out, int64_t n) { HWY_DYNAMIC_DISPATCH(SiluBf16)(x, out, n); }
void SiluBackwardF32Simd(const float* x, const float* dy, float* out, int64_t n) {
  HWY_DYNAMIC_DISPATCH(SiluBackwardF32)(x, dy, out, n);
}
bool UnaryF32Simd(OpCode code, const float* a, float* out, int64_t n) {
  return HWY_DYNAMIC_DISPATCH(UnaryF32)(static_cast<int>(code), a, out, n);
}
bool BinaryF32Simd(OpCode code, const float* a, const float* b, float* out, int64_t n) {
  return HWY_DYNAMIC_DISPATCH(BinaryF32)(static_cast<int>(code), a, b, out, n);
}
bool BinaryF32WideningSimd(OpCode code, const void* a, bool a_bf16, const void* b, bool b_bf16, void* out,
                           bool out_bf16, int64_t n) {
  return HWY_DYNAMIC_DISPATCH(BinaryF32Widening)(static_cast<int>(code), a, a_bf16, b, b_bf16, out, out_bf16, n);
}
bool BinaryF32ScalarSimd(OpCode code, const float* a, bool a_scalar, const float* b, bool b_scalar, float* out,
                         int64_t n) {
  return HWY_DYNAMIC_DISPATCH(BinaryF32Scalar)(static_cast<int>(code), a, a_scalar, b, b_scalar, out, n);
}
void BinaryChainF32Simd(const BinaryChainStep* steps, int nsteps, void* out, bool out_bf16, int64_t n) {
  HWY_DYNAMIC_DISPATCH(BinaryChainF32)(steps, nsteps, out, out_bf16, n);
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
