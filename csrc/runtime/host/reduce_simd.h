// Highway-vectorized pieces of reductions and of bf16 conversion (runtime dispatch to the best
// SIMD target of the CPU). Max/min follow StableHLO and PyTorch: a NaN anywhere gives NaN.
#pragma once

#include <cstdint>

namespace tpu::host {

// Sum of n contiguous floats accumulated in double.
double SumF32Row(const float* x, int64_t n);
// acc combined with the n contiguous floats (max when is_max, else min; NaN-propagating).
float MaxF32Row(const float* x, int64_t n, float acc, bool is_max);
// acc[j] += x[j] (in double), or acc[j] = max/min(acc[j], x[j]), for j < n.
void AddF32Cols(const float* x, double* acc, int64_t n);
void MaxF32Cols(const float* x, float* acc, int64_t n, bool is_max);

// bfloat16 <-> float32. To bf16: round to nearest even, NaN -> 0x7FC0 (the quiet NaN).
void Bf16ToF32(const uint16_t* x, float* out, int64_t n);
void F32ToBf16(const float* x, uint16_t* out, int64_t n);
// x rounded to bfloat16 precision, in place (what F32ToBf16 then Bf16ToF32 gives).
void RoundF32ToBf16(float* x, int64_t n);

}  // namespace tpu::host
