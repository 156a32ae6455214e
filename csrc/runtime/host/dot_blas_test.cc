// dot_general on float64 (OpenBLAS) and integers (the blocked loop) at sizes that cross the
// blocks and thread the work, with strided and broadcast operands.
#include <cmath>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/host/host_test_util.h"

namespace tpu::host::testing {
namespace {

TEST(DotBlasTest, Int64WrapsAndMatchesExactLoop) {
  // [2, 70, 300] x [2, 300, 260]: blocks of 64 x 256 x 256 leave partial blocks on every side.
  // Values near 2^40 make the products and sums wrap modulo 2^64 as on PyTorch's CPU.
  const int64_t B = 2, M = 70, K = 300, N = 260;
  std::vector<int64_t> a(B * M * K), w(B * N * K), c(B * M * N);
  for (size_t i = 0; i < a.size(); ++i)  // times 2^20, not << 20: shifting a negative value is undefined
    a[i] = (static_cast<int64_t>(i * 2654435761u % 1000003) - 500000) * (int64_t{1} << 20);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int64_t>(i * 40503u % 65521) - 30000;
  Builder b;
  int x = b.Param(T(DType::kI64, {B, M, K}));
  int y = b.Param(T(DType::kI64, {B, K, N}));
  b.Result(b.DotGeneral(x, y, {0}, {0}, {2}, {1}, DType::kI64));
  // y is w ([B, N, K] row-major) transposed: strides {N * K, 1, K}
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(a, DType::kI64, {B, M, K}), Bind(w, DType::kI64, {B, K, N}, {N * K, 1, K})),
                         Bindings(Bind(c, DType::kI64, {B, M, N})))
                  .ok());
  for (int64_t bi = 0; bi < B; ++bi)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        uint64_t s = 0;
        for (int64_t p = 0; p < K; ++p)
          s += static_cast<uint64_t>(a[(bi * M + i) * K + p]) * static_cast<uint64_t>(w[(bi * N + j) * K + p]);
        ASSERT_EQ(c[(bi * M + i) * N + j], static_cast<int64_t>(s)) << bi << "," << i << "," << j;
      }
}

TEST(DotBlasTest, NarrowIntegersWrapToTheirWidth) {
  const int64_t M = 9, K = 33, N = 17;
  std::vector<int8_t> a(M * K), w(K * N), c(M * N);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int8_t>(i * 37 % 255 - 127);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int8_t>(i * 11 % 255 - 127);
  Builder b;
  int x = b.Param(T(DType::kI8, {M, K}));
  int y = b.Param(T(DType::kI8, {K, N}));
  b.Result(b.DotGeneral(x, y, {}, {}, {1}, {0}, DType::kI8));
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(a, DType::kI8, {M, K}), Bind(w, DType::kI8, {K, N})),
                         Bindings(Bind(c, DType::kI8, {M, N})))
                  .ok());
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      int64_t s = 0;
      for (int64_t p = 0; p < K; ++p) s += int64_t{a[i * K + p]} * w[p * N + j];
      ASSERT_EQ(c[i * N + j], static_cast<int8_t>(static_cast<uint8_t>(s & 0xff))) << i << "," << j;
    }
}

TEST(DotBlasTest, F64ThreadedStridedAndBroadcast) {
  // lhs transposed ([M, K] with strides {1, M}); rhs broadcast over the batch (stride 0), which
  // BLAS cannot address and is packed first; wide output (split by columns) and tall (by rows).
  for (auto [M, N] : {std::pair<int64_t, int64_t>{150, 40}, {20, 300}}) {
    const int64_t B = 3, K = 130;
    std::vector<double> a(B * K * M), w(K * N), c(B * M * N);
    for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.1 * static_cast<double>(i));
    for (size_t i = 0; i < w.size(); ++i) w[i] = std::cos(0.07 * static_cast<double>(i));
    Builder b;
    int x = b.Param(T(DType::kF64, {B, M, K}));
    int y = b.Param(T(DType::kF64, {B, K, N}));
    b.Result(b.DotGeneral(x, y, {0}, {0}, {2}, {1}, DType::kF64));
    ASSERT_TRUE(RunProgram(b, Bindings(Bind(a, DType::kF64, {B, M, K}, {K * M, 1, M}), Bind(w, DType::kF64, {B, K, N}, {0, N, 1})),
                           Bindings(Bind(c, DType::kF64, {B, M, N})))
                    .ok());
    for (int64_t bi = 0; bi < B; ++bi)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          double s = 0;
          for (int64_t p = 0; p < K; ++p) s += a[bi * K * M + p * M + i] * w[p * N + j];
          // |terms| <= 1, K = 130: the summation order differs from BLAS's by a few ulps of K.
          ASSERT_NEAR(c[(bi * M + i) * N + j], s, 1e-12) << bi << "," << i << "," << j;
        }
  }
}

}  // namespace
}  // namespace tpu::host::testing
