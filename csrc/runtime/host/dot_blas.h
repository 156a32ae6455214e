// dot_general for the element types oneDNN has no matmul for: float64 through OpenBLAS (its dgemm
// on blocks of the output, threaded by our pool) and integers through a cache-blocked loop.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "ir/dtype.h"

namespace tpu::host {

// A batch of matrices: element strides of the batch, row and column dims.
struct StridedMats {
  const void* data;
  int64_t batch_stride, row_stride, col_stride;
};

// Makes OpenBLAS run each call on the calling thread (once per process): callers split their work
// over our pool, so there is one thread budget.
void SingleThreadedBlas();

// c[nb, m, n] (contiguous) = a[nb, m, k] x b[nb, k, n], all of element type `t` (f64 or an
// integer type; integers wrap modulo 2^bits like PyTorch's CPU).
Status BatchedGemm(DType t, const StridedMats& a, const StridedMats& b, void* c, int64_t nb,
                   int64_t m, int64_t n, int64_t k);

}  // namespace tpu::host
