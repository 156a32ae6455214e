// A spin-wait hint for the CPU (x86 `pause`, ARM `yield`), portable: busy-wait loops call this
// instead of an ISA-specific builtin so that ARM builds compile.
#pragma once

namespace tpu {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  __asm__ __volatile__("yield" ::: "memory");
#else
  __asm__ __volatile__("" ::: "memory");  // at least a compiler barrier
#endif
}

}  // namespace tpu
