// Highway kernel of the integer GEMM: c[mr][nc] += a[mr][kc] x b[kc][nc], contiguous blocks,
// wrapping modulo 2^64 (2^32).
#pragma once

#include <cstdint>

namespace tpu::host {

void IntGemmBlock(const uint64_t* a, const uint64_t* b, uint64_t* c, int64_t mr, int64_t nc, int64_t kc);
void IntGemmBlock(const uint32_t* a, const uint32_t* b, uint32_t* c, int64_t mr, int64_t nc, int64_t kc);

}  // namespace tpu::host
