// Random bits: Philox4x32-10, a counter-based generator. The state operand is {seed, offset};
// element i of the result is word (i % 4) of the block at counter (i / 4, offset), so a program
// is reproducible from (seed, offset) alone and the generator only advances its offset. Blocks
// are independent, so large outputs are filled by the pool (the bits do not depend on it), each
// thread's blocks by the vector kernel (rng_simd.cc).
#include <cstdint>

#include "base/thread_pool.h"
#include "runtime/host/kernels.h"
#include "runtime/host/rng_simd.h"

namespace tpu::host {
namespace {

inline void MulHiLo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  uint64_t p = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(p >> 32);
  *lo = static_cast<uint32_t>(p);
}

void Philox(uint32_t ctr[4], uint32_t key[2]) {
  constexpr uint32_t kM0 = 0xD2511F53, kM1 = 0xCD9E8D57, kW0 = 0x9E3779B9, kW1 = 0xBB67AE85;
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    MulHiLo(kM0, ctr[0], &hi0, &lo0);
    MulHiLo(kM1, ctr[2], &hi1, &lo1);
    uint32_t n0 = hi1 ^ ctr[1] ^ k0, n1 = lo1, n2 = hi0 ^ ctr[3] ^ k1, n3 = lo0;
    ctr[0] = n0; ctr[1] = n1; ctr[2] = n2; ctr[3] = n3;
    k0 += kW0;
    k1 += kW1;
  }
}

}  // namespace

Status RunRngBits(const Op& op, const View& state, const View& out) {
  (void)op;
  const uint64_t* st = static_cast<const uint64_t*>(state.data);
  uint64_t seed = st[0], offset = st[state.dims.empty() ? 0 : state.strides[0]];
  uint32_t* o = static_cast<uint32_t*>(out.data);
  int64_t n = out.NumElements();
  auto block = [&](int64_t b, int64_t words) {  // the first `words` words of block b
    uint32_t ctr[4] = {static_cast<uint32_t>(b), static_cast<uint32_t>(static_cast<uint64_t>(b) >> 32),
                       static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32)};
    uint32_t key[2] = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
    Philox(ctr, key);
    for (int64_t j = 0; j < words; ++j) o[b * 4 + j] = ctr[j];
  };
  // Whole blocks by the vector kernel (what it leaves, here); the last partial block here.
  const int64_t whole = n / 4;
  auto fill = [&](int64_t b0, int64_t b1) {
    for (int64_t b = PhiloxBlocks(seed, offset, b0, b1, o); b < b1; ++b) block(b, 4);
  };
  if (n >= (int64_t{1} << 15)) ThreadPool::Get().ParallelFor(whole, 1024, fill);
  else fill(0, whole);
  if (n % 4) block(whole, n % 4);
  return Status::Ok();
}

}  // namespace tpu::host
