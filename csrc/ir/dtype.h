// Element types, named as StableHLO names them.
#pragma once

#include <cstdint>
#include <string>

namespace tpu {

// X(enum, stablehlo name, bytes, is_float, is_signed_int)
#define TPU_DTYPES(X)            \
  X(kF32, "f32", 4, true, false)  \
  X(kF64, "f64", 8, true, false)  \
  X(kF16, "f16", 2, true, false)  \
  X(kBF16, "bf16", 2, true, false) \
  X(kI64, "i64", 8, false, true)  \
  X(kI32, "i32", 4, false, true)  \
  X(kI16, "i16", 2, false, true)  \
  X(kI8, "i8", 1, false, true)    \
  X(kU8, "ui8", 1, false, false)  \
  X(kU32, "ui32", 4, false, false) \
  X(kU64, "ui64", 8, false, false) \
  X(kBool, "i1", 1, false, false)

enum class DType : uint8_t {
#define TPU_DTYPE_ENUM(e, n, b, f, s) e,
  TPU_DTYPES(TPU_DTYPE_ENUM)
#undef TPU_DTYPE_ENUM
};

constexpr int kNumDTypes = 0
#define TPU_DTYPE_COUNT(e, n, b, f, s) +1
    TPU_DTYPES(TPU_DTYPE_COUNT)
#undef TPU_DTYPE_COUNT
    ;

const char* DTypeName(DType t);
int DTypeSize(DType t);
bool IsFloat(DType t);
bool IsSignedInt(DType t);
inline bool IsInteger(DType t) { return !IsFloat(t) && t != DType::kBool; }

}  // namespace tpu
