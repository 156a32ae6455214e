// Register classes (Note [Register classes], registers.h): loads, stores, roundings and conversions.
#include "runtime/host/registers.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "runtime/host/half.h"
#include "runtime/host/reduce_simd.h"

namespace tpu::host {

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

namespace {

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

}  // namespace

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

namespace {

template <typename R, typename M>
TPU_ISA_CLONES
void LoadAs(const char* p, int64_t row_bytes, int64_t stride, int64_t n, int64_t rows, R* out) {
  for (int64_t j = 0; j < rows; ++j, p += row_bytes, out += n) {
    const M* m = reinterpret_cast<const M*>(p);
    if (stride == 1) for (int64_t i = 0; i < n; ++i) out[i] = static_cast<R>(m[i]);
    else for (int64_t i = 0; i < n; ++i) out[i] = static_cast<R>(m[i * stride]);
  }
}

}  // namespace

void Load(DType t, const char* p, int64_t stride, int64_t n, void* reg) { LoadRows(t, p, 0, stride, n, 1, reg); }

namespace {

// reg[j] (j < rows) spread over reg[j * n, (j + 1) * n), last row first: row j's values start at
// j * n >= j, so every value is read before its place is written.
template <typename R>
TPU_ISA_CLONES
void SpreadRows(R* reg, int64_t n, int64_t rows) {
  for (int64_t j = rows - 1; j >= 0; --j) {
    const R v = reg[j];
    R* o = reg + j * n;
    for (int64_t i = 0; i < n; ++i) o[i] = v;
  }
}

}  // namespace

void LoadRowsSplat(DType t, const char* p, int64_t row_bytes, int64_t n, int64_t rows, void* reg) {
  LoadRows(t, p, row_bytes, 0, 1, rows, reg);  // each row's element, back to back
  if (RegBytes(t) == 8) SpreadRows(static_cast<uint64_t*>(reg), n, rows);
  else SpreadRows(static_cast<uint32_t*>(reg), n, rows);
}

void LoadRows(DType t, const char* p, int64_t row_bytes, int64_t stride, int64_t n, int64_t rows, void* reg) {
  auto each_row = [&](auto&& row) {
    for (int64_t j = 0; j < rows; ++j) row(p + j * row_bytes, static_cast<float*>(reg) + j * n);
  };
  switch (t) {
    case DType::kF32: LoadAs<float, float>(p, row_bytes, stride, n, rows, static_cast<float*>(reg)); break;
    case DType::kF64: LoadAs<double, double>(p, row_bytes, stride, n, rows, static_cast<double*>(reg)); break;
    case DType::kBF16:
      each_row([&](const char* pr, float* o) {
        const uint16_t* m = reinterpret_cast<const uint16_t*>(pr);
        if (stride == 1) tpu::host::Bf16ToF32(m, o, n);  // Highway
        else for (int64_t i = 0; i < n; ++i) o[i] = Bf16ToF32(m[i * stride]);
      });
      break;
    case DType::kF16:
      each_row([&](const char* pr, float* o) {
        const Half* m = reinterpret_cast<const Half*>(pr);
        for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(m[i * stride]);
      });
      break;
    case DType::kI64: LoadAs<int64_t, int64_t>(p, row_bytes, stride, n, rows, static_cast<int64_t*>(reg)); break;
    case DType::kU64: LoadAs<int64_t, uint64_t>(p, row_bytes, stride, n, rows, static_cast<int64_t*>(reg)); break;
    case DType::kI32: LoadAs<int32_t, int32_t>(p, row_bytes, stride, n, rows, static_cast<int32_t*>(reg)); break;
    case DType::kU32: LoadAs<int64_t, uint32_t>(p, row_bytes, stride, n, rows, static_cast<int64_t*>(reg)); break;
    case DType::kI16: LoadAs<int32_t, int16_t>(p, row_bytes, stride, n, rows, static_cast<int32_t*>(reg)); break;
    case DType::kI8: LoadAs<int32_t, int8_t>(p, row_bytes, stride, n, rows, static_cast<int32_t*>(reg)); break;
    case DType::kU8: LoadAs<int32_t, uint8_t>(p, row_bytes, stride, n, rows, static_cast<int32_t*>(reg)); break;
    case DType::kBool:
      for (int64_t j = 0; j < rows; ++j) {
        const uint8_t* m = reinterpret_cast<const uint8_t*>(p + j * row_bytes);
        int32_t* o = static_cast<int32_t*>(reg) + j * n;
        for (int64_t i = 0; i < n; ++i) o[i] = m[i * stride] != 0;
      }
      break;
  }
}

namespace {

template <typename R, typename M>
TPU_ISA_CLONES
void StoreAs(const R* in, int64_t n, int64_t rows, char* p, int64_t row_bytes, int64_t stride) {
  for (int64_t j = 0; j < rows; ++j, p += row_bytes, in += n) {
    M* m = reinterpret_cast<M*>(p);
    if (stride == 1) for (int64_t i = 0; i < n; ++i) m[i] = static_cast<M>(in[i]);
    else for (int64_t i = 0; i < n; ++i) m[i * stride] = static_cast<M>(in[i]);
  }
}

}  // namespace

void Store(DType t, const void* reg, int64_t n, char* p, int64_t stride) { StoreRows(t, reg, n, 1, p, 0, stride); }

void StoreRows(DType t, const void* reg, int64_t n, int64_t rows, char* p, int64_t row_bytes, int64_t stride) {
  auto each_row = [&](auto&& row) {
    for (int64_t j = 0; j < rows; ++j) row(static_cast<const float*>(reg) + j * n, p + j * row_bytes);
  };
  switch (t) {
    case DType::kF32: StoreAs<float, float>(static_cast<const float*>(reg), n, rows, p, row_bytes, stride); break;
    case DType::kF64: StoreAs<double, double>(static_cast<const double*>(reg), n, rows, p, row_bytes, stride); break;
    case DType::kBF16:
      each_row([&](const float* r, char* pr) {
        uint16_t* m = reinterpret_cast<uint16_t*>(pr);
        if (stride == 1) tpu::host::F32ToBf16(r, m, n);  // Highway
        else for (int64_t i = 0; i < n; ++i) m[i * stride] = F32ToBf16(r[i]);
      });
      break;
    case DType::kF16:
      each_row([&](const float* r, char* pr) {
        Half* m = reinterpret_cast<Half*>(pr);
        for (int64_t i = 0; i < n; ++i) m[i * stride] = static_cast<Half>(r[i]);
      });
      break;
    case DType::kI64: StoreAs<int64_t, int64_t>(static_cast<const int64_t*>(reg), n, rows, p, row_bytes, stride); break;
    case DType::kU64: StoreAs<int64_t, uint64_t>(static_cast<const int64_t*>(reg), n, rows, p, row_bytes, stride); break;
    case DType::kI32: StoreAs<int32_t, int32_t>(static_cast<const int32_t*>(reg), n, rows, p, row_bytes, stride); break;
    case DType::kU32: StoreAs<int64_t, uint32_t>(static_cast<const int64_t*>(reg), n, rows, p, row_bytes, stride); break;
    case DType::kI16: StoreAs<int32_t, int16_t>(static_cast<const int32_t*>(reg), n, rows, p, row_bytes, stride); break;
    case DType::kI8: StoreAs<int32_t, int8_t>(static_cast<const int32_t*>(reg), n, rows, p, row_bytes, stride); break;
    case DType::kU8: case DType::kBool:
      StoreAs<int32_t, uint8_t>(static_cast<const int32_t*>(reg), n, rows, p, row_bytes, stride);
      break;
  }
}

namespace {

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

}  // namespace

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

}  // namespace tpu::host
