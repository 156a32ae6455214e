// Register classes of the host executor's tiled loops (elementwise.cc's fused regions, copy.cc's
// converting copies): which register a dtype's values live in, and the loads, stores, roundings
// and conversions between memory and registers.
//
// Note [Register classes]: values live in one of four register classes. bf16/f16 values are held
// as f32 and rounded back to their precision after every op that produces them, which is exactly
// PyTorch's CPU behaviour (compute in float, round the result). Narrow integers and bool live in
// i32 registers and are wrapped to their width after every op; ui32 lives in i64 registers (so it
// compares, divides and converts as unsigned) and is wrapped to 32 bits likewise.
#pragma once

#include <cstdint>

#include "ir/dtype.h"

namespace tpu::host {

// Note [Generic loops per ISA]: the kernels for float32 run on Highway (elementwise_simd.cc); the
// generic loops below (loads and stores of every dtype, conversions, integer and float64 ops) are
// plain C++, which the baseline x86-64 target (SSE2) vectorizes poorly or not at all: converting
// u32 -> i64 -> f32 and storing bool ran at ~2 elements per ns. GCC builds each of them for
// AVX2 and x86-64-v4 (AVX-512) too and picks one when the library loads (target_clones, an ifunc).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
#define TPU_ISA_CLONES __attribute__((target_clones("default", "avx2", "arch=x86-64-v4")))
#else
#define TPU_ISA_CLONES
#endif

enum class Rc : uint8_t { kF32, kF64, kI64, kI32 };

Rc ClassOf(DType t);

// Whether memory of this dtype can be used in place as a register of its class.
inline bool IsRegisterLayout(DType t) {
  return t == DType::kF32 || t == DType::kF64 || t == DType::kI64 || t == DType::kI32;
}

// Bytes one element takes in a register of its class.
inline int RegBytes(DType t) { return ClassOf(t) == Rc::kF64 || ClassOf(t) == Rc::kI64 ? 8 : 4; }

// Rounds (bf16/f16) or wraps (narrow integers, bool, ui32) n register values to dtype t.
void RoundToDType(void* reg, DType t, int64_t n);

// Whether converting a value held in a register of `from` to `to` leaves the register as it is:
// `to` takes every value of `from` exactly, in the same register class.
bool ConvertKeepsRegister(DType from, DType to);

// Loads n elements of `t` at p (stride in elements) into a register of ClassOf(t).
void Load(DType t, const char* p, int64_t stride, int64_t n, void* reg);
// The same for `rows` rows, row j at p + j * row_bytes, into consecutive register rows of n (one
// call for a row tile's short rows: a call per row cost more than the row's copy).
void LoadRows(DType t, const char* p, int64_t row_bytes, int64_t stride, int64_t n, int64_t rows, void* reg);
// Row j's one element at p + j * row_bytes spread over register row j of n, for `rows` rows (an
// operand broadcast along a row tile's short rows: a per-channel value of an NCHW tensor).
void LoadRowsSplat(DType t, const char* p, int64_t row_bytes, int64_t n, int64_t rows, void* reg);
// Stores n register values as dtype t at p (stride in elements), rounding to t.
void Store(DType t, const void* reg, int64_t n, char* p, int64_t stride);
// The same for `rows` consecutive register rows of n, row j to p + j * row_bytes.
void StoreRows(DType t, const void* reg, int64_t n, int64_t rows, char* p, int64_t row_bytes, int64_t stride);
// Converts n values from a register of class `from` to one of ClassOf(to_type), rounded to it.
void Convert(Rc from, const void* in, DType to_type, void* out, int64_t n);

}  // namespace tpu::host
