// Highway-vectorized pieces of reductions and of bf16 conversion (runtime dispatch to the best
// SIMD target of the CPU). Max/min follow StableHLO and PyTorch: a NaN anywhere gives NaN.
#pragma once

#include <cstdint>

namespace tpu::host {

// Note [Float sums]: a float reduction adds its elements (in order) round-robin into 16 float
// lanes, block by block of 2048 elements; each block's lanes are added (lane 0 first) in double
// and the blocks' sums accumulate in double. Within the last, partial block the elements past the
// last whole group of 16 all go to lane 0. Float lanes keep PyTorch CPU's float-accumulation
// rounding on short reductions (tests compare with it at float32 tolerances, and cancellation
// makes a more exact sum differ); the double blocks keep long ones accurate. LaneSum streams one
// output's elements, given as contiguous runs of any lengths.
struct LaneSum {
  static constexpr int64_t kBlock = 2048;
  int64_t total_len;  // elements this output reduces
  int64_t pos = 0;
  float lanes[16] = {};
  double total = 0;
  explicit LaneSum(int64_t n) : total_len(n) {}
  void Feed(const float* x, int64_t n);
};
// The Note's sum of n contiguous floats (LaneSum over one run).
double SumF32Lanes(const float* x, int64_t n);
// out[r] = SumF32Lanes(x + r * stride, n) for r < rows (one call for many short rows).
void SumF32Rows(const float* x, int64_t rows, int64_t n, int64_t stride, double* out);
// out[k] = SumF32Lanes(rows[k], n) for k < cnt <= kSumRowGroup: short rows' sums are fastest in
// whole groups (their lanes are combined together).
constexpr int64_t kSumRowGroup = 16;
void SumF32RowGroup(const float* const* rows, int64_t cnt, int64_t n, double* out);
// Note [Norm row groups] (reduce_simd.cc): cnt <= kSumRowGroup rows of n floats.
// Layer norm: mu[k] = sum(x[k]) / n, y[k] = (x[k] - mu[k]) * rs[k] (* w) (+ b) with rs[k] =
// 1 / sqrt(sum((x[k] - mu[k])^2) / n + eps). y may be x.
void LayerNormGroupF32(const float* const* x, float* const* y, int64_t cnt, int64_t n, const float* w,
                       const float* b, float eps, float* mu, float* rs);
// A variance's sums: mu[k] = sum(x[k]) / n and ss[k] = sum((x[k] - mu[k])^2), as layer norm computes
// them (the same bits as its chain's ops).
void SquaredDeviationsGroupF32(const float* const* x, int64_t cnt, int64_t n, float* mu, float* ss);
// RMS norm: y[k] = x[k] * rs[k] (* w), rs[k] = 1 / sqrt(sum(x[k]^2) / n + eps). y may be x.
void RmsNormGroupF32(const float* const* x, float* const* y, int64_t cnt, int64_t n, const float* w, float eps,
                     float* rs);
// Note [Softmax row groups] (reduce_simd.cc): softmax (log: log-softmax) of cnt <= kSumRowGroup
// contiguous float rows of n, row k from x[k] to y[k] (y may be x).
void SoftmaxGroupF32(const float* const* x, float* const* y, int64_t cnt, int64_t n, bool log);
// The same for contiguous bfloat16 rows, each result rounded once to bfloat16 (the bits of
// widening, SoftmaxGroupF32 and rounding); e[k]: a float scratch row of n for row k. y may be x.
void SoftmaxGroupBf16(const uint16_t* const* x, uint16_t* const* y, float* const* e, int64_t cnt, int64_t n,
                      bool log);
// Its backward (reduce_simd.cc): dx[k] from the gradient g[k] and the output y[k] (dx may be either).
void SoftmaxBackwardGroupF32(const float* const* g, const float* const* y, float* const* dx, int64_t cnt, int64_t n,
                             bool log);
// lanes[j] += x[16 g + j] for g < groups, j < 16.
void AddF32Lanes(const float* x, int64_t groups, float* lanes);
// acc[j] += x[j] in float, j < n.
void AddF32ColsFloat(const float* x, float* acc, int64_t n);
// A whole lane block of a column sum (Note [Float sums]; reduce_simd.cc): positions pos < blen,
// rows of len floats at p + pos * stride, into lanes (16 rows of lane_stride floats, zero on
// entry and on return), then each column's lanes added in order in double onto tot.
void AddF32ColsBlock(const float* p, int64_t stride, int64_t blen, float* lanes, int64_t lane_stride, int64_t len,
                     double* tot);
// acc combined with the n contiguous floats (max when is_max, else min; NaN-propagating).
float MaxF32Row(const float* x, int64_t n, float acc, bool is_max);
// acc[j] += x[j] (in double), or acc[j] = max/min(acc[j], x[j]), for j < n.
void AddF32Cols(const float* x, double* acc, int64_t n);
// The same for `rows` rows of n floats, `stride` floats apart, added in row order: each column's
// total stays in a register across the rows (Note [Column sums by row groups]).
void AddF32ColsRows(const float* x, int64_t stride, int64_t rows, double* acc, int64_t n);
void MaxF32Cols(const float* x, float* acc, int64_t n, bool is_max);
void MaxF32ColsRows(const float* x, int64_t stride, int64_t rows, float* acc, int64_t n, bool is_max);

// Note [Vector arg reductions] (reduce_simd.cc): argmax (is_max) / argmin of float32 as PyTorch's
// CPU kernel: the first index of the best value, the first NaN's if there is one. Rows: n
// contiguous floats, n < 2^31 (0 < n). Columns: len <= kArgCols adjacent columns over n >= 1 rows,
// `stride` floats apart, n < 2^31.
int64_t ArgF32Row(const float* x, int64_t n, bool is_max);
constexpr int64_t kArgCols = 256;
void ArgF32Cols(const float* p, int64_t n, int64_t stride, int64_t len, bool is_max, int64_t* out);
// One row r (rows in order) of any len adjacent columns at q into the running bests bv and their
// row indices bi.
void ArgF32ColsStep(const float* q, int64_t len, bool is_max, float* bv, int32_t* bi, int32_t r);

// bfloat16 <-> float32. To bf16: round to nearest even, NaN -> 0x7FC0 (the quiet NaN).
void Bf16ToF32(const uint16_t* x, float* out, int64_t n);
void F32ToBf16(const float* x, uint16_t* out, int64_t n);
// x rounded to bfloat16 precision, in place (what F32ToBf16 then Bf16ToF32 gives).
void RoundF32ToBf16(float* x, int64_t n);

}  // namespace tpu::host
