// Philox4x32-10 (rng.cc), Highway-vectorized: each lane computes one block, so a 512-bit vector
// computes 16 blocks (64 words) per pass of the 10 rounds.
#include "runtime/host/rng_simd.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/host/rng_simd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace tpu::host {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET != HWY_SCALAR  // (one lane: no 64-bit view of two 32-bit lanes)
// hi:lo = a * m per 32-bit lane (the 64-bit products of the even lanes, then of the odd ones).
template <class D, class V>
HWY_INLINE void MulHiLo(D d, V a, V m, V* hi, V* lo) {
  const hn::RepartitionToWide<D> dw;
  const auto even = hn::MulEven(a, m);
  const auto odd = hn::MulEven(hn::BitCast(d, hn::ShiftRight<32>(hn::BitCast(dw, a))), m);
  *lo = hn::Mul(a, m);
  *hi = hn::OddEven(hn::BitCast(d, odd), hn::BitCast(d, hn::ShiftRight<32>(even)));
}
#endif

int64_t Blocks(uint64_t seed, uint64_t offset, int64_t b0, int64_t b1, uint32_t* out) {
  int64_t b = b0;
#if HWY_TARGET != HWY_SCALAR
  const hn::ScalableTag<uint32_t> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const auto m0 = hn::Set(d, 0xD2511F53u), m1 = hn::Set(d, 0xCD9E8D57u);
  const auto c2_init = hn::Set(d, static_cast<uint32_t>(offset)), c3_init = hn::Set(d, static_cast<uint32_t>(offset >> 32));
  const auto lane = hn::Iota(d, 0);
  // The counter's high word is one value per vector: a batch that would cross 2^32 blocks (a
  // draw of 2^34 words) ends the vector loop, like the last partial batch.
  for (; b + N <= b1 && (static_cast<uint64_t>(b) >> 32) == (static_cast<uint64_t>(b + N - 1) >> 32); b += N) {
    auto c0 = hn::Add(hn::Set(d, static_cast<uint32_t>(b)), lane);
    auto c1 = hn::Set(d, static_cast<uint32_t>(static_cast<uint64_t>(b) >> 32));
    auto c2 = c2_init, c3 = c3_init;
    uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
    for (int round = 0; round < 10; ++round) {
      decltype(c0) hi0, lo0, hi1, lo1;
      MulHiLo(d, c0, m0, &hi0, &lo0);
      MulHiLo(d, c2, m1, &hi1, &lo1);
      c0 = hn::Xor(hn::Xor(hi1, c1), hn::Set(d, k0));
      c1 = lo1;
      c2 = hn::Xor(hn::Xor(hi0, c3), hn::Set(d, k1));
      c3 = lo0;
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    hn::StoreInterleaved4(c0, c1, c2, c3, d, out + 4 * b);
  }
#endif
  return b;
}

}  // namespace HWY_NAMESPACE
}  // namespace tpu::host
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tpu::host {
HWY_EXPORT(Blocks);
int64_t PhiloxBlocks(uint64_t seed, uint64_t offset, int64_t b0, int64_t b1, uint32_t* out) {
  return HWY_DYNAMIC_DISPATCH(Blocks)(seed, offset, b0, b1, out);
}
}  // namespace tpu::host
#endif
