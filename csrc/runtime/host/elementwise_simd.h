// Highway-vectorized float32 loops (runtime dispatch to the best SIMD target of the CPU).
#pragma once

#include <cstdint>

#include "ir/graph.h"

namespace tpu::host {

// Returns false if the op has no vector implementation (caller uses the scalar loop).
bool UnaryF32Simd(OpCode code, const float* a, float* out, int64_t n);
bool BinaryF32Simd(OpCode code, const float* a, const float* b, float* out, int64_t n);
// The same ops (false for others) with either operand bfloat16 where its flag says so, widened as
// it is read, and the result rounded to bfloat16 where out_bf16 says so: the bits of converting
// to float32 first and back after (Note [Widening reads], elementwise.cc).
bool BinaryF32WideningSimd(OpCode code, const void* a, bool a_bf16, const void* b, bool b_bf16, void* out,
                           bool out_bf16, int64_t n);
// The same float32 ops (false for others) where a scalar flag says that operand is one value, read
// from its first element and held in a register (Note [Scalar operands], elementwise_simd.cc).
bool BinaryF32ScalarSimd(OpCode code, const float* a, bool a_scalar, const float* b, bool b_scalar, float* out,
                         int64_t n);
// One step of a chain of float32 binary ops (Note [Binary chains], composite.cc): op `code` (add,
// subtract, multiply, divide, maximum, minimum) on operands in[0], in[1] -- each a float32 array,
// a bfloat16 array widened as it is read where its bf16 flag says so (Note [Widening reads],
// elementwise.cc), or one float32 value where its scalar flag says so -- except operand `acc`, the
// previous step's result (-1 in the first step).
struct BinaryChainStep {
  OpCode code = OpCode::kAdd;
  const void* in[2] = {nullptr, nullptr};
  bool scalar[2] = {false, false};
  bool bf16[2] = {false, false};
  int acc = -1;
};
// out[i] = the chain's last value at i, computed in one pass with every op's own rounding, stored
// as float32 or (out_bf16) rounded to bfloat16 as a convert rounds; at most kMaxBinaryChain steps.
constexpr int kMaxBinaryChain = 8;
void BinaryChainF32Simd(const BinaryChainStep* steps, int nsteps, void* out, bool out_bf16, int64_t n);
// Wrapping integer add/sub/mul, and/or/xor, max/min (false for other ops).
bool BinaryI64Simd(OpCode code, const int64_t* a, const int64_t* b, int64_t* out, int64_t n);
bool BinaryI32Simd(OpCode code, const int32_t* a, const int32_t* b, int32_t* out, int64_t n);
// out[i] = a[i] <dir> b[i] (0/1, IEEE: false for NaN except NE).
bool CompareF32Simd(CompareDirection dir, const float* a, const float* b, int32_t* out, int64_t n);
// The same for int64 (signed).
bool CompareI64Simd(CompareDirection dir, const int64_t* a, const int64_t* b, int32_t* out, int64_t n);
// s[i] = x[i] - m (s may be null: not stored) and e[i] = exp(x[i] - m), as the subtract and exp
// ops compute them (e may be s).
void ShiftExpF32Simd(const float* x, float m, float* s, float* e, int64_t n);
// r[i] = r[0] for 0 < i < n.
void SplatU32Simd(uint32_t* r, int64_t n);
void SplatU64Simd(uint64_t* r, int64_t n);
// out[i] = a[i] / b with a division's bits: Note [Division by a scalar] (exp_log-inl.h), which the
// softmax group kernels use per vector; its test reads the bits through this.
void DivideByScalarF32Simd(const float* a, float b, float* out, int64_t n);
// out[i] = gelu(x[i]) (the erf form), in one pass: Note [Region composites]; out may be x.
void GeluErfF32Simd(const float* x, float* out, int64_t n);
// Note [Vector gathers] (elementwise_simd.cc): dst[j] = base[ix[j]] for j < len, an index outside
// [0, n) (n < 2^31) clamped; returns the first such j, or -1.
int64_t GatherRowU32Simd(const uint32_t* base, const int64_t* ix, int64_t len, int64_t n, uint32_t* dst);
// dy * gelu'(x), erf form (Note [Region composites]).
void GeluErfBackwardF32Simd(const float* x, const float* dy, float* out, int64_t n);
// out[i] = x[i] * logistic(x[i]) (silu), in one pass: Note [Region composites]; the chain's bits.
void SiluF32Simd(const float* x, float* out, int64_t n);
// silu's backward, (dy * s) * (1 + x * (1 - s)) with s = logistic(x): the chain's bits.
void SiluBackwardF32Simd(const float* x, const float* dy, float* out, int64_t n);
// The two above from bfloat16 to bfloat16: each value widened, the float32 kernel's result
// rounded to nearest even (the bits of the convert, the kernel and the convert back), in one pass
// (Note [Composites from bfloat16], elementwise.cc).
void GeluErfBf16Simd(const uint16_t* x, uint16_t* out, int64_t n);
void SiluBf16Simd(const uint16_t* x, uint16_t* out, int64_t n);
// out[i] = p[i] ? a[i] : b[i]
void SelectF32Simd(const int32_t* p, const float* a, const float* b, float* out, int64_t n);

}  // namespace tpu::host
