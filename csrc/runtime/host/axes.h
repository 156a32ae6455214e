// Strided index spaces of the row kernels (reduce.cc, row_kernels.cc): dims as (size, stride)
// axes, flat indices walked row-major.
#pragma once

#include <cstdint>

#include "base/small_vector.h"

namespace tpu::host {

struct Axis {
  int64_t size, stride;
};
using Axes = SmallVector<Axis, 6>;

// Element offset of flat index i (row-major over `ax`, the first `n` axes).
inline int64_t OffsetOf(const Axes& ax, size_t n, int64_t i) {
  int64_t off = 0;
  for (size_t d = n; d-- > 0;) {
    off += (i % ax[d].size) * ax[d].stride;
    i /= ax[d].size;
  }
  return off;
}

inline int64_t Count(const Axes& ax, size_t n) {
  int64_t c = 1;
  for (size_t d = 0; d < n; ++d) c *= ax[d].size;
  return c;
}

// Walks flat indices of `ax` from a start, keeping the element offset.
struct Counter {
  const Axes& ax;
  SmallVector<int64_t, 6> idx;
  int64_t off = 0;
  Counter(const Axes& a, int64_t start) : ax(a), idx(a.size(), 0) {
    for (size_t d = ax.size(); d-- > 0;) {
      idx[d] = start % ax[d].size;
      start /= ax[d].size;
      off += idx[d] * ax[d].stride;
    }
  }
  void Next() {
    for (size_t d = ax.size(); d-- > 0;) {
      off += ax[d].stride;
      if (++idx[d] < ax[d].size) return;
      off -= idx[d] * ax[d].stride;
      idx[d] = 0;
    }
  }
};

}  // namespace tpu::host
