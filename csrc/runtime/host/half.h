// The float16 storage type of the host kernels: _Float16 on x86 (GCC 12+), __fp16 on ARM (GCC's
// C++ has no _Float16 there). Both convert to and from float with round-to-nearest-even.
#pragma once

namespace tpu::host {

#if defined(__aarch64__) || defined(__arm__)
using Half = __fp16;
#else
using Half = _Float16;
#endif

}  // namespace tpu::host
