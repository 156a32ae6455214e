// Helpers for the host executor tests: build a program, compile it with the host backend's
// compile, and run it through HostExecutor with bindings over std::vector memory.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "ir/builder.h"
#include "runtime/host/executor.h"
#include "runtime/host/host_backend.h"

namespace tpu::host::testing {

inline TensorType T(DType dt, Dims dims) { return TensorType{dt, std::move(dims)}; }

// A binding over caller-owned memory: `data` points at the first element; strides in elements
// (contiguous when empty).
inline Binding Bind(void* data, DType dt, Dims dims, Dims strides = {}) {
  return Binding::External(data, dt, std::move(dims), std::move(strides));
}
template <typename T>
Binding Bind(std::vector<T>& v, DType dt, Dims dims, Dims strides = {}, int64_t offset = 0) {
  return Bind(v.data() + offset, dt, std::move(dims), std::move(strides));
}

// The chain softmax.cc emits (Note [Row chains]): x -> max, broadcast, subtract, exp, sum, then
// divide (softmax) or log, broadcast, subtract (log_softmax). Returns the result value; *shifted
// (when asked): x - max, which a test makes a result to keep the chain op by op.
inline int SoftmaxChain(Builder& b, int x, int dim, bool log, int* shifted = nullptr) {
  const Dims full = b.TypeOf(x).dims;
  const DType t = b.TypeOf(x).dtype;
  Dims kept;
  for (int d = 0; d < static_cast<int>(full.size()); ++d)
    if (d != dim) kept.push_back(d);
  int m = b.Reduce(x, b.Constant(-INFINITY, t), {dim}, ReduceKind::kMax);
  int s = b.Binary(OpCode::kSubtract, x, b.BroadcastInDim(m, full, kept));
  if (shifted) *shifted = s;
  int e = b.Unary(OpCode::kExp, s);
  int z = b.Reduce(e, b.Constant(0.0, t), {dim}, ReduceKind::kAdd);
  return log ? b.Binary(OpCode::kSubtract, s, b.BroadcastInDim(b.Unary(OpCode::kLog, z), full, kept))
             : b.Binary(OpCode::kDivide, e, b.BroadcastInDim(z, full, kept));
}

// Binding is move-only, so it cannot sit in an initializer list.
template <typename... B>
std::vector<Binding> Bindings(B&&... b) {
  std::vector<Binding> v;
  (v.push_back(std::forward<B>(b)), ...);
  return v;
}

inline ExecutablePtr CompileBuilder(Builder& b) {
  auto g = b.Finish();
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  if (!g.ok()) return nullptr;
  CompileOptions options;
  options.name = "host_test";
  auto exe = CompileForHost(g.value(), options);
  EXPECT_TRUE(exe.ok()) << exe.status().ToString();
  return exe.ok() ? ExecutablePtr(exe.value()) : nullptr;
}

inline Status RunExe(const ExecutablePtr& exe, std::vector<Binding> params,
                     std::vector<Binding> results) {
  if (!exe) return Internal("no executable");
  Launch launch{exe, std::move(params), std::move(results)};
  HostExecutor executor;
  RunReport report;
  return executor.Run(launch, &report);
}

// Builds, compiles and runs; the results are written through the result bindings.
inline Status RunProgram(Builder& b, std::vector<Binding> params, std::vector<Binding> results) {
  return RunExe(CompileBuilder(b), std::move(params), std::move(results));
}

// bfloat16 by hand: round-to-nearest-even of the float's top 16 bits; NaN stays NaN.
inline uint16_t ToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (std::isnan(f)) return 0x7FC0;
  uint32_t lsb = (bits >> 16) & 1;
  return static_cast<uint16_t>((bits + 0x7FFF + lsb) >> 16);
}
inline float FromBf16(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline float RoundBf16(float f) { return FromBf16(ToBf16(f)); }

// Deterministic small values: exactly representable, so sums and products are exact.
inline float SmallValue(int64_t i, int salt = 0) {
  return static_cast<float>(((i * 7 + salt * 13) % 23) - 11) * 0.25f;
}

}  // namespace tpu::host::testing
