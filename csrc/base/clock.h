// The monotonic clock in nanoseconds, for intervals (steady_clock; not wall time).
#pragma once

#include <chrono>
#include <cstdint>

namespace tpu {

inline int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace tpu
