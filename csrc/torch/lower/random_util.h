// Building blocks of the random ops (random.cc) that other lowerings draw with (sampling.cc):
// words of the device generator's Philox stream, and uniform values made from them.
#pragma once

#include <ATen/core/Generator.h>

#include <optional>

#include "torch/lower/elementwise_util.h"

namespace tpu::torch_bridge {

// `words` ui32 Philox words [words] from the generator (`gen`, or the default one of `like`'s
// device); the draw reserves its range of the stream.
int RandomWords(Lowering& l, const std::optional<at::Generator>& gen, const at::Tensor& like, int64_t words);
// The low `bits` (<= 31) bits of each word, as non-negative `dtype` values.
int LowBits(Builder& b, int words, int bits, DType dtype);
// n uniform values in [0, 1) with `digits` random bits each: f64 for digits > 24, else f32.
int Uniform01(Lowering& l, const std::optional<at::Generator>& gen, const at::Tensor& like, int64_t n, int digits);

}  // namespace tpu::torch_bridge
