// Note [Region composites] (composite.cc): op chains inside a fused region that one kernel
// computes -- gelu's erf form, silu and their backward -- matched exactly, run as that kernel, and
// checked against the op-by-op chain and against double.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <vector>

#include <gtest/gtest.h>

#include "base/metrics.h"
#include "base/options.h"
#include "runtime/host/elementwise_simd.h"
#include "runtime/host/half.h"
#include "runtime/host/host_test_util.h"
#include "runtime/host/plan.h"

namespace tpu::host::testing {
namespace {

// gelu's erf-form chain as csrc/torch/lower/activation.cc emits it (Note [Region composites]).
int GeluChain(Builder& b, int x) {
  int half = b.Binary(OpCode::kMultiply, x, b.ScalarLike(0.5, x));
  int cdf2 = b.Binary(OpCode::kAdd, b.ScalarLike(1.0, x),
                      b.Unary(OpCode::kErf, b.Binary(OpCode::kMultiply, x, b.ScalarLike(M_SQRT1_2, x))));
  int r = b.Binary(OpCode::kMultiply, half, cdf2);
  return b.Select(b.Compare(CompareDirection::kEQ, x, b.ScalarLike(-INFINITY, x)), b.ScalarLike(0.0, x), r);
}

// Which function composites (gelu, silu) the plan of `b` runs, by kind (empty: none matched);
// with `chains`, the binary chains' lengths instead (Note [Binary chains]).
std::vector<FusedRegion::Composite> CompositesOf(const ExecutablePtr& exe, std::vector<size_t>* chains = nullptr) {
  using C = FusedRegion::Composite;
  std::vector<C> out;
  const auto* host = static_cast<const HostExecutable*>(exe.get());
  for (const FusedRegion& r : host->regions)
    for (size_t i = 0; i < r.composite.size(); ++i) {
      if (r.composite[i] == C::kBinaryChain && chains) chains->push_back(r.chain[i].size());
      if (r.composite[i] != C::kNone && r.composite[i] != C::kCovered && r.composite[i] != C::kBinaryChain)
        out.push_back(r.composite[i]);
    }
  return out;
}

TEST(CompositeTest, GeluChainRunsAsOneKernelAndMatchesTheChain) {
  const int64_t n = 70001;  // several tiles and a tail
  std::vector<float> xv(n);
  for (int64_t i = 0; i < n; ++i) xv[i] = -7.0f + 14.0f * static_cast<float>(i) / (n - 1);
  xv[0] = -INFINITY;
  xv[1] = INFINITY;
  xv[2] = NAN;
  xv[3] = -0.0f;
  std::vector<float> on(n), off(n), extra(n);
  for (bool composites : {true, false}) {
    SCOPED_TRACE(composites);
    ASSERT_TRUE(Options::Get().Set("host_composites", composites ? "1" : "0").ok());
    Builder b;
    int x = b.Param(T(DType::kF32, {n}));
    b.Result(b.Unary(OpCode::kNegate, GeluChain(b, b.Unary(OpCode::kAbs, b.Unary(OpCode::kNegate, x)))));
    b.Result(GeluChain(b, x));
    auto exe = CompileBuilder(b);
    ASSERT_NE(exe, nullptr);
    // Two chains, one inside a longer region (its x an intermediate, its result read on).
    EXPECT_EQ(CompositesOf(exe).size(), composites ? 2u : 0u);
    ASSERT_TRUE(RunExe(exe, Bindings(Bind(xv, DType::kF32, {n})),
                       Bindings(Bind(extra, DType::kF32, {n}), Bind(composites ? on : off, DType::kF32, {n})))
                    .ok());
    for (int64_t i = 0; i < n; ++i) {
      const float ax = std::fabs(xv[i]);
      const double want = -(0.5 * ax * std::erfc(-ax / M_SQRT2));
      if (std::isnan(xv[i])) {
        ASSERT_TRUE(std::isnan(extra[i]));
      } else if (std::isinf(xv[i])) {
        ASSERT_EQ(extra[i], -INFINITY);
      } else {
        ASSERT_NEAR(extra[i], want, 3e-7 * std::fabs(want)) << xv[i];  // x >= 0: within 3 ulp
      }
    }
  }
  ASSERT_TRUE(Options::Get().Set("host_composites", "1").ok());
  // The kernel against double, and the chain too: the chain's 1 + erf cancels for x < -2, so it
  // is judged there only absolutely (erf's float32 error, about 6e-8, times |x| / 2).
  for (int64_t i = 0; i < n; ++i) {
    const double v = xv[i], ec = std::erfc(-v / M_SQRT2), want = 0.5 * v * ec;
    if (std::isnan(xv[i])) {
      ASSERT_TRUE(std::isnan(on[i]) && std::isnan(off[i]));
      continue;
    }
    if (std::isinf(xv[i])) {
      ASSERT_EQ(on[i], xv[i] > 0 ? xv[i] : 0.0f);
      ASSERT_EQ(off[i], on[i]);
      continue;
    }
    const double tol = v >= 0 ? 3e-7 * std::fabs(want) : 4e-7 * (1 + std::fabs(std::log(ec))) * std::fabs(want);
    ASSERT_LE(std::fabs(on[i] - want), v < -4 * M_SQRT2 ? 4.4e-8 : tol) << "gelu(" << v << ") = " << on[i];
    ASSERT_LE(std::fabs(off[i] - want), std::max(tol, 0.5 * std::fabs(v) * 1.2e-7)) << "chain gelu(" << v << ") = " << off[i];
  }
}

// Compiles the chains `build(b, x, dy)` makes of two float32 [n] parameters, with option
// host_composites on or off (the caller sets it back on).
template <typename F>
ExecutablePtr CompileChains(bool composites, int64_t n, F&& build) {
  EXPECT_TRUE(Options::Get().Set("host_composites", composites ? "1" : "0").ok());
  Builder b;
  int x = b.Param(T(DType::kF32, {n}));
  int dy = b.Param(T(DType::kF32, {n}));
  build(b, x, dy);
  return CompileBuilder(b);
}

// gelu's erf-form backward as activation.cc emits it: dy * (cdf + x * pdf).
int GeluBackwardChain(Builder& b, int dy, int x) {
  int cdf = b.Binary(OpCode::kMultiply, b.ScalarLike(0.5, x),
                     b.Binary(OpCode::kAdd, b.ScalarLike(1.0, x),
                              b.Unary(OpCode::kErf, b.Binary(OpCode::kMultiply, x, b.ScalarLike(M_SQRT1_2, x)))));
  int ex = b.Unary(OpCode::kExp, b.Binary(OpCode::kMultiply, b.Binary(OpCode::kMultiply, x, x), b.ScalarLike(-0.5, x)));
  int pdf = b.Binary(OpCode::kMultiply, b.ScalarLike(M_2_SQRTPI * M_SQRT1_2 * 0.5, x), ex);
  return b.Binary(OpCode::kMultiply, dy, b.Binary(OpCode::kAdd, cdf, b.Binary(OpCode::kMultiply, x, pdf)));
}

TEST(CompositeTest, GeluBackwardChainRunsAsOneKernel) {
  // With composites on the chain is one kernel (its x * pdf + cdf a fused multiply-add); both
  // ways the result is dy * gelu'(x) against double within a few float32 ulp of its terms (the
  // chain's 1 + erf cancels for x < -2 as in the forward, so the bound scales with dy, not with
  // the small result).
  const int64_t n = 50003;
  std::vector<float> xv(n), gv(n), on(n), off(n);
  for (int64_t i = 0; i < n; ++i) {
    xv[i] = -9.0f + 18.0f * static_cast<float>(i) / (n - 1);
    gv[i] = static_cast<float>(std::cos(0.37 * i)) * 3.0f;
  }
  xv[0] = NAN;
  xv[1] = -0.0f;
  for (bool composites : {true, false}) {
    SCOPED_TRACE(composites);
    auto exe = CompileChains(composites, n, [](Builder& b, int x, int dy) { b.Result(GeluBackwardChain(b, dy, x)); });
    ASSERT_NE(exe, nullptr);
    auto kinds = CompositesOf(exe);
    ASSERT_EQ(kinds.size(), composites ? 1u : 0u);
    if (composites) {
      EXPECT_EQ(kinds[0], FusedRegion::Composite::kGeluErfBackward);
    }
    ASSERT_TRUE(RunExe(exe, Bindings(Bind(xv, DType::kF32, {n}), Bind(gv, DType::kF32, {n})),
                       Bindings(Bind(composites ? on : off, DType::kF32, {n})))
                    .ok());
  }
  ASSERT_TRUE(Options::Get().Set("host_composites", "1").ok());
  for (int64_t i = 0; i < n; ++i) {
    const double v = xv[i], g = gv[i];
    if (std::isnan(v)) {
      ASSERT_TRUE(std::isnan(on[i]) && std::isnan(off[i]));
      continue;
    }
    const double d = 0.5 * std::erfc(-v / M_SQRT2) + v * std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
    const double want = g * d, tol = 4e-7 * std::fabs(g) * (1 + std::fabs(v));
    ASSERT_LE(std::fabs(on[i] - want), tol) << "x " << v << " dy " << g;
    ASSERT_LE(std::fabs(off[i] - want), tol) << "chain: x " << v << " dy " << g;
    ASSERT_LE(std::fabs(on[i] - off[i]), tol) << "x " << v;
  }
}

// silu and its backward as activation.cc emits them: x * logistic(x), and
// (dy * s) * (1 + x * (1 - s)) with s = logistic(x) read by two ops of the chain.
int SiluChain(Builder& b, int x) { return b.Binary(OpCode::kMultiply, x, b.Unary(OpCode::kLogistic, x)); }
int SiluBackwardChain(Builder& b, int dy, int x) {
  int s = b.Unary(OpCode::kLogistic, x);
  int inner = b.Binary(OpCode::kAdd, b.ScalarLike(1.0, x),
                       b.Binary(OpCode::kMultiply, x, b.Binary(OpCode::kSubtract, b.ScalarLike(1.0, x), s)));
  return b.Binary(OpCode::kMultiply, b.Binary(OpCode::kMultiply, dy, s), inner);
}

TEST(CompositeTest, SiluChainsRunAsOneKernelWithTheChainsBits) {
  // With composites on each chain is one kernel, and its results are the op-by-op chain's bits
  // (the same operations and roundings), infinities, NaN, signed zeros and the logistic's
  // saturated and subnormal ranges included; the chain itself is checked against double.
  const int64_t n = 40009;
  std::vector<float> xv(n), gv(n);
  for (int64_t i = 0; i < n; ++i) {
    xv[i] = -110.0f + 220.0f * static_cast<float>(i) / (n - 1);
    gv[i] = static_cast<float>(std::cos(0.37 * i)) * 3.0f;
  }
  const float specials[] = {NAN, INFINITY, -INFINITY, -0.0f, 0.0f, 1e-30f, -1e-30f, 88.0f, -88.0f, -104.5f, 17.3f};
  for (size_t k = 0; k < std::size(specials); ++k) xv[k] = specials[k];
  std::vector<float> fwd[2] = {std::vector<float>(n), std::vector<float>(n)};
  std::vector<float> bwd[2] = {std::vector<float>(n), std::vector<float>(n)};
  for (bool composites : {true, false}) {
    SCOPED_TRACE(composites);
    auto exe = CompileChains(composites, n, [](Builder& b, int x, int dy) {
      b.Result(SiluChain(b, x));
      b.Result(SiluBackwardChain(b, dy, x));
    });
    ASSERT_NE(exe, nullptr);
    auto kinds = CompositesOf(exe);
    if (composites) {
      ASSERT_EQ(kinds.size(), 2u);
      EXPECT_TRUE(std::count(kinds.begin(), kinds.end(), FusedRegion::Composite::kSilu) == 1);
      EXPECT_TRUE(std::count(kinds.begin(), kinds.end(), FusedRegion::Composite::kSiluBackward) == 1);
    } else {
      ASSERT_TRUE(kinds.empty());
    }
    ASSERT_TRUE(RunExe(exe, Bindings(Bind(xv, DType::kF32, {n}), Bind(gv, DType::kF32, {n})),
                       Bindings(Bind(fwd[composites], DType::kF32, {n}), Bind(bwd[composites], DType::kF32, {n})))
                    .ok());
  }
  ASSERT_TRUE(Options::Get().Set("host_composites", "1").ok());
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(fwd[0][i]) || std::isnan(bwd[0][i])) {  // (a NaN's sign and payload are unspecified)
      ASSERT_EQ(std::isnan(fwd[0][i]), std::isnan(fwd[1][i])) << "silu(" << xv[i] << ")";
      ASSERT_EQ(std::isnan(bwd[0][i]), std::isnan(bwd[1][i])) << "silu'(" << xv[i] << ")";
      if (std::isnan(fwd[0][i]) && std::isnan(bwd[0][i])) continue;
    }
    uint32_t a, c;
    std::memcpy(&a, &fwd[1][i], 4);
    std::memcpy(&c, &fwd[0][i], 4);
    if (!std::isnan(fwd[0][i])) {
      ASSERT_EQ(a, c) << "silu(" << xv[i] << "): " << fwd[1][i] << " vs the chain's " << fwd[0][i];
    }
    std::memcpy(&a, &bwd[1][i], 4);
    std::memcpy(&c, &bwd[0][i], 4);
    if (!std::isnan(bwd[0][i])) {
      ASSERT_EQ(a, c) << "silu'(" << xv[i] << ") * " << gv[i] << ": " << bwd[1][i] << " vs " << bwd[0][i];
    }
    const double v = xv[i], g = gv[i];
    if (!std::isfinite(v)) continue;
    const double sg = 1 / (1 + std::exp(-v)), want = v * sg, dwant = g * sg * (1 + v * (1 - sg));
    ASSERT_LE(std::fabs(fwd[0][i] - want), 3e-7 * std::fabs(want) + 1e-38) << "silu(" << v << ")";
    ASSERT_LE(std::fabs(bwd[0][i] - dwant), 1e-6 * std::fabs(g) * (1 + std::fabs(v))) << "silu'(" << v << ")";
  }
}

TEST(CompositeTest, ASiluChainWhoseLogisticIsReadElsewhereKeepsItsOps) {
  const int64_t n = 1000;
  Builder b;
  int x = b.Param(T(DType::kF32, {n}));
  int s = b.Unary(OpCode::kLogistic, x);
  b.Result(b.Binary(OpCode::kMultiply, x, s));
  b.Result(s);  // the logistic is a result: the kernel would not write it
  auto exe = CompileBuilder(b);
  ASSERT_NE(exe, nullptr);
  EXPECT_TRUE(CompositesOf(exe).empty());
}

TEST(CompositeTest, AGeluChainWithAnIntermediateReadElsewhereKeepsItsOps) {
  // The erf is also a result: the kernel would not produce it, so the ops run one by one.
  const int64_t n = 1000;
  Builder b;
  int x = b.Param(T(DType::kF32, {n}));
  int y = GeluChain(b, x);
  int erf = b.Binary(OpCode::kAdd, b.Unary(OpCode::kErf, b.Binary(OpCode::kMultiply, x, b.ScalarLike(M_SQRT1_2, x))),
                     b.ScalarLike(0.0, x));
  b.Result(y);
  b.Result(erf);
  auto exe = CompileBuilder(b);
  ASSERT_NE(exe, nullptr);
  // (The second erf is a separate op: the first one's users are the chain alone, so it matches.)
  EXPECT_EQ(CompositesOf(exe).size(), 1u);
  // Other constants than the lowering's, or float64: no composite.
  for (DType dt : {DType::kF32, DType::kF64}) {
    Builder b2;
    int x2 = b2.Param(T(dt, {n}));
    int half = b2.Binary(OpCode::kMultiply, x2, b2.ScalarLike(dt == DType::kF32 ? 0.25 : 0.5, x2));
    int cdf2 = b2.Binary(OpCode::kAdd, b2.ScalarLike(1.0, x2),
                         b2.Unary(OpCode::kErf, b2.Binary(OpCode::kMultiply, x2, b2.ScalarLike(M_SQRT1_2, x2))));
    b2.Result(b2.Select(b2.Compare(CompareDirection::kEQ, x2, b2.ScalarLike(-INFINITY, x2)), b2.ScalarLike(0.0, x2),
                        b2.Binary(OpCode::kMultiply, half, cdf2)));
    auto exe2 = CompileBuilder(b2);
    ASSERT_NE(exe2, nullptr);
    EXPECT_TRUE(CompositesOf(exe2).empty()) << DTypeName(dt);
  }
  // A bfloat16 gelu computes in float32 between its converts: it matches.
  Builder b3;
  int x3 = b3.Param(T(DType::kBF16, {n}));
  b3.Result(b3.Convert(GeluChain(b3, b3.Convert(x3, DType::kF32)), DType::kBF16));
  auto exe3 = CompileBuilder(b3);
  ASSERT_NE(exe3, nullptr);
  EXPECT_EQ(CompositesOf(exe3).size(), 1u);
  std::vector<uint16_t> in(n), out(n);
  for (int64_t i = 0; i < n; ++i) in[i] = ToBf16(-6.0f + 12.0f * static_cast<float>(i) / n);
  ASSERT_TRUE(RunExe(exe3, Bindings(Bind(in, DType::kBF16, {n})), Bindings(Bind(out, DType::kBF16, {n}))).ok());
  for (int64_t i = 0; i < n; ++i) {
    const double v = FromBf16(in[i]), want = 0.5 * v * std::erfc(-v / M_SQRT2);
    // bf16 rounding of the result: half an ulp of 2^-8 relative, plus the kernel's float32 error;
    // below -4 sqrt(2) the kernel's -0 (the exact value is under 4.4e-8 there).
    ASSERT_LE(std::fabs(FromBf16(out[i]) - want), std::fabs(want) * (1.0 / 256 + 3e-6) + (v < -4 * M_SQRT2 ? 4.4e-8 : 0))
        << v;
  }
}

// Note [Composites from bfloat16] (elementwise.cc): a region that is only a bfloat16 gelu or
// silu (convert, chain, convert) runs as one bfloat16 kernel, with the bits of widening, the
// float32 kernel and rounding; a region with anything more keeps the tiled path.
TEST(CompositeTest, BfloatGeluAndSiluRegionsRunAsOneKernelWithTheConvertsBits) {
  const int64_t n = 70001;  // several chunks and a tail
  std::vector<uint16_t> in(n);
  for (int64_t i = 0; i < n; ++i) in[i] = static_cast<uint16_t>(i * 7919 % 65536);  // every kind of value
  const float specials[] = {-INFINITY, INFINITY, NAN, -0.0f, 0.0f, -6.0f, 6.0f, -5.65625f};
  for (size_t k = 0; k < std::size(specials); ++k) in[k] = ToBf16(specials[k]);
  Counter* runs = GetCounter("host_bf16_composite_regions");
  for (bool gelu : {true, false}) {
    SCOPED_TRACE(gelu ? "gelu" : "silu");
    std::vector<float> wide(n), want_f32(n);
    for (int64_t i = 0; i < n; ++i) wide[i] = FromBf16(in[i]);
    if (gelu) GeluErfF32Simd(wide.data(), want_f32.data(), n);
    else SiluF32Simd(wide.data(), want_f32.data(), n);
    for (bool extra_output : {false, true}) {
      SCOPED_TRACE(extra_output);
      Builder b;
      int x = b.Param(T(DType::kBF16, {n}));
      int xf = b.Convert(x, DType::kF32);
      int r = gelu ? GeluChain(b, xf) : SiluChain(b, xf);
      b.Result(b.Convert(r, DType::kBF16));
      if (extra_output) b.Result(b.Unary(OpCode::kNegate, r));  // the chain's value read on: tiled
      auto exe = CompileBuilder(b);
      ASSERT_NE(exe, nullptr);
      ASSERT_EQ(CompositesOf(exe).size(), 1u);
      std::vector<uint16_t> out(n);
      std::vector<float> neg(n);
      const int64_t before = runs->value();
      if (extra_output) {
        ASSERT_TRUE(RunExe(exe, Bindings(Bind(in, DType::kBF16, {n})),
                           Bindings(Bind(out, DType::kBF16, {n}), Bind(neg, DType::kF32, {n})))
                        .ok());
      } else {
        ASSERT_TRUE(RunExe(exe, Bindings(Bind(in, DType::kBF16, {n})), Bindings(Bind(out, DType::kBF16, {n}))).ok());
      }
      EXPECT_EQ(runs->value() - before, extra_output ? 0 : 1);
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t want = ToBf16(want_f32[i]);
        if (std::isnan(want_f32[i])) {
          ASSERT_TRUE(std::isnan(FromBf16(out[i]))) << FromBf16(in[i]);
        } else {
          ASSERT_EQ(out[i], want) << FromBf16(in[i]) << ": " << FromBf16(out[i]) << " want " << FromBf16(want);
        }
      }
    }
  }
}

// Note [Widening reads] (elementwise.cc): which bfloat16 inputs a region may read in place and
// whether its last binary op writes the rounded output, found with the composites. (The values
// are the same either way: tests/python/test_bf16_elementwise.py checks the bits; this checks that
// the faster path is taken, and where it must not be.)
// Note [Binary chains]: float32 binary ops chained through values nothing else reads run as one
// kernel, with the bits of the ops one by one.
TEST(CompositeTest, BinaryChainsRunAsOneKernelWithTheOpsBits) {
  const int64_t rows = 3, n = 70001;  // several tiles and a tail
  const int64_t total = rows * n;
  std::vector<float> xv(total), yv(total), zv(total), bias(n);
  uint32_t state = 12345;
  auto next = [&]() {
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(static_cast<int32_t>(state >> 8) - (1 << 23)) / (1 << 20);
  };
  for (int64_t i = 0; i < total; ++i) xv[i] = next(), yv[i] = next(), zv[i] = next();
  for (int64_t i = 0; i < n; ++i) bias[i] = next();
  xv[5] = NAN, yv[6] = INFINITY, zv[7] = 0.0f, yv[7] = INFINITY, zv[8] = -0.0f, xv[9] = -INFINITY;
  // Each op rounded on its own (volatile: the reference must not contract a multiply-add either).
  auto maxf = [](float a, float b) { return std::isnan(a) || a > b ? a : b; };
  auto minf = [](float a, float b) { return std::isnan(a) || a < b ? a : b; };
  struct Case {
    const char* what;
    int (*build)(Builder& b, int x, int y, int z, int bias);
    float (*ref)(float x, float y, float z, float bias);
    size_t chain;
  };
  static decltype(maxf)* pmax = &maxf;
  static decltype(minf)* pmin = &minf;
  const Case cases[] = {
      {"addcmul: x + (0.5 * y) * z",
       [](Builder& b, int x, int y, int z, int) {
         return b.Binary(OpCode::kAdd, x, b.Binary(OpCode::kMultiply, b.Binary(OpCode::kMultiply, b.ScalarLike(0.5, y), y), z));
       },
       [](float x, float y, float z, float) {
         volatile float t = 0.5f * y;
         volatile float u = t * z;
         return x + u;
       },
       3},
      {"addcdiv, the chain on the right: (y / z) * -2 - x, max with bias rows",
       [](Builder& b, int x, int y, int z, int bias) {
         int q = b.Binary(OpCode::kMultiply, b.Binary(OpCode::kDivide, y, z), b.ScalarLike(-2.0, y));
         int r = b.Binary(OpCode::kSubtract, q, x);
         return b.Binary(OpCode::kMaximum, b.BroadcastInDim(bias, {3, 70001}, {1}), r);
       },
       [](float x, float y, float z, float bias) {
         volatile float q = y / z;
         volatile float q2 = q * -2.0f;
         volatile float r = q2 - x;
         return (*pmax)(bias, r);
       },
       4},
      {"min, then subtracted from z: a chain of two, the value on the right",
       [](Builder& b, int x, int y, int z, int) { return b.Binary(OpCode::kSubtract, z, b.Binary(OpCode::kMinimum, x, y)); },
       [](float x, float y, float z, float) {
         volatile float m = (*pmin)(x, y);
         return z - m;
       },
       2},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Builder b;
    int x = b.Param(T(DType::kF32, {rows, n})), y = b.Param(T(DType::kF32, {rows, n}));
    int z = b.Param(T(DType::kF32, {rows, n})), bi = b.Param(T(DType::kF32, {n}));
    b.Result(c.build(b, x, y, z, bi));
    auto exe = CompileBuilder(b);
    ASSERT_NE(exe, nullptr);
    std::vector<size_t> chains;
    EXPECT_TRUE(CompositesOf(exe, &chains).empty());
    EXPECT_EQ(chains, std::vector<size_t>({c.chain}));
    std::vector<float> out(total);
    ASSERT_TRUE(RunExe(exe,
                       Bindings(Bind(xv, DType::kF32, {rows, n}), Bind(yv, DType::kF32, {rows, n}),
                                Bind(zv, DType::kF32, {rows, n}), Bind(bias, DType::kF32, {n})),
                       Bindings(Bind(out, DType::kF32, {rows, n})))
                    .ok());
    int64_t differ = 0;
    for (int64_t i = 0; i < total; ++i) {
      const float want = c.ref(xv[i], yv[i], zv[i], bias[i % n]);
      uint32_t a, w;
      std::memcpy(&a, &out[i], 4);
      std::memcpy(&w, &want, 4);
      if (a != w && !(std::isnan(out[i]) && std::isnan(want))) ++differ;
    }
    EXPECT_EQ(differ, 0);
  }
  // An intermediate that is also a result, read twice, or a float64 chain: no chain over it.
  {
    Builder b;
    int x = b.Param(T(DType::kF32, {n})), y = b.Param(T(DType::kF32, {n}));
    int m = b.Binary(OpCode::kMultiply, x, y);
    b.Result(b.Binary(OpCode::kAdd, m, x));
    b.Result(m);
    int sq = b.Binary(OpCode::kSubtract, x, y);
    b.Result(b.Binary(OpCode::kMultiply, sq, sq));
    Builder b64;
    int x64 = b64.Param(T(DType::kF64, {n}));
    b64.Result(b64.Binary(OpCode::kAdd, b64.Binary(OpCode::kMultiply, x64, x64), x64));
    for (Builder* bb : {&b, &b64}) {
      auto exe = CompileBuilder(*bb);
      ASSERT_NE(exe, nullptr);
      std::vector<size_t> chains;
      CompositesOf(exe, &chains);
      EXPECT_TRUE(chains.empty());
    }
  }
  // bfloat16 addcmul as the lowering emits it (converts to float32 around the float32 ops): one
  // chain that widens its leaves as it reads them and rounds into the output (the converts' bits),
  // contiguous or not.
  {
    Builder b;
    const TensorType bf = T(DType::kBF16, {rows, n});
    int x = b.Param(bf), y = b.Param(bf), z = b.Param(bf);
    auto f = [&](int v) { return b.Convert(v, DType::kF32); };
    int yf = f(y);
    int m = b.Binary(OpCode::kMultiply, b.Binary(OpCode::kMultiply, yf, b.ScalarLike(0.5, yf)), f(z));
    b.Result(b.Convert(b.Binary(OpCode::kAdd, f(x), m), DType::kBF16));
    auto exe = CompileBuilder(b);
    ASSERT_NE(exe, nullptr);
    std::vector<size_t> chains;
    CompositesOf(exe, &chains);
    EXPECT_EQ(chains, std::vector<size_t>({3}));
    std::vector<uint16_t> xb(total), yb(total), zb(total), out(total);
    for (int64_t i = 0; i < total; ++i) xb[i] = ToBf16(xv[i]), yb[i] = ToBf16(yv[i]), zb[i] = ToBf16(zv[i]);
    for (bool strided : {false, true}) {  // strided: y read with a row stride (stored widened first)
      SCOPED_TRACE(strided ? "y strided" : "contiguous");
      std::vector<uint16_t> ys(strided ? 2 * total : total);
      for (int64_t i = 0; i < total; ++i) ys[strided ? (i / n) * 2 * n + i % n : i] = yb[i];
      ASSERT_TRUE(RunExe(exe,
                         Bindings(Bind(xb, DType::kBF16, {rows, n}),
                                  Bind(ys, DType::kBF16, {rows, n}, strided ? Dims{2 * n, 1} : Dims{}),
                                  Bind(zb, DType::kBF16, {rows, n})),
                         Bindings(Bind(out, DType::kBF16, {rows, n})))
                      .ok());
      int64_t differ = 0;
      for (int64_t i = 0; i < total; ++i) {
        volatile float t = FromBf16(yb[i]) * 0.5f;
        volatile float u = t * FromBf16(zb[i]);
        const float want = FromBf16(xb[i]) + u;
        const uint16_t w = ToBf16(want);
        if (out[i] != w && !(std::isnan(want) && std::isnan(FromBf16(out[i])))) ++differ;
      }
      EXPECT_EQ(differ, 0);
    }
  }
}

TEST(CompositeTest, WideningReadsAreFoundWhereOnlyBinaryOpsReadTheConverts) {
  auto region_of = [](Builder& b) {
    auto exe = CompileBuilder(b);
    EXPECT_NE(exe, nullptr);
    const auto* host = static_cast<const HostExecutable*>(exe.get());
    EXPECT_EQ(host->regions.size(), 1u);
    return host->regions.empty() ? FusedRegion{} : host->regions[0];
  };
  const TensorType bf = T(DType::kBF16, {1000});
  {  // a bfloat16 multiply-add: both inputs widened, the add writes the output
    Builder b;
    int x = b.Param(bf), y = b.Param(bf), z = b.Param(bf);
    int m = b.Binary(OpCode::kMultiply, b.Convert(x, DType::kF32), b.Convert(y, DType::kF32));
    b.Result(b.Convert(b.Binary(OpCode::kAdd, m, b.Convert(z, DType::kF32)), DType::kBF16));
    FusedRegion r = region_of(b);
    EXPECT_EQ(r.widenable, std::vector<bool>({true, true, true}));
    EXPECT_TRUE(r.rounded_tail);
  }
  {  // a convert read by a unary op (exp has no widening kernel), or returned: stored as before
    Builder b;
    int x = b.Param(bf), y = b.Param(bf);
    int yf = b.Convert(y, DType::kF32);
    int e = b.Binary(OpCode::kAdd, b.Unary(OpCode::kExp, b.Convert(x, DType::kF32)), yf);
    b.Result(b.Convert(e, DType::kBF16));
    b.Result(yf);
    FusedRegion r = region_of(b);
    EXPECT_EQ(r.widenable, std::vector<bool>({false, false}));
    EXPECT_TRUE(r.rounded_tail);  // (the add still rounds into the bfloat16 output)
  }
  {  // the add's float32 value is also returned: the output goes through the store
    Builder b;
    int x = b.Param(bf), y = b.Param(bf);
    int a = b.Binary(OpCode::kAdd, b.Convert(x, DType::kF32), b.Convert(y, DType::kF32));
    b.Result(b.Convert(a, DType::kBF16));
    b.Result(a);
    FusedRegion r = region_of(b);
    EXPECT_EQ(r.widenable, std::vector<bool>({true, true}));
    EXPECT_FALSE(r.rounded_tail);
  }
}

}  // namespace
}  // namespace tpu::host::testing
