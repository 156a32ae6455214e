// The float32 exp and log with IEEE results at their edges (IeeeExp, IeeeLog), and a division by
// a scalar with a division's bits (QuotientByScalar): shared by the elementwise kernels
// (elementwise_simd.cc) and the row kernels that fuse their chains (reduce_simd.cc), which must
// give the same bits.
//
// A Highway per-target header: include it after hwy/highway.h, inside a foreach_target file.
#if defined(TPU_HOST_EXP_LOG_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TPU_HOST_EXP_LOG_INL_H_
#undef TPU_HOST_EXP_LOG_INL_H_
#else
#define TPU_HOST_EXP_LOG_INL_H_
#endif

#include <cstddef>
#include <limits>

#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace tpu::host {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// c[0] x^(N-1) + ... + c[N-1] by Horner's rule (coefficients highest degree first), each scaled by
// `scale` (1 or a power of two: exact).
template <class D, class V, size_t N>
HWY_INLINE V Horner(D d, V x, const float (&c)[N], float scale = 1.0f) {
  V p = hn::Set(d, scale * c[0]);
  for (size_t k = 1; k < N; ++k) p = hn::MulAdd(p, x, hn::Set(d, scale * c[k]));
  return p;
}

// e^r for |r| <= ln2/2 (a little more): degree 6, least squares on Chebyshev nodes, within
// 1.05 ulp in float32 with its rounding.
constexpr float kExpPoly[] = {0.0013746218755841255f, 0.008370347321033478f, 0.04166976362466812f,
                              0.16666506230831146f, 0.49999988079071045f, 1.0f, 1.0f};

// t = n ln2 + r, n = round(t / ln2) by the 1.5 * 2^23 rounding trick: returns r and sets k, whose
// low mantissa bits hold n (|n| < 2^22).
template <class D, class V>
HWY_INLINE V ExpReduce(D d, V t, V* k) {
  *k = hn::MulAdd(t, hn::Set(d, 1.44269504088896341f), hn::Set(d, 12582912.0f));
  const V n = hn::Sub(*k, hn::Set(d, 12582912.0f));
  return hn::MulAdd(n, hn::Set(d, -1.428606765330187e-06f), hn::MulAdd(n, hn::Set(d, -0.693145751953125f), t));
}

// scale * exp(t) where 2^n and the result are normal (t in [-86, 87], n in [-124, 126], so p * 2^n
// stays normal for p in [0.7, 1.42]; scale 1 or a power of two): 2^n by adding n to the exponent
// bits, exact like IeeeExp's two multiplies, without its edges. IeeeExp's short path; erf's and
// gelu's exponentials (t in [-18, 0]).
template <class D, class V>
HWY_INLINE V ScaledExpNormal(D d, V t, float scale) {
  const hn::RebindToSigned<D> di;
  V k;
  const V p = Horner(d, ExpReduce(d, t, &k), kExpPoly, scale);
  return hn::BitCast(d, hn::Add(hn::BitCast(di, p), hn::ShiftLeft<23>(hn::BitCast(di, k))));
}

// exp with IEEE results everywhere (overflow inf, underflow to subnormals and 0, NaN), in place
// of Highway's Exp plus ExpEdges (the exp op on (4096, 1024) float32 went from 1.21 ms to about
// 0.7-0.9 ms): ExpReduce, the polynomial, and 2^n applied in two halves so that results down to
// the subnormals (n >= -150) and up to FLT_MAX (n <= 128) come out exact.
template <class D, class V>
HWY_INLINE V IeeeExp(D d, V v) {
  // A vector wholly within [-86, 87] (softmax's shifted logits, mostly) needs no edges and has
  // normal results: ScaledExpNormal, the same bits in half the operations. Lanes below -104 (a
  // masked softmax's -inf) join it as 0, computing exp(0) meanwhile.
  const auto in_range = hn::And(hn::Ge(v, hn::Set(d, -86.0f)), hn::Le(v, hn::Set(d, 87.0f)));
  if (HWY_LIKELY(hn::AllTrue(d, in_range))) return ScaledExpNormal(d, v, 1.0f);
  const auto zero = hn::Lt(v, hn::Set(d, -104.0f));
  const V v0 = hn::IfThenZeroElse(zero, v);
  if (hn::AllTrue(d, hn::Or(in_range, zero))) return hn::IfThenZeroElse(zero, ScaledExpNormal(d, v0, 1.0f));
  // Otherwise lanes below -104 give 0 at the end; they compute exp(0) meanwhile (so no lower
  // clamp), not exp(-104), whose scaling by 2^n underflows: each subnormal or underflowing
  // multiply is a microcode assist of ~100 cycles on x86 (a causal attention softmax, half its
  // inputs -inf, ran 2.6x slower than one without them).
  const hn::RebindToSigned<D> di;
  V k;
  const V r = ExpReduce(d, hn::Min(v0, hn::Set(d, 88.8f)), &k);
  const V p = Horner(d, r, kExpPoly);
  const auto ni = hn::Sub(hn::BitCast(di, k), hn::BitCast(di, hn::Set(d, 12582912.0f)));
  const auto n1 = hn::ShiftRight<1>(ni);  // (arithmetic: n / 2 rounded down)
  const auto bias = hn::Set(di, 127);
  const V s1 = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(n1, bias)));
  const V s2 = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(hn::Sub(ni, n1), bias)));
  V y = hn::Mul(hn::Mul(p, s1), s2);
  y = hn::IfThenElse(hn::Ge(v, hn::Set(d, 88.72283935546875f)), hn::Set(d, std::numeric_limits<float>::infinity()), y);
  y = hn::IfThenZeroElse(zero, y);
  return hn::IfThenElse(hn::IsNaN(v), v, y);
}
// exp of one float as a vector computes it (a row's elements past its last whole vector).
template <class D>
HWY_INLINE float IeeeExpOne(D d, float t) { return hn::GetLane(IeeeExp(d, hn::Set(d, t))); }
// log(x) for Log, log(1 + x) for Log1p: `pole` is where the result is -inf, below it NaN.
template <class D, class V>
HWY_INLINE V LogEdges(D d, V v, V r, float pole) {
  const V inf = hn::Set(d, std::numeric_limits<float>::infinity());
  r = hn::IfThenElse(hn::Eq(v, inf), inf, r);
  r = hn::IfThenElse(hn::Eq(v, hn::Set(d, pole)), hn::Neg(inf), r);
  return hn::IfThenElse(hn::Not(hn::Ge(v, hn::Set(d, pole))), hn::Set(d, std::numeric_limits<float>::quiet_NaN()), r);
}
template <class D, class V>
HWY_INLINE V IeeeLog(D d, V v) { return LogEdges(d, v, hn::Log(d, v), 0.0f); }

// Note [Division by a scalar]: a / b for one float b, the bits of a division without a divide per
// vector (a divide's throughput is a tenth of a multiply's; softmax divides every element by its
// row's total). With r = 1/b rounded, q = a * r is within an ulp of a / b, the remainder a - q * b
// is exact in one fused multiply-add, and q + remainder * r rounds to the correctly rounded
// quotient (Markstein's theorem; elementwise_simd_test.cc checks it against division bit for
// bit). It needs b and 1/b normal (ScalarQuotientUsable) and no underflow in the remainder: a
// vector with a lane whose a or quotient is below 2^-100 (but zero), or whose quotient is not
// finite, divides. A zero remainder keeps q (an exact quotient, and a zero's sign). Targets without
// a fused multiply-add divide.
inline bool ScalarQuotientUsable(float b) {
  const float ab = b < 0 ? -b : b, lo = std::numeric_limits<float>::min();
  return HWY_NATIVE_FMA && ab >= lo && ab <= 1.0f / lo;  // (false for NaN)
}
template <class D, class V>
HWY_INLINE V QuotientByScalar(D d, V a, V vb, V vr, bool usable) {
  if (!usable) return hn::Div(a, vb);
  const V q = hn::Mul(a, vr);
  const V aq = hn::Abs(q), tiny = hn::Set(d, 0x1p-100f);
  const auto ok = hn::Or(hn::Eq(a, hn::Zero(d)),
                         hn::And(hn::And(hn::Ge(hn::Abs(a), tiny), hn::Ge(aq, tiny)),
                                 hn::Le(aq, hn::Set(d, std::numeric_limits<float>::max()))));
  if (HWY_UNLIKELY(!hn::AllTrue(d, ok))) return hn::Div(a, vb);
  const V rem = hn::NegMulAdd(q, vb, a);
  return hn::IfThenElse(hn::Eq(rem, hn::Zero(d)), q, hn::MulAdd(rem, vr, q));
}

}  // namespace HWY_NAMESPACE
}  // namespace tpu::host
HWY_AFTER_NAMESPACE();

#endif  // TPU_HOST_EXP_LOG_INL_H_
