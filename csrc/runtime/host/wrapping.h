// Integer arithmetic that wraps (two's complement), as PyTorch's integer tensors do. C++ leaves
// signed overflow undefined (UBSan aborts on it; an optimizer may assume it never happens), so
// integers are added, subtracted, multiplied and negated in their unsigned type, where wrapping is
// defined. Floating-point types pass straight through.
#pragma once

#include <type_traits>

namespace tpu::host {

template <typename T>
inline T WrapAdd(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

template <typename T>
inline T WrapSub(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
  } else {
    return a - b;
  }
}

template <typename T>
inline T WrapMul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

template <typename T>
inline T WrapNeg(T a) {
  return WrapSub(T(0), a);
}

}  // namespace tpu::host
