// The inner block of the integer GEMM (dot_blas.cc), Highway-vectorized over output columns.
#include "runtime/host/dot_int_simd.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/host/dot_int_simd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace tpu::host {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// c[i][j] += sum_p a[i][p] * b[p][j] (wrapping), i < mr, j < nc, p < kc; a is [mr][kc], b
// [kc][nc] and c [mr][nc], all contiguous. Four rows of c share each load of b.
template <typename U>
HWY_INLINE void Block(const U* a, const U* b, U* c, int64_t mr, int64_t nc, int64_t kc) {
  const hn::ScalableTag<U> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + 4 <= mr; i += 4) {
    const U *a0 = a + i * kc, *a1 = a0 + kc, *a2 = a1 + kc, *a3 = a2 + kc;
    U *c0 = c + i * nc, *c1 = c0 + nc, *c2 = c1 + nc, *c3 = c2 + nc;
    int64_t j = 0;
    for (; j + N <= nc; j += N) {
      auto v0 = hn::LoadU(d, c0 + j), v1 = hn::LoadU(d, c1 + j), v2 = hn::LoadU(d, c2 + j),
           v3 = hn::LoadU(d, c3 + j);
      for (int64_t p = 0; p < kc; ++p) {
        auto bv = hn::LoadU(d, b + p * nc + j);
        v0 = hn::Add(v0, hn::Mul(hn::Set(d, a0[p]), bv));
        v1 = hn::Add(v1, hn::Mul(hn::Set(d, a1[p]), bv));
        v2 = hn::Add(v2, hn::Mul(hn::Set(d, a2[p]), bv));
        v3 = hn::Add(v3, hn::Mul(hn::Set(d, a3[p]), bv));
      }
      hn::StoreU(v0, d, c0 + j);
      hn::StoreU(v1, d, c1 + j);
      hn::StoreU(v2, d, c2 + j);
      hn::StoreU(v3, d, c3 + j);
    }
    for (; j < nc; ++j)
      for (int64_t p = 0; p < kc; ++p) {
        U bv = b[p * nc + j];
        c0[j] += a0[p] * bv, c1[j] += a1[p] * bv, c2[j] += a2[p] * bv, c3[j] += a3[p] * bv;
      }
  }
  for (; i < mr; ++i)
    for (int64_t p = 0; p < kc; ++p) {
      U av = a[i * kc + p];
      for (int64_t j = 0; j < nc; ++j) c[i * nc + j] += av * b[p * nc + j];
    }
}

void BlockU64(const uint64_t* a, const uint64_t* b, uint64_t* c, int64_t mr, int64_t nc, int64_t kc) {
  Block(a, b, c, mr, nc, kc);
}
void BlockU32(const uint32_t* a, const uint32_t* b, uint32_t* c, int64_t mr, int64_t nc, int64_t kc) {
  Block(a, b, c, mr, nc, kc);
}

}  // namespace HWY_NAMESPACE
}  // namespace tpu::host
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tpu::host {
HWY_EXPORT(BlockU64);
HWY_EXPORT(BlockU32);
void IntGemmBlock(const uint64_t* a, const uint64_t* b, uint64_t* c, int64_t mr, int64_t nc, int64_t kc) {
  HWY_DYNAMIC_DISPATCH(BlockU64)(a, b, c, mr, nc, kc);
}
void IntGemmBlock(const uint32_t* a, const uint32_t* b, uint32_t* c, int64_t mr, int64_t nc, int64_t kc) {
  HWY_DYNAMIC_DISPATCH(BlockU32)(a, b, c, mr, nc, kc);
}
}  // namespace tpu::host
#endif
