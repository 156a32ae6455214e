// dot_general through the host executor (oneDNN for f32/bf16, OpenBLAS for f64, a blocked loop for
// integers: dot_blas_test.cc has the larger cases).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/host/host_test_util.h"

namespace tpu::host::testing {
namespace {

const DType F = DType::kF32;

// c[b][i][j] = sum_k a(b, i, k) * w(b, k, j) in double.
template <typename A, typename W>
std::vector<double> RefBmm(int64_t nb, int64_t m, int64_t k, int64_t n, A a, W w) {
  std::vector<double> c(nb * m * n, 0.0);
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += a(b, i, p) * w(b, p, j);
        c[(b * m + i) * n + j] = s;
      }
  return c;
}

TEST(DotTest, PlainMatmul) {
  const int64_t M = 5, K = 7, N = 3;
  std::vector<float> a(M * K), w(K * N), c(M * N);
  for (int64_t i = 0; i < M * K; ++i) a[i] = SmallValue(i, 1);
  for (int64_t i = 0; i < K * N; ++i) w[i] = SmallValue(i, 2);
  Builder b;
  int x = b.Param(T(F, {M, K}));
  int y = b.Param(T(F, {K, N}));
  b.Result(b.DotGeneral(x, y, {}, {}, {1}, {0}, F));
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(a, F, {M, K}), Bind(w, F, {K, N})), Bindings(Bind(c, F, {M, N}))).ok());
  auto want = RefBmm(1, M, K, N, [&](int64_t, int64_t i, int64_t p) { return a[i * K + p]; },
                     [&](int64_t, int64_t p, int64_t j) { return w[p * N + j]; });
  for (int64_t i = 0; i < M * N; ++i) EXPECT_EQ(c[i], static_cast<float>(want[i])) << i;
}

TEST(DotTest, LargerMatmulWithinFloatTolerance) {
  const int64_t M = 64, K = 300, N = 48;
  std::vector<float> a(M * K), w(K * N), c(M * N);
  for (int64_t i = 0; i < M * K; ++i) a[i] = std::sin(0.37f * static_cast<float>(i));
  for (int64_t i = 0; i < K * N; ++i) w[i] = std::cos(0.11f * static_cast<float>(i));
  Builder b;
  int x = b.Param(T(F, {M, K}));
  int y = b.Param(T(F, {K, N}));
  b.Result(b.DotGeneral(x, y, {}, {}, {1}, {0}, F));
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(a, F, {M, K}), Bind(w, F, {K, N})), Bindings(Bind(c, F, {M, N}))).ok());
  auto want = RefBmm(1, M, K, N, [&](int64_t, int64_t i, int64_t p) { return a[i * K + p]; },
                     [&](int64_t, int64_t p, int64_t j) { return w[p * N + j]; });
  for (int64_t i = 0; i < M * N; ++i) ASSERT_NEAR(c[i], want[i], 1e-4) << i;
}

// Note [oneDNN on one thread]: products of 1M multiply-adds and up are split over the pool by
// batch, rows or columns (strided parts of the operands and of the output); the parts' sums are
// the whole's, so the result is compared with the same tolerance as one call.
TEST(DotTest, SplitByBatchRowsOrColumns) {
  struct Shape {
    int64_t nb, m, k, n;
  };
  for (Shape s : {Shape{5, 32, 128, 96}, Shape{1, 260, 128, 40}, Shape{1, 4, 512, 1000}}) {
    std::vector<float> a(s.nb * s.m * s.k), w(s.nb * s.k * s.n), c(s.nb * s.m * s.n);
    for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.37f * static_cast<float>(i));
    for (size_t i = 0; i < w.size(); ++i) w[i] = std::cos(0.11f * static_cast<float>(i));
    // The rhs bound transposed ([n, k] in memory): the parts' views of it are strided.
    std::vector<float> wt(w.size());
    for (int64_t bb = 0; bb < s.nb; ++bb)
      for (int64_t p = 0; p < s.k; ++p)
        for (int64_t j = 0; j < s.n; ++j) wt[(bb * s.n + j) * s.k + p] = w[(bb * s.k + p) * s.n + j];
    Builder b;
    int x = b.Param(T(F, {s.nb, s.m, s.k}));
    int y = b.Param(T(F, {s.nb, s.k, s.n}));
    b.Result(b.DotGeneral(x, y, {0}, {0}, {2}, {1}, F));
    ASSERT_TRUE(RunProgram(b, Bindings(Bind(a, F, {s.nb, s.m, s.k}), Bind(wt, F, {s.nb, s.k, s.n}, {s.n * s.k, 1, s.k})),
                           Bindings(Bind(c, F, {s.nb, s.m, s.n})))
                    .ok());
    auto want = RefBmm(s.nb, s.m, s.k, s.n, [&](int64_t bb, int64_t i, int64_t p) { return a[(bb * s.m + i) * s.k + p]; },
                       [&](int64_t bb, int64_t p, int64_t j) { return w[(bb * s.k + p) * s.n + j]; });
    // float32 products of k terms of magnitude <= 1: 1e-4 * sqrt(k / 300) covers the rounding.
    double tol = 1e-4 * std::sqrt(static_cast<double>(s.k) / 300.0) * 2;
    for (size_t i = 0; i < c.size(); ++i) ASSERT_NEAR(c[i], want[i], tol) << s.nb << "x" << s.m << "x" << s.n << " " << i;
  }
}

TEST(DotTest, Batched) {
  const int64_t B = 3, M = 4, K = 5, N = 2;
  std::vector<float> a(B * M * K), w(B * K * N), c(B * M * N);
  for (size_t i = 0; i < a.size(); ++i) a[i] = SmallValue(i, 4);
  for (size_t i = 0; i < w.size(); ++i) w[i] = SmallValue(i, 5);
  Builder b;
  int x = b.Param(T(F, {B, M, K}));
  int y = b.Param(T(F, {B, K, N}));
  b.Result(b.DotGeneral(x, y, {0}, {0}, {2}, {1}, F));
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(a, F, {B, M, K}), Bind(w, F, {B, K, N})),
                         Bindings(Bind(c, F, {B, M, N})))
                  .ok());
  auto want = RefBmm(B, M, K, N, [&](int64_t bb, int64_t i, int64_t p) { return a[(bb * M + i) * K + p]; },
                     [&](int64_t bb, int64_t p, int64_t j) { return w[(bb * K + p) * N + j]; });
  for (size_t i = 0; i < c.size(); ++i) EXPECT_EQ(c[i], static_cast<float>(want[i])) << i;
}

TEST(DotTest, TransposedRhsView) {
  // x @ W.T where W is [N, K] row-major: bound as a [K, N] view with strides {1, K}, and also
  // through a transpose op in the graph, and as dot_general contracting rhs dim 1.
  const int64_t M = 6, K = 5, N = 4;
  std::vector<float> a(M * K), wmem(N * K), c1(M * N), c2(M * N), c3(M * N);
  for (size_t i = 0; i < a.size(); ++i) a[i] = SmallValue(i, 6);
  for (size_t i = 0; i < wmem.size(); ++i) wmem[i] = SmallValue(i, 7);
  Builder b;
  int x = b.Param(T(F, {M, K}));
  int wt = b.Param(T(F, {K, N}));   // view of W.T
  int w = b.Param(T(F, {N, K}));    // W itself
  b.Result(b.DotGeneral(x, wt, {}, {}, {1}, {0}, F));
  b.Result(b.DotGeneral(x, b.Transpose(w, {1, 0}), {}, {}, {1}, {0}, F));
  b.Result(b.DotGeneral(x, w, {}, {}, {1}, {1}, F));
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(a, F, {M, K}), Bind(wmem, F, {K, N}, {1, K}), Bind(wmem, F, {N, K})),
                         Bindings(Bind(c1, F, {M, N}), Bind(c2, F, {M, N}), Bind(c3, F, {M, N})))
                  .ok());
  auto want = RefBmm(1, M, K, N, [&](int64_t, int64_t i, int64_t p) { return a[i * K + p]; },
                     [&](int64_t, int64_t p, int64_t j) { return wmem[j * K + p]; });
  for (int64_t i = 0; i < M * N; ++i) {
    EXPECT_EQ(c1[i], static_cast<float>(want[i])) << i;
    EXPECT_EQ(c2[i], static_cast<float>(want[i])) << i;
    EXPECT_EQ(c3[i], static_cast<float>(want[i])) << i;
  }
}

TEST(DotTest, BatchDimNotLeadingAndTwoFreeDims) {
  // lhs [M1, B, K, M2] . rhs [K, B, N] -> [B, M1, M2, N]
  const int64_t M1 = 2, B = 3, K = 4, M2 = 2, N = 5;
  std::vector<float> a(M1 * B * K * M2), w(K * B * N), c(B * M1 * M2 * N);
  for (size_t i = 0; i < a.size(); ++i) a[i] = SmallValue(i, 8);
  for (size_t i = 0; i < w.size(); ++i) w[i] = SmallValue(i, 9);
  Builder b;
  int x = b.Param(T(F, {M1, B, K, M2}));
  int y = b.Param(T(F, {K, B, N}));
  int d = b.DotGeneral(x, y, {1}, {1}, {2}, {0}, F);
  ASSERT_EQ(b.TypeOf(d).dims, (Dims{B, M1, M2, N}));
  b.Result(d);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(a, F, {M1, B, K, M2}), Bind(w, F, {K, B, N})),
                         Bindings(Bind(c, F, {B, M1, M2, N})))
                  .ok());
  for (int64_t bb = 0; bb < B; ++bb)
    for (int64_t i1 = 0; i1 < M1; ++i1)
      for (int64_t i2 = 0; i2 < M2; ++i2)
        for (int64_t j = 0; j < N; ++j) {
          double s = 0;
          for (int64_t p = 0; p < K; ++p)
            s += a[((i1 * B + bb) * K + p) * M2 + i2] * static_cast<double>(w[(p * B + bb) * N + j]);
          EXPECT_EQ(c[((bb * M1 + i1) * M2 + i2) * N + j], static_cast<float>(s));
        }
}

TEST(DotTest, Bf16WithinTolerance) {
  const int64_t M = 8, K = 64, N = 6;
  std::vector<uint16_t> a(M * K), w(K * N), c(M * N);
  for (size_t i = 0; i < a.size(); ++i) a[i] = ToBf16(std::sin(0.3f * static_cast<float>(i)));
  for (size_t i = 0; i < w.size(); ++i) w[i] = ToBf16(std::cos(0.7f * static_cast<float>(i)));
  Builder b;
  int x = b.Param(T(DType::kBF16, {M, K}));
  int y = b.Param(T(DType::kBF16, {K, N}));
  b.Result(b.DotGeneral(x, y, {}, {}, {1}, {0}, DType::kBF16));
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(a, DType::kBF16, {M, K}), Bind(w, DType::kBF16, {K, N})),
                         Bindings(Bind(c, DType::kBF16, {M, N})))
                  .ok());
  auto want = RefBmm(1, M, K, N, [&](int64_t, int64_t i, int64_t p) { return FromBf16(a[i * K + p]); },
                     [&](int64_t, int64_t p, int64_t j) { return FromBf16(w[p * N + j]); });
  for (int64_t i = 0; i < M * N; ++i) {
    double got = FromBf16(c[i]);
    // bf16 keeps 8 significant bits: allow the final rounding plus a little accumulation slack.
    EXPECT_NEAR(got, want[i], std::fabs(want[i]) * (1.0 / 128) + 0.02) << i;
  }
}

// bf16 operands, batched, the rhs a transposed view, into a float32 and a bf16 result; float16
// likewise. scripts/test.sh also runs this with ONEDNN_MAX_CPU_ISA=AVX2, where oneDNN has no
// reduced-precision matmul and the kernel goes through float32 (Note [bf16 without AVX-512]).
TEST(DotTest, ReducedPrecisionIntoEachResultType) {
  const int64_t NB = 2, M = 5, K = 33, N = 7;
  for (DType in : {DType::kBF16, DType::kF16}) {
    for (DType res : {DType::kF32, in}) {
      SCOPED_TRACE(std::string(DTypeName(in)) + " -> " + DTypeName(res));
      auto to = [&](float f) -> uint16_t {
        if (in == DType::kBF16) return ToBf16(f);
        _Float16 h = static_cast<_Float16>(f);
        uint16_t u;
        std::memcpy(&u, &h, 2);
        return u;
      };
      auto from = [&](uint16_t u) -> double {
        if (in == DType::kBF16) return FromBf16(u);
        _Float16 h;
        std::memcpy(&h, &u, 2);
        return static_cast<double>(h);
      };
      std::vector<uint16_t> a(NB * M * K), wt(NB * N * K);  // wt holds the rhs as [NB, N, K]
      for (size_t i = 0; i < a.size(); ++i) a[i] = to(std::sin(0.37f * static_cast<float>(i)));
      for (size_t i = 0; i < wt.size(); ++i) wt[i] = to(std::cos(0.11f * static_cast<float>(i)));
      Builder b;
      int x = b.Param(T(in, {NB, M, K}));
      int y = b.Param(T(in, {NB, K, N}));
      b.Result(b.DotGeneral(x, y, {0}, {0}, {2}, {1}, res));
      std::vector<float> c32(NB * M * N);
      std::vector<uint16_t> c16(NB * M * N);
      Binding out = res == DType::kF32 ? Bind(c32, res, {NB, M, N}) : Bind(c16, res, {NB, M, N});
      ASSERT_TRUE(RunProgram(b, Bindings(Bind(a, in, {NB, M, K}), Bind(wt, in, {NB, K, N}, {N * K, 1, K})),
                             Bindings(std::move(out)))
                      .ok());
      auto want = RefBmm(NB, M, K, N, [&](int64_t bi, int64_t i, int64_t p) { return from(a[(bi * M + i) * K + p]); },
                         [&](int64_t bi, int64_t p, int64_t j) { return from(wt[(bi * N + j) * K + p]); });
      for (int64_t i = 0; i < NB * M * N; ++i) {
        double got = res == DType::kF32 ? c32[i] : from(c16[i]);
        // float32 accumulation of exact products; a reduced result adds its one rounding.
        double tol = res == DType::kF32 ? 1e-5 * (1 + std::fabs(want[i]))
                                        : std::fabs(want[i]) * (in == DType::kBF16 ? 1.0 / 128 : 1.0 / 1024) + 1e-3;
        EXPECT_NEAR(got, want[i], tol) << i;
      }
    }
  }
}

TEST(DotTest, F64AndIntegers) {
  const int64_t M = 3, K = 4, N = 5;
  std::vector<double> a(M * K), w(K * N), c(M * N);
  std::vector<int32_t> ai(M * K), wi(K * N), ci(M * N);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = 0.1 * static_cast<double>(i) - 0.5;
    ai[i] = static_cast<int32_t>(i) * 1000 - 3000;
  }
  for (size_t i = 0; i < w.size(); ++i) {
    w[i] = 1.0 / (1.0 + static_cast<double>(i));
    wi[i] = 7 - static_cast<int32_t>(i);
  }
  Builder b;
  int x = b.Param(T(DType::kF64, {M, K}));
  int y = b.Param(T(DType::kF64, {N, K}));  // transposed layout: contract dim 1 of both
  int xi = b.Param(T(DType::kI32, {M, K}));
  int yi = b.Param(T(DType::kI32, {K, N}));
  b.Result(b.DotGeneral(x, y, {}, {}, {1}, {1}, DType::kF64));
  b.Result(b.DotGeneral(xi, yi, {}, {}, {1}, {0}, DType::kI32));
  // y is w viewed as [N, K] with strides {1, N}
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(a, DType::kF64, {M, K}), Bind(w, DType::kF64, {N, K}, {1, N}),
                                     Bind(ai, DType::kI32, {M, K}), Bind(wi, DType::kI32, {K, N})),
                         Bindings(Bind(c, DType::kF64, {M, N}), Bind(ci, DType::kI32, {M, N})))
                  .ok());
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      int64_t si = 0;
      for (int64_t p = 0; p < K; ++p) {
        s += a[i * K + p] * w[p * N + j];
        si += int64_t{ai[i * K + p]} * wi[p * N + j];
      }
      EXPECT_NEAR(c[i * N + j], s, 1e-15) << i << "," << j;  // |s| < 2: a few ulps (BLAS order, FMA)
      EXPECT_EQ(ci[i * N + j], static_cast<int32_t>(si)) << i << "," << j;
    }
}

// Result types other than the operands' (float64 into float32 once wrote doubles over a float
// buffer), and integer types the plain loop did not take (int8 was Unimplemented).
TEST(DotTest, PlainLoopConvertsToAnyResultType) {
  const int64_t M = 3, K = 4, N = 2;
  std::vector<double> a(M * K), w(K * N);
  std::vector<int8_t> ai(M * K), wi(K * N);
  for (int64_t i = 0; i < M * K; ++i) a[i] = SmallValue(i, 1), ai[i] = static_cast<int8_t>(i * 13 - 60);
  for (int64_t i = 0; i < K * N; ++i) w[i] = SmallValue(i, 2), wi[i] = static_cast<int8_t>(90 - i * 11);
  auto want = RefBmm(1, M, K, N, [&](int64_t, int64_t i, int64_t p) { return a[i * K + p]; },
                     [&](int64_t, int64_t p, int64_t j) { return w[p * N + j]; });
  auto want_i = RefBmm(1, M, K, N, [&](int64_t, int64_t i, int64_t p) { return ai[i * K + p]; },
                       [&](int64_t, int64_t p, int64_t j) { return wi[p * N + j]; });
  {
    Builder b;
    int x = b.Param(T(DType::kF64, {M, K}));
    int y = b.Param(T(DType::kF64, {K, N}));
    b.Result(b.DotGeneral(x, y, {}, {}, {1}, {0}, F));
    std::vector<float> c(M * N + 4, -1.0f);  // the tail must stay untouched
    Status s = RunProgram(b, Bindings(Bind(a, DType::kF64, {M, K}), Bind(w, DType::kF64, {K, N})),
                          Bindings(Bind(c, F, {M, N})));
    ASSERT_TRUE(s.ok()) << s.ToString();
    for (int64_t i = 0; i < M * N; ++i) EXPECT_EQ(c[i], static_cast<float>(want[i])) << i;
    for (int64_t i = M * N; i < M * N + 4; ++i) EXPECT_EQ(c[i], -1.0f);
  }
  for (DType res : {DType::kI32, DType::kI8}) {
    SCOPED_TRACE(DTypeName(res));
    Builder b;
    int x = b.Param(T(DType::kI8, {M, K}));
    int y = b.Param(T(DType::kI8, {K, N}));
    b.Result(b.DotGeneral(x, y, {}, {}, {1}, {0}, res));
    std::vector<int32_t> c32(M * N);
    std::vector<int8_t> c8(M * N);
    Binding out = res == DType::kI32 ? Bind(c32, res, {M, N}) : Bind(c8, res, {M, N});
    ASSERT_TRUE(RunProgram(b, Bindings(Bind(ai, DType::kI8, {M, K}), Bind(wi, DType::kI8, {K, N})),
                           Bindings(std::move(out)))
                    .ok());
    for (int64_t i = 0; i < M * N; ++i) {
      int64_t exact = static_cast<int64_t>(want_i[i]);
      if (res == DType::kI32) EXPECT_EQ(c32[i], exact) << i;
      else EXPECT_EQ(c8[i], static_cast<int8_t>(exact)) << i;  // wraps, as PyTorch's int8 mm does
    }
  }
}

TEST(DotTest, EmptyContractionIsZero) {
  Builder b;
  int x = b.Param(T(F, {2, 0}));
  int y = b.Param(T(F, {0, 3}));
  b.Result(b.DotGeneral(x, y, {}, {}, {1}, {0}, F));
  std::vector<float> none(1), c(6, 9);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(none, F, {2, 0}), Bind(none, F, {0, 3})), Bindings(Bind(c, F, {2, 3}))).ok());
  EXPECT_EQ(c, std::vector<float>(6, 0.0f));
}

TEST(DotTest, ResultFeedsAFusedEpilogue) {
  // relu(x @ w + bias): the dot is a kernel step, the epilogue one fused region.
  const int64_t M = 4, K = 3, N = 5;
  std::vector<float> a(M * K), w(K * N), bias(N), c(M * N);
  for (size_t i = 0; i < a.size(); ++i) a[i] = SmallValue(i, 10);
  for (size_t i = 0; i < w.size(); ++i) w[i] = SmallValue(i, 11);
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = SmallValue(i, 12);
  Builder b;
  int x = b.Param(T(F, {M, K}));
  int y = b.Param(T(F, {K, N}));
  int bi = b.Param(T(F, {N}));
  int d = b.DotGeneral(x, y, {}, {}, {1}, {0}, F);
  int s = b.Binary(OpCode::kAdd, d, b.BroadcastInDim(bi, {M, N}, {1}));
  b.Result(b.Binary(OpCode::kMaximum, s, b.ScalarLike(0, s)));
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(a, F, {M, K}), Bind(w, F, {K, N}), Bind(bias, F, {N})),
                         Bindings(Bind(c, F, {M, N})))
                  .ok());
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float acc = 0;
      for (int64_t p = 0; p < K; ++p) acc += a[i * K + p] * w[p * N + j];
      EXPECT_EQ(c[i * N + j], std::max(acc + bias[j], 0.0f));
    }
}

}  // namespace
}  // namespace tpu::host::testing
