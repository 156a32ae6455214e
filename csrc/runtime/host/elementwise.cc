// Fused elementwise regions: one tiled pass over the iteration space. Each tile loads its inputs
// (straight from memory when contiguous and already of the register type), runs the region's ops
// on registers of kTile elements that stay in L1, and stores the outputs.
//
// Note [Register classes]: values live in one of four register classes. bf16/f16 values are held
// as f32 and rounded back to their precision after every op that produces them, which is exactly
// PyTorch's CPU behaviour (compute in float, round the result). Narrow integers and bool live in
// i32 registers and are wrapped to their width after every op; ui32 lives in i64 registers (so it
// compares, divides and converts as unsigned) and is wrapped to 32 bits likewise.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "base/thread_pool.h"
#include "runtime/host/elementwise_simd.h"
#include "runtime/host/kernels.h"
#include "runtime/host/half.h"
#include "runtime/host/reduce_simd.h"
#include "runtime/host/wrapping.h"

namespace tpu::host {
namespace {

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

constexpr int64_t kTile = 256;
// Note [Tile length]: a tile is kTile elements or a multiple of it. Each tile costs a fixed amount
// (offsets, one kernel call per op, stores), about as much as a kernel spends on 256 elements, so
// a region runs its longest tile whose values still fit in L1: values that need storage (an op's
// result, an input that must be converted, gathered or splatted, a splat filled once per call)
// take kL1Budget bytes between them; inputs read in place and the result written in place take
// none. A one-op region over contiguous float32 then runs tiles of kMaxTile elements, a long
// chain tiles of kTile.
constexpr int64_t kMaxTile = 16384;
constexpr int64_t kL1Budget = 32 * 1024;

int64_t TileLength(int values_stored) {
  if (values_stored == 0) return kMaxTile;
  int64_t t = kL1Budget / (8 * values_stored) / kTile * kTile;
  return std::clamp<int64_t>(t, kTile, kMaxTile);
}

enum class Rc : uint8_t { kF32, kF64, kI64, kI32 };

Rc ClassOf(DType t) {
  switch (t) {
    case DType::kF32: case DType::kBF16: case DType::kF16: return Rc::kF32;
    case DType::kF64: return Rc::kF64;
    case DType::kI64: case DType::kU64: case DType::kU32: return Rc::kI64;
    case DType::kI32: case DType::kI16: case DType::kI8: case DType::kU8: case DType::kBool:
      return Rc::kI32;
  }
  return Rc::kF32;
}

// Whether memory of this dtype can be used in place as a register of its class.
bool IsRegisterLayout(DType t) {
  return t == DType::kF32 || t == DType::kF64 || t == DType::kI64 || t == DType::kI32;
}

inline float Bf16ToF32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline uint16_t F32ToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (std::isnan(f)) return 0x7FC0;
  bits += 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}
inline float RoundF16(float f) { return static_cast<float>(static_cast<Half>(f)); }

// Wraps register values to the width of N (bool: != 0).
template <typename N, typename R>
TPU_ISA_CLONES void WrapLoop(R* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<N, bool>) x[i] = x[i] != 0;
    else x[i] = static_cast<N>(x[i]);
  }
}

void RoundToDType(void* reg, DType t, int64_t n) {
  switch (t) {
    case DType::kBF16: RoundF32ToBf16(static_cast<float*>(reg), n); break;  // Highway
    case DType::kF16: {
      float* f = static_cast<float*>(reg);
      for (int64_t i = 0; i < n; ++i) f[i] = RoundF16(f[i]);
      break;
    }
    case DType::kI16: WrapLoop<int16_t>(static_cast<int32_t*>(reg), n); break;
    case DType::kI8: WrapLoop<int8_t>(static_cast<int32_t*>(reg), n); break;
    case DType::kU8: WrapLoop<uint8_t>(static_cast<int32_t*>(reg), n); break;
    case DType::kBool: WrapLoop<bool>(static_cast<int32_t*>(reg), n); break;
    case DType::kU32: WrapLoop<uint32_t>(static_cast<int64_t*>(reg), n); break;
    default: break;
  }
}

// Whether converting a value held in a register of `from` to `to` leaves the register as it is:
// `to` takes every value of `from` exactly, in the same register class.
bool ConvertKeepsRegister(DType from, DType to) {
  switch (to) {
    case DType::kF32: return from == DType::kF32 || from == DType::kBF16 || from == DType::kF16;
    case DType::kF64: return from == DType::kF64;
    case DType::kI32:
      return from == DType::kI32 || from == DType::kI16 || from == DType::kI8 || from == DType::kU8 ||
             from == DType::kBool;
    case DType::kI64: return from == DType::kI64 || from == DType::kU32;
    default: return from == to;
  }
}

// Loads n elements of `t` at p (stride in elements) into a register of ClassOf(t).
template <typename R, typename M>
TPU_ISA_CLONES
void LoadAs(const char* p, int64_t stride, int64_t n, R* out) {
  const M* m = reinterpret_cast<const M*>(p);
  if (stride == 1) for (int64_t i = 0; i < n; ++i) out[i] = static_cast<R>(m[i]);
  else for (int64_t i = 0; i < n; ++i) out[i] = static_cast<R>(m[i * stride]);
}

void Load(DType t, const char* p, int64_t stride, int64_t n, void* reg) {
  switch (t) {
    case DType::kF32: LoadAs<float, float>(p, stride, n, static_cast<float*>(reg)); break;
    case DType::kF64: LoadAs<double, double>(p, stride, n, static_cast<double*>(reg)); break;
    case DType::kBF16: {
      const uint16_t* m = reinterpret_cast<const uint16_t*>(p);
      float* o = static_cast<float*>(reg);
      if (stride == 1) tpu::host::Bf16ToF32(m, o, n);  // Highway
      else for (int64_t i = 0; i < n; ++i) o[i] = Bf16ToF32(m[i * stride]);
      break;
    }
    case DType::kF16: {
      const Half* m = reinterpret_cast<const Half*>(p);
      float* o = static_cast<float*>(reg);
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(m[i * stride]);
      break;
    }
    case DType::kI64: LoadAs<int64_t, int64_t>(p, stride, n, static_cast<int64_t*>(reg)); break;
    case DType::kU64: LoadAs<int64_t, uint64_t>(p, stride, n, static_cast<int64_t*>(reg)); break;
    case DType::kI32: LoadAs<int32_t, int32_t>(p, stride, n, static_cast<int32_t*>(reg)); break;
    case DType::kU32: LoadAs<int64_t, uint32_t>(p, stride, n, static_cast<int64_t*>(reg)); break;
    case DType::kI16: LoadAs<int32_t, int16_t>(p, stride, n, static_cast<int32_t*>(reg)); break;
    case DType::kI8: LoadAs<int32_t, int8_t>(p, stride, n, static_cast<int32_t*>(reg)); break;
    case DType::kU8: LoadAs<int32_t, uint8_t>(p, stride, n, static_cast<int32_t*>(reg)); break;
    case DType::kBool: {
      const uint8_t* m = reinterpret_cast<const uint8_t*>(p);
      int32_t* o = static_cast<int32_t*>(reg);
      for (int64_t i = 0; i < n; ++i) o[i] = m[i * stride] != 0;
      break;
    }
  }
}

template <typename R, typename M>
TPU_ISA_CLONES
void StoreAs(const R* in, int64_t n, char* p, int64_t stride) {
  M* m = reinterpret_cast<M*>(p);
  if (stride == 1) for (int64_t i = 0; i < n; ++i) m[i] = static_cast<M>(in[i]);
  else for (int64_t i = 0; i < n; ++i) m[i * stride] = static_cast<M>(in[i]);
}

void Store(DType t, const void* reg, int64_t n, char* p, int64_t stride) {
  switch (t) {
    case DType::kF32: StoreAs<float, float>(static_cast<const float*>(reg), n, p, stride); break;
    case DType::kF64: StoreAs<double, double>(static_cast<const double*>(reg), n, p, stride); break;
    case DType::kBF16: {
      const float* r = static_cast<const float*>(reg);
      uint16_t* m = reinterpret_cast<uint16_t*>(p);
      if (stride == 1) tpu::host::F32ToBf16(r, m, n);  // Highway
      else for (int64_t i = 0; i < n; ++i) m[i * stride] = F32ToBf16(r[i]);
      break;
    }
    case DType::kF16: {
      const float* r = static_cast<const float*>(reg);
      Half* m = reinterpret_cast<Half*>(p);
      for (int64_t i = 0; i < n; ++i) m[i * stride] = static_cast<Half>(r[i]);
      break;
    }
    case DType::kI64: StoreAs<int64_t, int64_t>(static_cast<const int64_t*>(reg), n, p, stride); break;
    case DType::kU64: StoreAs<int64_t, uint64_t>(static_cast<const int64_t*>(reg), n, p, stride); break;
    case DType::kI32: StoreAs<int32_t, int32_t>(static_cast<const int32_t*>(reg), n, p, stride); break;
    case DType::kU32: StoreAs<int64_t, uint32_t>(static_cast<const int64_t*>(reg), n, p, stride); break;
    case DType::kI16: StoreAs<int32_t, int16_t>(static_cast<const int32_t*>(reg), n, p, stride); break;
    case DType::kI8: StoreAs<int32_t, int8_t>(static_cast<const int32_t*>(reg), n, p, stride); break;
    case DType::kU8: case DType::kBool:
      StoreAs<int32_t, uint8_t>(static_cast<const int32_t*>(reg), n, p, stride);
      break;
  }
}

// Converts a register between classes.
template <typename To, typename From>
TPU_ISA_CLONES
void ConvertReg(const From* in, To* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
      // Out-of-range and NaN float->int conversions are undefined in C++; saturate NaN to 0 and
      // clamp instead of invoking UB.
      From v = in[i];
      if (std::isnan(v)) out[i] = 0;
      else if (v >= static_cast<From>(std::numeric_limits<To>::max())) out[i] = std::numeric_limits<To>::max();
      else if (v <= static_cast<From>(std::numeric_limits<To>::min())) out[i] = std::numeric_limits<To>::min();
      else out[i] = static_cast<To>(v);
    } else {
      out[i] = static_cast<To>(in[i]);
    }
  }
}

void Convert(Rc from, const void* in, DType to_type, void* out, int64_t n) {
  Rc to = ClassOf(to_type);
  auto go = [&](auto* o) {
    using T = std::remove_pointer_t<decltype(o)>;
    switch (from) {
      case Rc::kF32: ConvertReg<T>(static_cast<const float*>(in), o, n); break;
      case Rc::kF64: ConvertReg<T>(static_cast<const double*>(in), o, n); break;
      case Rc::kI64: ConvertReg<T>(static_cast<const int64_t*>(in), o, n); break;
      case Rc::kI32: ConvertReg<T>(static_cast<const int32_t*>(in), o, n); break;
    }
  };
  switch (to) {
    case Rc::kF32: go(static_cast<float*>(out)); break;
    case Rc::kF64: go(static_cast<double*>(out)); break;
    case Rc::kI64: go(static_cast<int64_t*>(out)); break;
    case Rc::kI32: go(static_cast<int32_t*>(out)); break;
  }
  // float->bool is "!= 0", not truncation.
  if (to_type == DType::kBool && (from == Rc::kF32 || from == Rc::kF64)) {
    int32_t* o = static_cast<int32_t*>(out);
    for (int64_t i = 0; i < n; ++i) {
      double v = from == Rc::kF32 ? static_cast<const float*>(in)[i] : static_cast<const double*>(in)[i];
      o[i] = v != 0;
    }
  }
  RoundToDType(out, to_type, n);
}

template <typename T>
inline T Sign(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(x)) return x;
  }
  return static_cast<T>((T(0) < x) - (x < T(0)));
}

// Note [Unimplemented elementwise]: the loops return false for an (op, register class) they do not
// implement (exp on integers, xor on floats): RunFusedRegion asks each op once with no elements,
// before any tile runs, and returns Unimplemented -- an output is never left zeroed or unwritten.
template <typename T>
bool UnaryLoop(OpCode code, const T* a, T* o, int64_t n) {
  switch (code) {
    case OpCode::kAbs: for (int64_t i = 0; i < n; ++i) o[i] = a[i] < 0 ? WrapNeg(a[i]) : a[i]; return true;
    case OpCode::kNegate: for (int64_t i = 0; i < n; ++i) o[i] = WrapNeg(a[i]); return true;
    case OpCode::kSign: for (int64_t i = 0; i < n; ++i) o[i] = Sign(a[i]); return true;
    default: break;
  }
  if constexpr (std::is_floating_point_v<T>) {
    switch (code) {
      case OpCode::kExp: for (int64_t i = 0; i < n; ++i) o[i] = std::exp(a[i]); return true;
      case OpCode::kExpm1: for (int64_t i = 0; i < n; ++i) o[i] = std::expm1(a[i]); return true;
      case OpCode::kLog: for (int64_t i = 0; i < n; ++i) o[i] = std::log(a[i]); return true;
      case OpCode::kLog1p: for (int64_t i = 0; i < n; ++i) o[i] = std::log1p(a[i]); return true;
      case OpCode::kSqrt: for (int64_t i = 0; i < n; ++i) o[i] = std::sqrt(a[i]); return true;
      case OpCode::kRsqrt: for (int64_t i = 0; i < n; ++i) o[i] = T(1) / std::sqrt(a[i]); return true;
      case OpCode::kTanh: for (int64_t i = 0; i < n; ++i) o[i] = std::tanh(a[i]); return true;
      case OpCode::kLogistic: for (int64_t i = 0; i < n; ++i) o[i] = T(1) / (T(1) + std::exp(-a[i])); return true;
      case OpCode::kSine: for (int64_t i = 0; i < n; ++i) o[i] = std::sin(a[i]); return true;
      case OpCode::kCosine: for (int64_t i = 0; i < n; ++i) o[i] = std::cos(a[i]); return true;
      case OpCode::kFloor: for (int64_t i = 0; i < n; ++i) o[i] = std::floor(a[i]); return true;
      case OpCode::kCeil: for (int64_t i = 0; i < n; ++i) o[i] = std::ceil(a[i]); return true;
      case OpCode::kRoundNearestEven: for (int64_t i = 0; i < n; ++i) o[i] = std::nearbyint(a[i]); return true;
      case OpCode::kErf: for (int64_t i = 0; i < n; ++i) o[i] = std::erf(a[i]); return true;
      default: break;
    }
  } else {
    switch (code) {
      case OpCode::kFloor: case OpCode::kCeil: case OpCode::kRoundNearestEven:  // the identity
        std::copy(a, a + n, o);
        return true;
      case OpCode::kNot:
        for (int64_t i = 0; i < n; ++i) o[i] = static_cast<T>(~a[i]);
        return true;
      default: break;
    }
  }
  return false;  // e.g. exp on integers, not on floats
}

template <typename T>
inline T IntDiv(T a, T b) {
  if (b == 0) return T(-1);  // StableHLO: x/0 on integers is all ones; never trap
  // x / -1 without the INT_MIN / -1 trap: a wrapping negation (INT_MIN stays INT_MIN).
  if (std::is_signed_v<T> && b == T(-1)) return WrapNeg(a);
  return a / b;
}
template <typename T>
inline T IntRem(T a, T b) {
  if (b == 0) return a;
  if (std::is_signed_v<T> && b == T(-1)) return 0;
  return a % b;
}

template <typename T>
TPU_ISA_CLONES
bool BinaryLoop(OpCode code, const T* a, const T* b, T* o, int64_t n) {
  switch (code) {
    case OpCode::kAdd: for (int64_t i = 0; i < n; ++i) o[i] = WrapAdd(a[i], b[i]); return true;
    case OpCode::kSubtract: for (int64_t i = 0; i < n; ++i) o[i] = WrapSub(a[i], b[i]); return true;
    case OpCode::kMultiply: for (int64_t i = 0; i < n; ++i) o[i] = WrapMul(a[i], b[i]); return true;
    case OpCode::kMaximum:
      for (int64_t i = 0; i < n; ++i) o[i] = (a[i] > b[i] || a[i] != a[i]) ? a[i] : b[i];
      return true;
    case OpCode::kMinimum:
      for (int64_t i = 0; i < n; ++i) o[i] = (a[i] < b[i] || a[i] != a[i]) ? a[i] : b[i];
      return true;
    default: break;
  }
  if constexpr (std::is_floating_point_v<T>) {
    switch (code) {
      case OpCode::kDivide: for (int64_t i = 0; i < n; ++i) o[i] = a[i] / b[i]; return true;
      case OpCode::kRemainder: for (int64_t i = 0; i < n; ++i) o[i] = std::fmod(a[i], b[i]); return true;
      case OpCode::kPower: for (int64_t i = 0; i < n; ++i) o[i] = std::pow(a[i], b[i]); return true;
      case OpCode::kAtan2: for (int64_t i = 0; i < n; ++i) o[i] = std::atan2(a[i], b[i]); return true;
      default: break;
    }
  } else {
    switch (code) {
      case OpCode::kDivide: for (int64_t i = 0; i < n; ++i) o[i] = IntDiv(a[i], b[i]); return true;
      case OpCode::kRemainder: for (int64_t i = 0; i < n; ++i) o[i] = IntRem(a[i], b[i]); return true;
      case OpCode::kAnd: for (int64_t i = 0; i < n; ++i) o[i] = a[i] & b[i]; return true;
      case OpCode::kOr: for (int64_t i = 0; i < n; ++i) o[i] = a[i] | b[i]; return true;
      case OpCode::kXor: for (int64_t i = 0; i < n; ++i) o[i] = a[i] ^ b[i]; return true;
      case OpCode::kPower:
        for (int64_t i = 0; i < n; ++i) {
          T base = a[i], e = b[i], r = 1;
          if (e < 0) { r = (base == 1) ? 1 : (base == -1 ? ((e & 1) ? -1 : 1) : 0); o[i] = r; continue; }
          while (e) { if (e & 1) r = WrapMul(r, base); base = WrapMul(base, base); e >>= 1; }
          o[i] = r;
        }
        return true;
      default: break;
    }
  }
  return false;  // e.g. and/or/xor on floats, atan2 on integers
}

template <typename T>
TPU_ISA_CLONES
void CompareLoop(CompareDirection dir, const T* a, const T* b, int32_t* o, int64_t n) {
  switch (dir) {
    case CompareDirection::kEQ: for (int64_t i = 0; i < n; ++i) o[i] = a[i] == b[i]; return;
    case CompareDirection::kNE: for (int64_t i = 0; i < n; ++i) o[i] = a[i] != b[i]; return;
    case CompareDirection::kLT: for (int64_t i = 0; i < n; ++i) o[i] = a[i] < b[i]; return;
    case CompareDirection::kLE: for (int64_t i = 0; i < n; ++i) o[i] = a[i] <= b[i]; return;
    case CompareDirection::kGT: for (int64_t i = 0; i < n; ++i) o[i] = a[i] > b[i]; return;
    case CompareDirection::kGE: for (int64_t i = 0; i < n; ++i) o[i] = a[i] >= b[i]; return;
  }
}

template <typename T>
TPU_ISA_CLONES
void SelectLoop(const int32_t* p, const T* a, const T* b, T* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = p[i] ? a[i] : b[i];
}

template <typename T>
TPU_ISA_CLONES
void ClampLoop(const T* lo, const T* x, const T* hi, T* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    T v = x[i];
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(v)) { o[i] = v; continue; }
    }
    v = v < lo[i] ? lo[i] : v;
    o[i] = v > hi[i] ? hi[i] : v;
  }
}

template <typename F>
void DispatchClass(Rc rc, F&& f) {
  switch (rc) {
    case Rc::kF32: f(float{}); break;
    case Rc::kF64: f(double{}); break;
    case Rc::kI64: f(int64_t{}); break;
    case Rc::kI32: f(int32_t{}); break;
  }
}

// Runs one op over registers. `in` are register pointers of the operand classes. False: no kernel
// for this op on this type (Note [Unimplemented elementwise]); with n == 0 that is all it does.
bool RunOp(const Graph& g, const Op& op, const void* const* in, void* out, int64_t n) {
  Rc rc = ClassOf(g.TypeOf(op.operands[0]).dtype);
  switch (GetOpKind(op.code)) {
    case OpKind::Unary: {
      if (op.code == OpCode::kConvert) {
        Convert(rc, in[0], op.type.dtype, out, n);
        return true;
      }
      if (op.code == OpCode::kIsFinite) {
        int32_t* o = static_cast<int32_t*>(out);
        if (rc == Rc::kF32) for (int64_t i = 0; i < n; ++i) o[i] = std::isfinite(static_cast<const float*>(in[0])[i]);
        else if (rc == Rc::kF64) for (int64_t i = 0; i < n; ++i) o[i] = std::isfinite(static_cast<const double*>(in[0])[i]);
        else for (int64_t i = 0; i < n; ++i) o[i] = 1;
        return true;
      }
      if (op.code == OpCode::kNot && op.type.dtype == DType::kBool) {
        const int32_t* a = static_cast<const int32_t*>(in[0]);
        int32_t* o = static_cast<int32_t*>(out);
        for (int64_t i = 0; i < n; ++i) o[i] = !a[i];
        return true;
      }
      if (rc == Rc::kF32 && UnaryF32Simd(op.code, static_cast<const float*>(in[0]), static_cast<float*>(out), n))
        break;
      bool done = false;
      DispatchClass(rc, [&](auto t) {
        using T = decltype(t);
        done = UnaryLoop<T>(op.code, static_cast<const T*>(in[0]), static_cast<T*>(out), n);
      });
      if (!done) return false;
      break;
    }
    case OpKind::Binary: {
      if (op.code == OpCode::kCompare) {
        if (rc == Rc::kF32 && CompareF32Simd(static_cast<CompareDirection>(op.attrs.kind), static_cast<const float*>(in[0]),
                                             static_cast<const float*>(in[1]), static_cast<int32_t*>(out), n))
          return true;
        if (rc == Rc::kI64 && CompareI64Simd(static_cast<CompareDirection>(op.attrs.kind), static_cast<const int64_t*>(in[0]),
                                             static_cast<const int64_t*>(in[1]), static_cast<int32_t*>(out), n))
          return true;
        DispatchClass(rc, [&](auto t) {
          using T = decltype(t);
          CompareLoop<T>(static_cast<CompareDirection>(op.attrs.kind), static_cast<const T*>(in[0]),
                         static_cast<const T*>(in[1]), static_cast<int32_t*>(out), n);
        });
        return true;
      }
      if (rc == Rc::kF32 && BinaryF32Simd(op.code, static_cast<const float*>(in[0]),
                                          static_cast<const float*>(in[1]), static_cast<float*>(out), n))
        break;
      if (rc == Rc::kI64 && BinaryI64Simd(op.code, static_cast<const int64_t*>(in[0]),
                                          static_cast<const int64_t*>(in[1]), static_cast<int64_t*>(out), n))
        break;
      if (rc == Rc::kI32 && BinaryI32Simd(op.code, static_cast<const int32_t*>(in[0]),
                                          static_cast<const int32_t*>(in[1]), static_cast<int32_t*>(out), n))
        break;
      bool done = false;
      DispatchClass(rc, [&](auto t) {
        using T = decltype(t);
        done = BinaryLoop<T>(op.code, static_cast<const T*>(in[0]), static_cast<const T*>(in[1]),
                             static_cast<T*>(out), n);
      });
      if (!done) return false;
      break;
    }
    case OpKind::Ternary: {
      Rc vc = ClassOf(op.type.dtype);
      if (op.code == OpCode::kSelect && vc == Rc::kF32) {
        SelectF32Simd(static_cast<const int32_t*>(in[0]), static_cast<const float*>(in[1]),
                      static_cast<const float*>(in[2]), static_cast<float*>(out), n);
        return true;
      }
      DispatchClass(vc, [&](auto t) {
        using T = decltype(t);
        if (op.code == OpCode::kSelect)
          SelectLoop<T>(static_cast<const int32_t*>(in[0]), static_cast<const T*>(in[1]),
                        static_cast<const T*>(in[2]), static_cast<T*>(out), n);
        else
          ClampLoop<T>(static_cast<const T*>(in[0]), static_cast<const T*>(in[1]),
                       static_cast<const T*>(in[2]), static_cast<T*>(out), n);
      });
      return true;  // select/clamp pick existing values: no rounding needed
    }
    default:
      return false;  // not an elementwise op
  }
  RoundToDType(out, op.type.dtype, n);
  return true;
}

// Merges dimensions that are contiguous for every operand and drops size-1 dims.
void Coalesce(Dims& dims, SmallVector<Dims*, 8>& strides) {
  Dims nd;
  std::vector<Dims> ns(strides.size());
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 1) continue;
    bool merge = !nd.empty();
    for (size_t k = 0; merge && k < strides.size(); ++k)
      merge = ns[k].back() == (*strides[k])[d] * dims[d];
    if (merge) {
      nd.back() *= dims[d];
      for (size_t k = 0; k < strides.size(); ++k) ns[k].back() = (*strides[k])[d];
    } else {
      nd.push_back(dims[d]);
      for (size_t k = 0; k < strides.size(); ++k) ns[k].push_back((*strides[k])[d]);
    }
  }
  dims = std::move(nd);
  for (size_t k = 0; k < strides.size(); ++k) *strides[k] = std::move(ns[k]);
}

struct Operand {
  char* base;
  DType dtype;
  Dims strides;
  int elem;
};

// Iterates a (coalesced) space in tiles of at most `tile` elements, calling
// fn(offsets_in_elements[], len) per tile.
template <typename Ops, typename F>
void ForEachTile(const Dims& dims, const Ops& ops, int64_t tile, F&& fn) {
  int rank = static_cast<int>(dims.size());
  int64_t inner = rank ? dims.back() : 1;
  int64_t outer = 1;
  for (int d = 0; d + 1 < rank; ++d) outer *= dims[d];
  int64_t chunks = (inner + tile - 1) / tile;
  int64_t tiles = outer * chunks;
  int64_t total = outer * inner;
  auto body = [&](int64_t b, int64_t e) {
    SmallVector<int64_t, 16> off(ops.size());
    for (int64_t t = b; t < e; ++t) {
      int64_t o = t / chunks, c = t % chunks;
      int64_t start = c * tile;
      int64_t len = std::min(tile, inner - start);
      for (size_t k = 0; k < ops.size(); ++k) {
        int64_t rem = o, acc = 0;
        for (int d = rank - 2; d >= 0; --d) {
          acc += (rem % dims[d]) * ops[k].strides[d];
          rem /= dims[d];
        }
        off[k] = acc + (rank ? start * ops[k].strides[rank - 1] : 0);
      }
      fn(off.data(), len);
    }
  };
  if (ThreadPool::Worth(total))
    ThreadPool::Get().ParallelFor(tiles, std::max<int64_t>(1, 8192 / std::max<int64_t>(1, std::min(tile, inner))), body);
  else body(0, tiles);
}

// Iterates a (coalesced) space of rank >= 2 in tiles of up to `rows` whole rows (rows: the
// second-to-last dim), calling fn(offsets_in_elements_of_the_first_row[], rows_in_tile).
template <typename Ops, typename F>
void ForEachRowTile(const Dims& dims, const Ops& ops, int64_t rows, F&& fn) {
  const int rank = static_cast<int>(dims.size());
  const int64_t inner = dims[rank - 1], mid = dims[rank - 2];
  int64_t outer = 1;
  for (int d = 0; d + 2 < rank; ++d) outer *= dims[d];
  const int64_t chunks = (mid + rows - 1) / rows, tiles = outer * chunks;
  auto body = [&](int64_t b, int64_t e) {
    SmallVector<int64_t, 16> off(ops.size());
    for (int64_t t = b; t < e; ++t) {
      int64_t o = t / chunks, r0 = t % chunks * rows;
      for (size_t k = 0; k < ops.size(); ++k) {
        int64_t rem = o, acc = 0;
        for (int d = rank - 3; d >= 0; --d) {
          acc += (rem % dims[d]) * ops[k].strides[d];
          rem /= dims[d];
        }
        off[k] = acc + r0 * ops[k].strides[rank - 2];
      }
      fn(off.data(), std::min(rows, mid - r0));
    }
  };
  if (ThreadPool::Worth(outer * mid * inner))
    ThreadPool::Get().ParallelFor(tiles, std::max<int64_t>(1, 8192 / (rows * inner)), body);
  else
    body(0, tiles);
}

// Bytes one element takes in a register of its class.
int RegBytes(DType t) { return ClassOf(t) == Rc::kF64 || ClassOf(t) == Rc::kI64 ? 8 : 4; }

}  // namespace

Status RunFusedRegion(const Graph& g, const FusedRegion& region, const std::vector<View>& views) {
  const int nin = static_cast<int>(region.inputs.size());
  const int nops = static_cast<int>(region.ops.size());
  // Reused per thread: a tiny op's whole run costs about as much as one heap allocation. (Bound
  // to a local reference so the pool threads running tiles use this thread's vector.)
  thread_local std::vector<Operand> reused_operands;
  std::vector<Operand>& operands = reused_operands;
  operands.clear();
  Dims dims = region.shape;
  for (int v : region.inputs) {
    const View& w = views[v];
    operands.push_back({static_cast<char*>(w.data), w.dtype, w.strides, DTypeSize(w.dtype)});
  }
  const int nout = static_cast<int>(region.outputs.size());
  const std::vector<int>& out_slot = region.output_slots;
  for (int k = 0; k < nout; ++k) {
    const View& w = views[region.outputs[k]];
    operands.push_back({static_cast<char*>(w.data), w.dtype, w.strides, DTypeSize(w.dtype)});
  }
  for (auto& o : operands)
    if (o.strides.size() != dims.size()) return Internal("fused region operand rank mismatch");
  {
    SmallVector<Dims*, 8> sp;
    for (auto& o : operands) sp.push_back(&o.strides);
    Coalesce(dims, sp);
  }
  int rank = static_cast<int>(dims.size());
  auto inner_stride = [&](const Operand& o) { return rank ? o.strides[rank - 1] : 1; };
  // Note [Row tiles]: when the innermost dim is short and does not merge with the next one (a
  // per-channel operand of an NCHW tensor with a small H * W, a bias over short rows), a tile
  // holds several whole rows rather than one short row: the per-tile cost is paid once for all
  // of them. Operands contiguous across those rows are read (and written) in place; the others
  // are loaded and stored row by row.
  const int64_t inner = rank ? dims[rank - 1] : 1;
  const bool row_tiles = rank >= 2 && inner <= kTile / 2;
  auto flat = [&](const Operand& o) {
    return inner_stride(o) == 1 && (!row_tiles || o.strides[rank - 2] == inner);
  };
  // The last op may write straight into its output when that output is contiguous and already
  // in register layout: every other op has read its inputs by then (safe for in-place updates).
  int direct_out = -1;
  int last_slot = nin + nops - 1;
  for (int k = 0; k < nout; ++k) {
    const Operand& o = operands[nin + k];
    if (out_slot[k] == last_slot && flat(o) && IsRegisterLayout(o.dtype)) direct_out = k;
  }

  const int nslots = nin + nops;
  if (nslots > kMaxRegionValues) return Internal("fused region with more values than register slots");
  // Every op asked once, with no elements, whether it has a kernel for its types: an unsupported
  // one fails the region before anything is written (Note [Unimplemented elementwise]).
  for (int i = 0; i < nops; ++i) {
    const Op& op = g.ops[region.ops[i]];
    const void* none[3] = {nullptr, nullptr, nullptr};
    if (!RunOp(g, op, none, nullptr, 0)) {
      return Unimplemented(std::string(OpName(op.code)) + " is not implemented for " +
                           DTypeName(g.TypeOf(op.operands[0]).dtype) + " operands on the host executor");
    }
  }
  // Inputs that are one value for the whole region (a scalar broadcast: every stride 0) are
  // splatted once per call into a tile that every thread reads (ops never write their inputs).
  thread_local std::vector<char> reused_splats;
  std::vector<char>& splats = reused_splats;
  // With row tiles (Note [Row tiles]), an input that is one row broadcast over all the others (a
  // bias, a norm's weight: every stride 0 but the innermost) is the same in every tile: it is
  // laid out once per call as a tile's worth of rows, like a scalar's splat.
  SmallVector<int, 8> splat_of(nin, -1);
  SmallVector<bool, 8> row_splat(nin, false);
  int nsplats = 0;
  for (int k = 0; k < nin; ++k) {
    bool scalar = true, row = row_tiles;
    for (int d = 0; d < rank; ++d) {
      scalar &= operands[k].strides[d] == 0;
      if (d + 1 < rank) row &= operands[k].strides[d] == 0;
    }
    if (scalar || row) {
      splat_of[k] = nsplats++;
      row_splat[k] = !scalar;
    }
  }
  // Each value that needs storage gets a tile of it (Note [Tile length]).
  const bool composites = !region.composite.empty();
  int store_of[kMaxRegionValues];
  int nstored = 0;
  for (int k = 0; k < nin; ++k) {
    const Operand& o = operands[k];
    bool in_place = splat_of[k] >= 0 || (flat(o) && IsRegisterLayout(o.dtype));
    store_of[k] = in_place ? -1 : nstored++;
  }
  // Note [Register-preserving converts]: a convert whose result's register holds the same value
  // (bfloat16 -> float32: the register already holds it as float32) reads its operand's register
  // instead of copying it (a bfloat16 op upcasts each input so: a third of the region's work).
  // Note [Converts the store rounds]: a float32 -> bfloat16/float16 convert whose value only
  // leaves the region, through outputs of its own dtype, aliases its operand too: the output's
  // store rounds to nearest even exactly as the convert would have (rounding twice is rounding
  // once), so the region skips a copy and a rounding pass per tile.
  bool read_in_region[kMaxRegionValues] = {};
  for (int i = 0; i < nops; ++i)
    for (int s : region.operand_slots[i]) read_in_region[s] = true;
  auto store_rounds = [&](int slot, DType from, DType to) {
    if (from != DType::kF32 || (to != DType::kBF16 && to != DType::kF16) || read_in_region[slot]) return false;
    for (int k = 0; k < nout; ++k)
      if (out_slot[k] == slot && operands[nin + k].dtype != to) return false;
    return true;
  };
  int alias_of[kMaxRegionValues];
  for (int i = 0; i < nops; ++i) {
    const Op& op = g.ops[region.ops[i]];
    const bool direct = direct_out >= 0 && nin + i == last_slot;
    const DType from = op.code == OpCode::kConvert ? g.TypeOf(op.operands[0]).dtype : op.type.dtype;
    alias_of[nin + i] = !direct && !(composites && region.composite[i] != FusedRegion::Composite::kNone) &&
                                op.code == OpCode::kConvert &&
                                (ConvertKeepsRegister(from, op.type.dtype) || store_rounds(nin + i, from, op.type.dtype))
                            ? region.operand_slots[i][0]
                            : -1;
    bool none = direct || alias_of[nin + i] >= 0 ||
                (composites && region.composite[i] == FusedRegion::Composite::kCovered);
    store_of[nin + i] = none ? -1 : nstored++;
  }
  // A splat is filled to the tile's length at every call: it counts as a stored value.
  const int64_t tile = TileLength(nstored + nsplats);
  const int64_t tile_rows = row_tiles ? std::max<int64_t>(1, tile / inner) : 1;  // rows a row tile holds
  splats.resize(static_cast<size_t>(nsplats) * tile * 8 + 64);
  for (int k = 0; k < nin; ++k) {
    if (splat_of[k] < 0) continue;
    char* t = splats.data() + splat_of[k] * tile * 8;
    if (row_splat[k]) {
      const int rb = RegBytes(operands[k].dtype);
      for (int64_t j = 0; j < tile_rows; ++j) Load(operands[k].dtype, operands[k].base, inner_stride(operands[k]), inner, t + j * inner * rb);
      continue;
    }
    Load(operands[k].dtype, operands[k].base, 0, 1, t);
    if (ClassOf(operands[k].dtype) == Rc::kF64 || ClassOf(operands[k].dtype) == Rc::kI64) {
      uint64_t* r = reinterpret_cast<uint64_t*>(t);
      std::fill(r + 1, r + tile, r[0]);
    } else {
      uint32_t* r = reinterpret_cast<uint32_t*>(t);
      std::fill(r + 1, r + tile, r[0]);
    }
  }
  // A tile: `m` rows of len / m elements each (m == 1 unless row_tiles), the first at `off`.
  auto run_tile = [&](const int64_t* off, int64_t m, int64_t len) {
    // nstored * tile * 8 <= max(kL1Budget, nstored * kTile * 8), within this (TileLength).
    alignas(64) thread_local static char storage_bytes[kMaxRegionValues * kTile * 8];
    auto storage = [&](int slot) { return storage_bytes + store_of[slot] * tile * 8; };
    const int64_t row = len / m;
    void* regs[kMaxRegionValues];
    for (int k = 0; k < nin; ++k) {
      const Operand& o = operands[k];
      const char* p = o.base + off[k] * o.elem;
      int64_t s = inner_stride(o);
      if (splat_of[k] >= 0) {
        regs[k] = splats.data() + splat_of[k] * tile * 8;
      } else if (store_of[k] < 0) {
        regs[k] = const_cast<char*>(p);
      } else {
        char* t = storage(k);
        regs[k] = t;
        const int rb = RegBytes(o.dtype);
        for (int64_t j = 0; j < m; ++j, t += row * rb) {
          const char* pj = m == 1 ? p : p + o.strides[rank - 2] * j * o.elem;
          if (s == 0) {
            // Broadcast along the row: load one element, splat. A typed fill (a per-element
            // memcpy of a runtime size is a library call per element).
            Load(o.dtype, pj, 0, 1, t);
            if (rb == 8) {
              uint64_t* r = reinterpret_cast<uint64_t*>(t);
              std::fill(r + 1, r + row, r[0]);
            } else {
              uint32_t* r = reinterpret_cast<uint32_t*>(t);
              std::fill(r + 1, r + row, r[0]);
            }
          } else {
            Load(o.dtype, pj, s, row, t);
          }
        }
      }
    }
    for (int i = 0; i < nops; ++i) {
      using C = FusedRegion::Composite;
      const C composite = composites ? region.composite[i] : C::kNone;
      if (composite == C::kCovered) continue;  // only its chain reads it (Note [Region composites])
      const Op& op = g.ops[region.ops[i]];
      int slot = nin + i;
      if (alias_of[slot] >= 0) {  // Note [Register-preserving converts]
        regs[slot] = regs[alias_of[slot]];
        continue;
      }
      void* out = store_of[slot] >= 0 ? storage(slot) : nullptr;
      if (direct_out >= 0 && slot == last_slot) {
        const Operand& o = operands[nin + direct_out];
        out = o.base + off[nin + direct_out] * o.elem;
      }
      if (composite == C::kGeluErf) {
        GeluErfF32Simd(static_cast<const float*>(regs[region.composite_input[i]]), static_cast<float*>(out), len);
      } else if (composite == C::kGeluErfBackward) {
        GeluErfBackwardF32Simd(static_cast<const float*>(regs[region.composite_input[i]]),
                               static_cast<const float*>(regs[region.composite_input2[i]]), static_cast<float*>(out), len);
      } else {
        const void* in[3];
        const auto& slots = region.operand_slots[i];
        for (size_t j = 0; j < slots.size(); ++j) in[j] = regs[slots[j]];
        (void)RunOp(g, op, in, out, len);  // every op was checked above
      }
      regs[slot] = out;
    }
    for (int k = 0; k < nout; ++k) {
      if (k == direct_out) continue;
      const Operand& o = operands[nin + k];
      const char* r = static_cast<const char*>(regs[out_slot[k]]);
      const int rb = RegBytes(o.dtype);
      for (int64_t j = 0; j < m; ++j)
        Store(o.dtype, r + j * row * rb, row, o.base + (off[nin + k] + (m == 1 ? 0 : o.strides[rank - 2] * j)) * o.elem,
              inner_stride(o));
    }
  };
  if (row_tiles) {
    ForEachRowTile(dims, operands, tile_rows, [&](const int64_t* off, int64_t m) { run_tile(off, m, m * inner); });
  } else {
    ForEachTile(dims, operands, tile, [&](const int64_t* off, int64_t len) { run_tile(off, 1, len); });
  }
  return Status::Ok();
}

namespace {
// len elements of `elem` bytes at q (stride in elements), each a copy of value.
void FillRun(const char* value, int elem, char* q, int64_t len, int64_t stride) {
  if (stride == 1 && std::all_of(value, value + elem, [&](char c) { return c == value[0]; })) {
    std::memset(q, value[0], static_cast<size_t>(len * elem));
    return;
  }
  auto fill = [&](auto v) {
    using T = decltype(v);
    std::memcpy(&v, value, sizeof(T));
    T* t = reinterpret_cast<T*>(q);
    if (stride == 1) std::fill(t, t + len, v);
    else for (int64_t i = 0; i < len; ++i) t[i * stride] = v;
  };
  switch (elem) {
    case 1: fill(uint8_t{}); break;
    case 2: fill(uint16_t{}); break;
    case 4: fill(uint32_t{}); break;
    default: fill(uint64_t{}); break;
  }
}
}  // namespace

// bytes (a multiple of 4, at most 64) from p to q, which do not overlap: in 16- or 4-byte pieces of
// fixed size, which the compiler copies in registers.
inline void CopyWords(const char* p, char* q, int64_t bytes) {
  int64_t i = 0;
  for (; i + 16 <= bytes; i += 16) std::memcpy(q + i, p + i, 16);
  for (; i < bytes; i += 4) std::memcpy(q + i, p + i, 4);
}

Status CopyView(const View& src, const View& dst) {
  if (src.dims != dst.dims) return Internal("CopyView shape mismatch");
  std::vector<Operand> operands;
  operands.push_back({static_cast<char*>(src.data), src.dtype, src.strides, DTypeSize(src.dtype)});
  operands.push_back({static_cast<char*>(dst.data), dst.dtype, dst.strides, DTypeSize(dst.dtype)});
  Dims dims = src.dims;
  SmallVector<Dims*, 8> sp;
  sp.push_back(&operands[0].strides);
  sp.push_back(&operands[1].strides);
  Coalesce(dims, sp);
  int rank = static_cast<int>(dims.size());
  int64_t s0 = rank ? operands[0].strides[rank - 1] : 1, s1 = rank ? operands[1].strides[rank - 1] : 1;
  bool same = src.dtype == dst.dtype;
  int elem = DTypeSize(src.dtype);
  if (same && CopyTransposed(operands[0].base, operands[1].base, elem, dims, operands[0].strides, operands[1].strides))
    return Status::Ok();
  // a memmove or a fill needs no storage
  const int64_t tile = (same && s0 == 1 && s1 == 1) || s0 == 0 ? kMaxTile : kTile;
  auto copy_run = [&](const char* p, char* q, int64_t len) {  // len <= tile
    if (same && s0 == 1 && s1 == 1) {
      std::memmove(q, p, len * elem);
      return;
    }
    alignas(64) char reg[kTile * 8];
    if (s0 == 0) {  // one value along the run (a broadcast: a scatter's zeros): converted once, filled
      alignas(64) char reg2[8];
      char value[8];
      Load(src.dtype, p, 0, 1, reg);
      if (ClassOf(src.dtype) == ClassOf(dst.dtype) && !(dst.dtype == DType::kBool && src.dtype != DType::kBool)) {
        RoundToDType(reg, dst.dtype, 1);
        Store(dst.dtype, reg, 1, value, 1);
      } else {
        Convert(ClassOf(src.dtype), reg, dst.dtype, reg2, 1);
        Store(dst.dtype, reg2, 1, value, 1);
      }
      FillRun(value, operands[1].elem, q, len, s1);
      return;
    }
    alignas(64) char reg2[kTile * 8];
    Load(src.dtype, p, s0, len, reg);
    if (ClassOf(src.dtype) == ClassOf(dst.dtype) && !(dst.dtype == DType::kBool && src.dtype != DType::kBool)) {
      RoundToDType(reg, dst.dtype, len);
      Store(dst.dtype, reg, len, q, s1);
    } else {
      Convert(ClassOf(src.dtype), reg, dst.dtype, reg2, len);
      Store(dst.dtype, reg2, len, q, s1);
    }
  };
  const int64_t inner = rank ? dims[rank - 1] : 1;
  if (rank >= 2 && inner < tile) {
    // Note [Row tiles]: short rows (a concatenate's pieces, a slice's rows) several per tile.
    const int64_t ps = operands[0].strides[rank - 2], qs = operands[1].strides[rank - 2];
    const int64_t row_bytes = inner * elem;
    if (same && s0 == 1 && s1 == 1 && row_bytes % 4 == 0 && row_bytes <= 64) {
      // Rows of a few words (a batch norm's H x W of 2 x 2 gathered per channel): copied in words,
      // not through a library call per row.
      ForEachRowTile(dims, operands, std::max<int64_t>(1, tile / inner), [&](const int64_t* off, int64_t m) {
        const char* p = operands[0].base + off[0] * elem;
        char* q = operands[1].base + off[1] * elem;
        for (int64_t j = 0; j < m; ++j, p += ps * elem, q += qs * elem) CopyWords(p, q, row_bytes);
      });
      return Status::Ok();
    }
    ForEachRowTile(dims, operands, std::max<int64_t>(1, tile / inner), [&](const int64_t* off, int64_t m) {
      for (int64_t j = 0; j < m; ++j)
        copy_run(operands[0].base + (off[0] + j * ps) * elem, operands[1].base + (off[1] + j * qs) * operands[1].elem,
                 inner);
    });
  } else {
    ForEachTile(dims, operands, tile, [&](const int64_t* off, int64_t len) {
      copy_run(operands[0].base + off[0] * elem, operands[1].base + off[1] * operands[1].elem, len);
    });
  }
  return Status::Ok();
}

}  // namespace tpu::host
