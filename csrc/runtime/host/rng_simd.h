// Highway kernel of rng_bit_generator: Philox4x32-10 blocks, one block per vector lane.
#pragma once

#include <cstdint>

namespace tpu::host {

// Writes the 4 words of each block in [b0, b1) to out[4 * block .. 4 * block + 3]: block `b` is
// Philox4x32-10 of counter {b, offset} under key `seed` (rng.cc), bit-identical to the scalar one.
void PhiloxBlocks(uint64_t seed, uint64_t offset, int64_t b0, int64_t b1, uint32_t* out);

}  // namespace tpu::host
