// The vectorized float32 math gives IEEE results at the edges of its range, like std:: does.
#include "runtime/host/elementwise_simd.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

namespace tpu::host {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

void ExpectLikeStd(OpCode code, float (*ref)(float), const std::vector<float>& xs) {
  // Repeat the inputs so both the vector body and the tail see every value.
  std::vector<float> in;
  for (int r = 0; r < 5; ++r) in.insert(in.end(), xs.begin(), xs.end());
  std::vector<float> out(in.size());
  ASSERT_TRUE(UnaryF32Simd(code, in.data(), out.data(), static_cast<int64_t>(in.size())));
  for (size_t i = 0; i < in.size(); ++i) {
    float want = ref(in[i]);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(out[i])) << OpName(code) << "(" << in[i] << ") = " << out[i];
    } else if (std::isinf(want) || want == 0) {
      EXPECT_EQ(out[i], want) << OpName(code) << "(" << in[i] << ")";
    } else {
      EXPECT_NEAR(out[i], want, 4e-7f * std::fabs(want)) << OpName(code) << "(" << in[i] << ")";
    }
  }
}

TEST(ElementwiseSimd, ExpAndLogAtTheEdges) {
  std::vector<float> x = {-kInf, -1000.f, -104.5f, -90.f, -2.f, -1.f, -0.5f, -0.f, 0.f, 1e-30f,
                          0.5f, 1.f, 20.f, 88.5f, 88.73f, 89.f, 1000.f, kInf, kNaN};
  ExpectLikeStd(OpCode::kExp, [](float v) { return std::exp(v); }, x);
  ExpectLikeStd(OpCode::kExpm1, [](float v) { return std::expm1(v); }, x);
  ExpectLikeStd(OpCode::kLog, [](float v) { return std::log(v); }, x);
  ExpectLikeStd(OpCode::kLog1p, [](float v) { return std::log1p(v); }, x);
  // (In double: below -88.7 the float formula's 1 / (1 + inf) = 0 is an underflow the kernel avoids.)
  ExpectLikeStd(OpCode::kLogistic, [](float v) { return static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(v)))); }, x);
}

// Every 1/256 in [lo, hi] (and `extra`) against `ref` in double: overflow inf, normal results
// within `ulps` ulp, subnormal ones within one unit of the smallest subnormal (the last rounding
// lands on that grid). Prints the worst normal result.
void ExpectWithinUlpOnAGrid(OpCode code, double (*ref)(double), int lo, int hi, double ulps,
                            const std::vector<float>& extra = {}) {
  std::vector<float> x;
  for (int i = lo * 256; i <= hi * 256; ++i) x.push_back(static_cast<float>(i) / 256.0f);
  x.insert(x.end(), extra.begin(), extra.end());
  std::vector<float> out(x.size());
  ASSERT_TRUE(UnaryF32Simd(code, x.data(), out.data(), static_cast<int64_t>(x.size())));
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = ref(x[i]);
    if (want > std::numeric_limits<float>::max()) {
      ASSERT_EQ(out[i], kInf) << OpName(code) << "(" << x[i] << ")";
      continue;
    }
    const float w = static_cast<float>(want);
    const double err = std::fabs(out[i] - want);
    if (w < std::numeric_limits<float>::min()) {
      ASSERT_LE(err, std::numeric_limits<float>::denorm_min()) << OpName(code) << "(" << x[i] << ") = " << out[i];
      continue;
    }
    const double ulp = std::nextafter(w, kInf) - w;
    ASSERT_LE(err, ulps * ulp) << OpName(code) << "(" << x[i] << ") = " << out[i] << ", want " << want;
    worst = std::max(worst, err / ulp);
  }
  std::printf("%s: worst %.2f ulp for normal results\n", OpName(code), worst);
}

TEST(ElementwiseSimd, ExpWithinTwoUlpOnADenseGrid) {
  ExpectWithinUlpOnAGrid(OpCode::kExp, [](double v) { return std::exp(v); }, -106, 90, 2,
                         {88.72283f, 88.722839f, 88.72284f, -87.33654f, -103.97208f, -103.27893f});
}

// exp takes vectors wholly within [-86, 87], or within it but for lanes below -104 (0), on a
// short path (2^n in one step, no edges): the same bits as the general path, which a vector
// takes when any lane is elsewhere. Here every fourth lane is -200 (the short path with zeros),
// or -95 (a subnormal result: the general path), so every vector of 4, 8 or 16 lanes has one.
TEST(ElementwiseSimd, ExpShortPathGivesTheGeneralPathsBits) {
  std::vector<float> grid;
  for (int i = -86 * 512; i <= 87 * 512; ++i) grid.push_back(static_cast<float>(i) / 512.0f + 1e-4f * (i % 7));
  std::vector<float> fast(grid.size());
  ASSERT_TRUE(UnaryF32Simd(OpCode::kExp, grid.data(), fast.data(), static_cast<int64_t>(grid.size())));
  for (float other : {-200.0f, -kInf, -95.0f}) {
    SCOPED_TRACE(other);
    std::vector<float> mixed;
    for (size_t i = 0; i < grid.size(); ++i) {
      if (i % 3 == 0) mixed.push_back(other);
      mixed.push_back(grid[i]);
    }
    std::vector<float> general(mixed.size());
    ASSERT_TRUE(UnaryF32Simd(OpCode::kExp, mixed.data(), general.data(), static_cast<int64_t>(mixed.size())));
    for (size_t i = 0, j = 0; i < grid.size(); ++i, ++j) {
      if (i % 3 == 0) {  // the other lane: 0, or exp(-95) (subnormal, within one of its ulps)
        EXPECT_NEAR(general[j], std::exp(static_cast<double>(other)), 1.5e-45);
        ++j;
      }
      ASSERT_EQ(mixed[j], grid[i]);
      ASSERT_EQ(std::memcmp(&fast[i], &general[j], sizeof(float)), 0)
          << "exp(" << grid[i] << "): " << fast[i] << " vs " << general[j];
    }
  }
}

// A float divided by a scalar (softmax's row totals) multiplies by the reciprocal and corrects
// the rounding: the bits of a division, for every kind of numerator and divisor.
TEST(ElementwiseSimd, DivisionByAScalarGivesADivisionsBits) {
  std::vector<float> a;
  uint32_t state = 12345;
  auto next = [&] { return state = state * 1664525u + 1013904223u; };
  for (int i = 0; i < 20000; ++i) {  // random bit patterns over every exponent
    uint32_t bits = next();
    float v;
    std::memcpy(&v, &bits, sizeof v);
    a.push_back(v);
  }
  for (int i = 0; i < 20000; ++i) a.push_back(static_cast<float>(next() % 100000) / 99991.0f);  // softmax-like
  for (float v : {0.f, -0.f, kInf, -kInf, kNaN, 1e-45f, -1e-40f, 0x1p-100f, 0x1p-101f, 1.17e-38f,
                  3.4e38f, -3.4e38f, 1.f, 0.99999994f})
    for (int r = 0; r < 40; ++r) a.push_back(v);  // alone in vectors too, and among others
  std::vector<float> bs = {1.f, 3.f, -7.1f, 64.f, 0.1f, 1.9999999f, 1e-30f, -1e30f, 1.2e-38f, 8e37f,
                           1e-40f, 3.4e38f, 0.f, -0.f, kInf, -kInf, kNaN};
  for (int i = 0; i < 200; ++i) bs.push_back(static_cast<float>(next() % 1000003) / 997.0f + 1.0f);
  std::vector<float> out(a.size());
  for (float b : bs) {
    DivideByScalarF32Simd(a.data(), b, out.data(), static_cast<int64_t>(a.size()));
    for (size_t i = 0; i < a.size(); ++i) {
      const float want = a[i] / b;
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(out[i])) << a[i] << " / " << b;
      } else {
        ASSERT_EQ(std::memcmp(&out[i], &want, sizeof want), 0) << a[i] << " / " << b << " = " << out[i] << ", want " << want;
      }
    }
  }
}

TEST(ElementwiseSimd, LogisticWithinThreeUlpOnADenseGrid) {
  // 1.92 ulp measured with AVX-512; a target without FMA rounds exp's steps more.
  ExpectWithinUlpOnAGrid(OpCode::kLogistic, [](double v) { return 1.0 / (1.0 + std::exp(-v)); }, -110, 30, 3);
}

TEST(ElementwiseSimd, ErfWithinFourUlpOnADenseGrid) {
  // Every 1/4096 in [-6, 6] (both branches, the switch at |x| = 1, the cut at 4), against erf in
  // double; plus the specials.
  std::vector<float> x;
  for (int i = -6 * 4096; i <= 6 * 4096; ++i) x.push_back(static_cast<float>(i) / 4096.0f);
  for (float v : {1e-30f, -1e-30f, 1e-8f, 0.9999999f, 1.0000001f, 3.9999998f, 4.0000005f, 100.f}) x.push_back(v);
  std::vector<float> out(x.size());
  ASSERT_TRUE(UnaryF32Simd(OpCode::kErf, x.data(), out.data(), static_cast<int64_t>(x.size())));
  for (size_t i = 0; i < x.size(); ++i) {
    double want = std::erf(static_cast<double>(x[i]));
    float ulp = std::nextafter(static_cast<float>(std::fabs(want)), kInf) - static_cast<float>(std::fabs(want));
    ASSERT_LE(std::fabs(out[i] - want), 4 * ulp) << "erf(" << x[i] << ") = " << out[i] << ", want " << want;
  }
  ExpectLikeStd(OpCode::kErf, [](float v) { return std::erf(v); }, {-kInf, kInf, kNaN, 0.f, -0.f});
}

TEST(ElementwiseSimd, GeluErfAgainstDoubleOnADenseGrid) {
  // Every 1/4096 in [-8, 8] against x/2 * erfc(-x/sqrt 2) in double (Note [Region composites]).
  // x >= 0: within 3 ulp. -4 sqrt(2) <= x < 0: the kernel's erfc is exp(t), t = log(erfc(z)), and
  // t carries float32 rounding (about 1.2e-7 relative), which exp turns into |t| * 1.2e-7 relative
  // error of the result: bounded by 4e-7 * (1 + |t|), twice the rounding model (which leaves
  // room for the float32 exp's own error). Below -4 sqrt(2): -0, for an exact value under 4.4e-8.
  std::vector<float> x;
  for (int i = -8 * 4096; i <= 8 * 4096; ++i) x.push_back(static_cast<float>(i) / 4096.0f);
  for (float v : {1e-30f, -1e-30f, 1e-8f, -1e-8f, 5.656854f, -5.656854f, -5.6568546f, 100.f, 3e38f}) x.push_back(v);
  std::vector<float> out(x.size());
  GeluErfF32Simd(x.data(), out.data(), static_cast<int64_t>(x.size()));
  double worst_ulp = 0, worst_rel = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i], ec = std::erfc(-v / std::sqrt(2.0)), want = 0.5 * v * ec;
    const float aw = static_cast<float>(std::fabs(want));
    const double ulp = std::nextafter(aw, kInf) - aw;
    if (v >= 0) {
      ASSERT_LE(std::fabs(out[i] - want), 3 * ulp) << "gelu(" << x[i] << ") = " << out[i] << ", want " << want;
      worst_ulp = std::max(worst_ulp, std::fabs(out[i] - want) / ulp);
    } else if (v >= -4 * std::sqrt(2.0)) {
      const double rel = std::fabs(out[i] - want) / std::fabs(want), t = std::fabs(std::log(ec));
      ASSERT_LE(rel, 4e-7 * (1 + t)) << "gelu(" << x[i] << ") = " << out[i] << ", want " << want;
      worst_rel = std::max(worst_rel, rel / (1 + t));
    } else {
      // (-x / sqrt 2 may round to 4 exactly just below -4 sqrt(2): then the value is computed.)
      const double t = std::fabs(std::log(ec));
      ASSERT_LT(std::fabs(want), 4.4e-8) << x[i];
      ASSERT_TRUE((out[i] == 0.0f && std::signbit(out[i])) || std::fabs(out[i] - want) <= 4e-7 * (1 + t) * std::fabs(want))
          << "gelu(" << x[i] << ") = " << out[i];
    }
  }
  std::printf("gelu (erf form): worst %.2f ulp for x >= 0, %.2e * (1 + |t|) relative below\n", worst_ulp, worst_rel);
  const std::vector<float> specials = {-kInf, kInf, kNaN, 0.f, -0.f};
  std::vector<float> got(specials.size());
  GeluErfF32Simd(specials.data(), got.data(), static_cast<int64_t>(specials.size()));
  EXPECT_EQ(got[0], 0.0f);  // gelu(-inf) = 0, the limit (the lowering's select)
  EXPECT_FALSE(std::signbit(got[0]));
  EXPECT_EQ(got[1], kInf);
  EXPECT_TRUE(std::isnan(got[2]));
  EXPECT_EQ(got[3], 0.0f);
  EXPECT_EQ(got[4], 0.0f);
}

// The scalar comparison the kernels must match (C++'s, IEEE for floats).
template <typename T>
bool Compared(CompareDirection dir, T a, T b) {
  switch (dir) {
    case CompareDirection::kEQ: return a == b;
    case CompareDirection::kNE: return a != b;
    case CompareDirection::kLT: return a < b;
    case CompareDirection::kLE: return a <= b;
    case CompareDirection::kGT: return a > b;
    case CompareDirection::kGE: return a >= b;
  }
  return false;
}

// Every direction of `simd` over a and b against Compared.
template <typename T>
void ExpectCompareLikeScalar(bool (*simd)(CompareDirection, const T*, const T*, int32_t*, int64_t),
                             const std::vector<T>& a, const std::vector<T>& b) {
  const int64_t n = static_cast<int64_t>(a.size());
  std::vector<int32_t> got(n);
  for (auto dir : {CompareDirection::kEQ, CompareDirection::kNE, CompareDirection::kLT, CompareDirection::kLE,
                   CompareDirection::kGT, CompareDirection::kGE}) {
    ASSERT_TRUE(simd(dir, a.data(), b.data(), got.data(), n));
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(got[i], Compared(dir, a[i], b[i]) ? 1 : 0) << CompareDirectionName(dir) << " at " << i;
  }
}

TEST(ElementwiseSimd, CompareAndSelectLikeScalarIeee) {
  std::vector<float> a, b;
  for (int r = 0; r < 7; ++r) {  // vector body and tail
    a.insert(a.end(), {kNaN, 1.f, kNaN, -2.f, 3.f, -0.f, kInf});
    b.insert(b.end(), {0.f, kNaN, kNaN, -3.f, 3.f, 0.f, kInf});
  }
  const int64_t n = static_cast<int64_t>(a.size());
  ExpectCompareLikeScalar(CompareF32Simd, a, b);
  std::vector<int32_t> got(n);
  ASSERT_TRUE(CompareF32Simd(CompareDirection::kGE, a.data(), b.data(), got.data(), n));
  std::vector<float> sel(n);
  SelectF32Simd(got.data(), a.data(), b.data(), sel.data(), n);  // got holds a >= b
  for (int64_t i = 0; i < n; ++i) {
    float want = got[i] ? a[i] : b[i];
    ASSERT_TRUE(std::memcmp(&sel[i], &want, 4) == 0) << i;
  }
}

TEST(ElementwiseSimd, Int64CompareLikeScalar) {
  // Signed int64 across the range (extremes, values equal in their low 32 bits), vector body and
  // tail, every direction.
  const int64_t big = std::numeric_limits<int64_t>::max(), low = std::numeric_limits<int64_t>::min();
  std::vector<int64_t> a, b;
  for (int r = 0; r < 5; ++r) {
    a.insert(a.end(), {0, -1, big, low, int64_t{1} << 32, 5, -7, 3000000000, low, 42, -1});
    b.insert(b.end(), {0, 1, low, big, 0, 5, -8, -3000000000, low, 41 + r, (int64_t{1} << 32) - 1});
  }
  ExpectCompareLikeScalar(CompareI64Simd, a, b);
}

template <typename T>
void CheckIntOps(bool (*simd)(OpCode, const T*, const T*, T*, int64_t)) {
  using U = std::make_unsigned_t<T>;
  const T big = std::numeric_limits<T>::max(), low = std::numeric_limits<T>::min();
  std::vector<T> a, b;
  for (int r = 0; r < 9; ++r) {  // vector body and tail, overflow both ways
    a.insert(a.end(), {big, low, T(-7), T(12345), T(r), big});
    b.insert(b.end(), {T(3), T(-1), T(7), T(-999), T(-r), big});
  }
  const int64_t n = static_cast<int64_t>(a.size());
  std::vector<T> got(n);
  for (OpCode code : {OpCode::kAdd, OpCode::kSubtract, OpCode::kMultiply, OpCode::kAnd, OpCode::kOr,
                      OpCode::kXor, OpCode::kMaximum, OpCode::kMinimum}) {
    ASSERT_TRUE(simd(code, a.data(), b.data(), got.data(), n));
    for (int64_t i = 0; i < n; ++i) {
      U x = static_cast<U>(a[i]), y = static_cast<U>(b[i]);
      T want = code == OpCode::kAdd ? T(x + y) : code == OpCode::kSubtract ? T(x - y)
             : code == OpCode::kMultiply ? T(x * y) : code == OpCode::kAnd ? T(x & y)
             : code == OpCode::kOr ? T(x | y) : code == OpCode::kXor ? T(x ^ y)
             : code == OpCode::kMaximum ? std::max(a[i], b[i]) : std::min(a[i], b[i]);
      ASSERT_EQ(got[i], want) << OpName(code) << " at " << i;
    }
  }
  EXPECT_FALSE(simd(OpCode::kDivide, a.data(), b.data(), got.data(), n));  // scalar loop's job
}

TEST(ElementwiseSimd, IntegerOpsWrapLikeTwosComplement) {
  CheckIntOps<int64_t>(BinaryI64Simd);
  CheckIntOps<int32_t>(BinaryI32Simd);
}

TEST(ElementwiseSimd, MaximumAndMinimumPropagateNaN) {
  std::vector<float> a, b;
  for (int r = 0; r < 5; ++r) {  // vector body and tail
    a.insert(a.end(), {kNaN, 1.f, kNaN, -2.f, 3.f});
    b.insert(b.end(), {0.f, kNaN, kNaN, -3.f, 4.f});
  }
  std::vector<float> mx(a.size()), mn(a.size());
  ASSERT_TRUE(BinaryF32Simd(OpCode::kMaximum, a.data(), b.data(), mx.data(), static_cast<int64_t>(a.size())));
  ASSERT_TRUE(BinaryF32Simd(OpCode::kMinimum, a.data(), b.data(), mn.data(), static_cast<int64_t>(a.size())));
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) {
      EXPECT_TRUE(std::isnan(mx[i]) && std::isnan(mn[i])) << "at " << i;
    } else {
      EXPECT_EQ(mx[i], std::max(a[i], b[i]));
      EXPECT_EQ(mn[i], std::min(a[i], b[i]));
    }
  }
}

}  // namespace
}  // namespace tpu::host
