// Highway kernel of rng_bit_generator: Philox4x32-10 blocks, one block per vector lane.
#pragma once

#include <cstdint>

namespace tpu::host {

// Writes the 4 words of blocks b0, b0 + 1, ... to out[4 * block .. 4 * block + 3], a vector of
// blocks at a time: block `b` is Philox4x32-10 of counter {b, offset} under key `seed` (rng.cc),
// bit-identical to the scalar definition there. Returns the first block of [b0, b1) it did not
// write (the last partial vector's; b0 on a target without vectors), which the caller computes.
int64_t PhiloxBlocks(uint64_t seed, uint64_t offset, int64_t b0, int64_t b1, uint32_t* out);

}  // namespace tpu::host
