// A program with bounded dims for the backends' tests (Note [Bounded dims in the IR],
// ir/types.h), and what it computes: each backend runs it for several runtime sizes with NaN in
// the padding, and every result must match the values computed here from the real rows alone.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "ir/builder.h"

namespace tpu::testing {

constexpr int64_t kBoundedRows = 8, kBoundedCols = 3;

// Parameters: x f32[8, 3] (rows past n are padding), n i32[]. With xb = x's first n rows
// (set_dimension_size), the results:
//   0 get_dimension_size(xb, 0), i32[]      1 column sums of xb, f32[3]
//   2 max of xb, f32[]                      3 exp(xb) * 2 at the bound, f32[8, 3] (rows < n defined)
//   4 xb^T xb (contracting the bounded dim), f32[3, 3]
//   5 softmax of xb^T over its bounded dim at the bound, f32[3, 8] (columns < n defined)
//   6 get_dimension_size of that softmax's dim 1, i32[]
inline Graph BoundedTestProgram() {
  Builder b;
  const DType f = DType::kF32;
  int x = b.Param(TensorType{f, {kBoundedRows, kBoundedCols}});
  int n = b.Param(TensorType{DType::kI32, {}});
  int xb = b.SetDimensionSize(x, n, 0);
  b.Result(b.GetDimensionSize(xb, 0));
  b.Result(b.Reduce(xb, b.Constant(0.0, f), {0}, ReduceKind::kAdd));
  b.Result(b.Reduce(xb, b.Constant(-INFINITY, f), {0, 1}, ReduceKind::kMax));
  // A static operand takes the bounded one's runtime size before they meet (as in StableHLO).
  int two = b.SetDimensionSize(b.ScalarLike(2.0, x), n, 0);
  int twice = b.Binary(OpCode::kMultiply, b.Unary(OpCode::kExp, xb), two);
  b.Result(b.SetDimensionSize(twice, b.Constant(kBoundedRows, DType::kI32), 0));
  b.Result(b.DotGeneral(xb, xb, {}, {}, {0}, {0}, f));
  int t = b.Transpose(xb, {1, 0});
  const Dims full = b.TypeOf(t).dims;
  int mx = b.Reduce(t, b.Constant(-INFINITY, f), {1}, ReduceKind::kMax);
  auto spread = [&](int v) { return b.SetDimensionSize(b.BroadcastInDim(v, full, {0}), n, 1); };
  int e = b.Unary(OpCode::kExp, b.Binary(OpCode::kSubtract, t, spread(mx)));
  int z = b.Reduce(e, b.Constant(0.0, f), {1}, ReduceKind::kAdd);
  int p = b.Binary(OpCode::kDivide, e, spread(z));
  b.Result(b.SetDimensionSize(p, b.Constant(kBoundedRows, DType::kI32), 1));
  b.Result(b.GetDimensionSize(p, 1));
  auto g = b.Finish();
  return g.ok() ? std::move(g.value()) : Graph{};
}

// x for a runtime size n: real values in rows < n, NaN in the padding.
inline std::vector<float> BoundedTestInput(int n) {
  std::vector<float> x(kBoundedRows * kBoundedCols, NAN);
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < kBoundedCols; ++c) x[r * kBoundedCols + c] = 0.25f * static_cast<float>((r * 7 + c * 3) % 11) - 1.0f;
  return x;
}

struct BoundedTestResults {
  int32_t size = 0, softmax_size = 0;
  std::vector<float> sums, twice, gram, softmax;  // twice: rows < n; softmax: [3, n]
  float max = 0;
};

// The results from the real rows only (in double, then rounded).
inline BoundedTestResults BoundedTestExpected(int n) {
  const std::vector<float> x = BoundedTestInput(n);
  auto at = [&](int r, int c) { return static_cast<double>(x[r * kBoundedCols + c]); };
  BoundedTestResults want;
  want.size = want.softmax_size = n;
  want.max = -INFINITY;
  for (int c = 0; c < kBoundedCols; ++c) {
    double s = 0;
    for (int r = 0; r < n; ++r) {
      s += at(r, c);
      want.max = std::max(want.max, static_cast<float>(at(r, c)));
    }
    want.sums.push_back(static_cast<float>(s));
  }
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < kBoundedCols; ++c) want.twice.push_back(static_cast<float>(2 * std::exp(at(r, c))));
  for (int i = 0; i < kBoundedCols; ++i)
    for (int j = 0; j < kBoundedCols; ++j) {
      double s = 0;
      for (int r = 0; r < n; ++r) s += at(r, i) * at(r, j);
      want.gram.push_back(static_cast<float>(s));
    }
  for (int c = 0; c < kBoundedCols; ++c) {
    double m = -INFINITY, z = 0;
    for (int r = 0; r < n; ++r) m = std::max(m, at(r, c));
    for (int r = 0; r < n; ++r) z += std::exp(at(r, c) - m);
    for (int r = 0; r < n; ++r) want.softmax.push_back(static_cast<float>(std::exp(at(r, c) - m) / z));
  }
  return want;
}

// Checks a run's results (downloaded, in program order) against BoundedTestExpected(n).
struct BoundedTestRun {
  int32_t size = -1, softmax_size = -1;
  std::vector<float> sums, max, twice, gram, softmax;  // as the program lays them out
};

inline void ExpectBoundedNear(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::fabs(want[i]))) << what << " element " << i;
}

inline void CheckBoundedTestRun(int n, const BoundedTestRun& run) {
  const BoundedTestResults want = BoundedTestExpected(n);
  EXPECT_EQ(run.size, want.size);
  EXPECT_EQ(run.softmax_size, want.softmax_size);
  ExpectBoundedNear(run.sums, want.sums, "column sums");
  ExpectBoundedNear(run.max, {want.max}, "max");
  ASSERT_EQ(run.twice.size(), static_cast<size_t>(kBoundedRows * kBoundedCols));
  ExpectBoundedNear(std::vector<float>(run.twice.begin(), run.twice.begin() + n * kBoundedCols), want.twice, "exp * 2");
  ExpectBoundedNear(run.gram, want.gram, "x^T x");
  ASSERT_EQ(run.softmax.size(), static_cast<size_t>(kBoundedCols * kBoundedRows));
  std::vector<float> real;  // columns < n
  for (int c = 0; c < kBoundedCols; ++c)
    for (int r = 0; r < n; ++r) real.push_back(run.softmax[c * kBoundedRows + r]);
  ExpectBoundedNear(real, want.softmax, "softmax");
}

}  // namespace tpu::testing
