// bfloat16 <-> float32 in vectors and scalars: widening (exact) and rounding to nearest even
// (NaN kept, as 0x7FC0), shared by the row kernels (reduce_simd.cc) and the elementwise kernels
// that read and write bfloat16 directly (elementwise_simd.cc), which must give the bits of
// converting, computing in float32 and converting back.
//
// A Highway per-target header: include it after hwy/highway.h, inside a foreach_target file.
#if defined(TPU_HOST_BF16_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TPU_HOST_BF16_INL_H_
#undef TPU_HOST_BF16_INL_H_
#else
#define TPU_HOST_BF16_INL_H_
#endif

#include <cstdint>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace tpu::host {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// bfloat16 values widened to float (exactly): a vector of them from p, and one.
template <class DF>
HWY_INLINE hn::Vec<DF> WidenBf16(DF df, const uint16_t* p) {
  const hn::RebindToUnsigned<DF> du;
  const hn::Rebind<uint16_t, DF> d16;
  return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(d16, p))));
}
HWY_INLINE float ScalarFromBf16(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}

// bits of x rounded to nearest even at bit 16 (low half then cleared by the caller); NaN kept.
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> RoundedBits(DF df, hn::Vec<DF> v) {
  const hn::RebindToUnsigned<DF> du;
  auto bits = hn::BitCast(du, v);
  auto lsb = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1u));
  auto r = hn::Add(bits, hn::Add(hn::Set(du, 0x7FFFu), lsb));
  return hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), hn::Set(du, 0x7FC00000u), r);
}

HWY_INLINE uint16_t ScalarToBf16(float f) {
  uint32_t bits;
  __builtin_memcpy(&bits, &f, 4);
  if (f != f) return 0x7FC0;
  bits += 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

// v rounded to bfloat16 (nearest even, NaN kept), stored at p.
template <class DF>
HWY_INLINE void StoreBf16(DF df, hn::Vec<DF> v, uint16_t* p) {
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<uint16_t, DF> d16;
  auto hi = hn::ShiftRight<16>(RoundedBits(df, v));  // <= 0xFFFF
  hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, hi)), d16, p);
}

}  // namespace HWY_NAMESPACE
}  // namespace tpu::host
HWY_AFTER_NAMESPACE();

#endif  // TPU_HOST_BF16_INL_H_
