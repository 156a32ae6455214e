// Values the compiler cannot see through, for kernels that fuse separate ops and must give their
// bits: a product passed through Rounded() is not contracted with the add or subtract that reads it
// into a fused multiply-add. GCC contracts vector and scalar arithmetic across statements by
// default; Clang only within one source expression (-ffp-contract=on), which Highway's ops and a
// call's argument are not, and it rejects these constraints on its vector types, so there the
// functions return their argument.
//
// A Highway per-target header: include it after hwy/highway.h, inside a foreach_target file.
#if defined(TPU_HOST_NO_CONTRACT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TPU_HOST_NO_CONTRACT_INL_H_
#undef TPU_HOST_NO_CONTRACT_INL_H_
#else
#define TPU_HOST_NO_CONTRACT_INL_H_
#endif

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace tpu::host {
namespace HWY_NAMESPACE {

template <class V>
HWY_INLINE V Rounded(V v) {
#if defined(__GNUC__) && !defined(__clang__) && (HWY_ARCH_X86)
  asm("" : "+v"(v.raw));
#elif defined(__GNUC__) && !defined(__clang__) && (HWY_ARCH_ARM_A64)
  asm("" : "+w"(v.raw));
#endif
  return v;
}

HWY_INLINE float RoundedScalar(float v) {
#if defined(__GNUC__) && !defined(__clang__) && (HWY_ARCH_X86)
  asm("" : "+v"(v));
#elif defined(__GNUC__) && !defined(__clang__) && (HWY_ARCH_ARM_A64)
  asm("" : "+w"(v));
#endif
  return v;
}

}  // namespace HWY_NAMESPACE
}  // namespace tpu::host
HWY_AFTER_NAMESPACE();

#endif  // TPU_HOST_NO_CONTRACT_INL_H_
