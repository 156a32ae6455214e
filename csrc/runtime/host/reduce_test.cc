// reduce and arg_reduce through the host executor, checked against plain loops.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/host/host_test_util.h"
#include "runtime/host/reduce_simd.h"

namespace tpu::host::testing {
namespace {

const DType F = DType::kF32;

// Reference reduction of a row-major array over `rdims`, in double.
std::vector<double> RefReduce(const std::vector<float>& x, const Dims& dims, const Dims& rdims,
                              ReduceKind kind) {
  int rank = static_cast<int>(dims.size());
  std::vector<bool> red(rank, false);
  for (int64_t d : rdims) red[d] = true;
  Dims out_dims;
  for (int d = 0; d < rank; ++d)
    if (!red[d]) out_dims.push_back(d);
  int64_t out_n = 1;
  for (int64_t d : out_dims) out_n *= dims[d];
  double init = kind == ReduceKind::kAdd ? 0.0 : -INFINITY;
  std::vector<double> out(out_n, init);
  Dims strides = ContiguousStrides(dims);
  for (int64_t e = 0; e < static_cast<int64_t>(x.size()); ++e) {
    int64_t o = 0;
    for (int d = 0; d < rank; ++d) {
      int64_t i = (e / strides[d]) % dims[d];
      if (!red[d]) o = o * dims[d] + i;
    }
    if (kind == ReduceKind::kAdd) out[o] += x[e];
    else out[o] = std::max(out[o], static_cast<double>(x[e]));
  }
  return out;
}

struct ReduceCase {
  Dims dims;
  Dims rdims;
};

class ReduceTest : public ::testing::TestWithParam<ReduceCase> {};

TEST_P(ReduceTest, AddAndMaxMatchLoops) {
  const ReduceCase& c = GetParam();
  int64_t n = T(F, c.dims).NumElements();
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = SmallValue(i, 3);  // multiples of 1/4: exact sums
  for (ReduceKind kind : {ReduceKind::kAdd, ReduceKind::kMax}) {
    SCOPED_TRACE(kind == ReduceKind::kAdd ? "add" : "max");
    Builder b;
    int p = b.Param(T(F, c.dims));
    int init = b.Constant(kind == ReduceKind::kAdd ? 0.0 : -INFINITY, F);
    int r = b.Reduce(p, init, c.rdims, kind);
    b.Result(r);
    Dims out_dims = b.TypeOf(r).dims;
    std::vector<double> want = RefReduce(x, c.dims, c.rdims, kind);
    std::vector<float> out(want.size(), -999);
    ASSERT_TRUE(RunProgram(b, Bindings(Bind(x, F, c.dims)), Bindings(Bind(out, F, out_dims))).ok());
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(out[i], static_cast<float>(want[i])) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Dims, ReduceTest,
    ::testing::Values(ReduceCase{{5, 7}, {1}},            // inner
                      ReduceCase{{2, 3, 40}, {1, 2}},     // inner two
                      ReduceCase{{6, 9}, {0}},            // leading
                      ReduceCase{{4, 3, 10}, {0, 1}},     // leading two
                      ReduceCase{{3, 5, 4}, {1}},         // middle
                      ReduceCase{{2, 3, 4, 5}, {1, 2}},   // middle two
                      ReduceCase{{2, 3, 4}, {0, 2}},      // outer and inner
                      ReduceCase{{3, 4, 5}, {0, 1, 2}},   // all
                      ReduceCase{{5000}, {0}},            // long row
                      ReduceCase{{3000, 3}, {0}},         // long columns
                      ReduceCase{{4, 3}, {}},             // nothing: a copy
                      // large enough to be threaded: columns, split rows, split columns
                      ReduceCase{{64, 300, 40}, {1}},     // middle dim (columns of 40)
                      ReduceCase{{3, 70000}, {1}},        // few long rows: each row split
                      ReduceCase{{70000, 3}, {0}},        // few long columns: range split
                      ReduceCase{{200, 50, 30}, {0, 2}},  // outer and inner, many outputs
                      ReduceCase{{3, 200, 300}, {0, 2}},  // few outputs, many runs: runs split
                      ReduceCase{{1000, 100}, {0, 1}},    // everything: one split run
                      // leading, rows in groups of 16 (Note [Column sums by row groups]): a
                      // partial last group, vectors of columns and a tail, a split range
                      ReduceCase{{700, 70}, {0}}, ReduceCase{{13, 45}, {0}}, ReduceCase{{3000, 300}, {0}}));

TEST(ReduceKernelTest, TransposedInputAndInit) {
  // sum over dim 1 of a transposed view, starting from init = 10.
  std::vector<float> m(12);
  for (int k = 0; k < 12; ++k) m[k] = static_cast<float>(k);
  Builder b;
  int x = b.Param(T(F, {3, 4}));  // x[i][j] = m[j * 3 + i]
  int init = b.Param(T(F, {}));
  b.Result(b.Reduce(x, init, {1}, ReduceKind::kAdd));
  b.Result(b.Reduce(x, init, {0}, ReduceKind::kAdd));
  std::vector<float> iv = {10}, rows(3), cols(4);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(m, F, {3, 4}, {1, 3}), Bind(iv, F, {})),
                         Bindings(Bind(rows, F, {3}), Bind(cols, F, {4})))
                  .ok());
  for (int i = 0; i < 3; ++i) {
    float s = 10;
    for (int j = 0; j < 4; ++j) s += m[j * 3 + i];
    EXPECT_EQ(rows[i], s);
  }
  for (int j = 0; j < 4; ++j) {
    float s = 10;
    for (int i = 0; i < 3; ++i) s += m[j * 3 + i];
    EXPECT_EQ(cols[j], s);
  }
}

TEST(ReduceKernelTest, LargeStridedViewsReadInPlace) {
  // x[i][j] = m[j * 300 + i] (a transposed view), reduced over either dim; also max with a NaN.
  const int64_t R = 300, C = 400;
  std::vector<float> m(R * C);
  for (int64_t k = 0; k < R * C; ++k) m[k] = SmallValue(k, 5);
  for (int64_t dim : {0, 1}) {
    Builder b;
    int x = b.Param(T(F, {R, C}));
    b.Result(b.Reduce(x, b.Constant(0.0, F), {dim}, ReduceKind::kAdd));
    b.Result(b.Reduce(x, b.Constant(-INFINITY, F), {dim}, ReduceKind::kMax));
    int64_t n = dim == 0 ? C : R;
    std::vector<float> sum(n), mx(n);
    std::vector<float> mn = m;
    mn[7 * R + 5] = NAN;  // x[5][7]
    ASSERT_TRUE(RunProgram(b, Bindings(Bind(mn, F, {R, C}, {1, R})), Bindings(Bind(sum, F, {n}), Bind(mx, F, {n}))).ok());
    for (int64_t o = 0; o < n; ++o) {
      double s = 0;
      float best = -INFINITY;
      bool nan = false;
      for (int64_t r = 0; r < (dim == 0 ? R : C); ++r) {
        int64_t i = dim == 0 ? r : o, j = dim == 0 ? o : r;
        float v = mn[j * R + i];
        s += v;
        nan |= v != v;
        best = std::max(best, v);
      }
      SCOPED_TRACE(o);
      if (nan) {
        EXPECT_TRUE(std::isnan(sum[o]));
        EXPECT_TRUE(std::isnan(mx[o]));
      } else {
        EXPECT_EQ(sum[o], static_cast<float>(s));
        EXPECT_EQ(mx[o], best);
      }
    }
  }
}

// Note [Float sums] written out: elements in order into 16 float lanes per block of 2048 (the
// tail past the last group of 16 of the last block into lane 0), lanes added in double per block.
float RefLaneSum(const std::vector<float>& v, float init) {
  double total = 0;
  const int64_t n = static_cast<int64_t>(v.size());
  for (int64_t b0 = 0; b0 < n; b0 += 2048) {
    int64_t len = std::min<int64_t>(2048, n - b0), full = len / 16 * 16;
    float lanes[16] = {};
    for (int64_t p = 0; p < len; ++p) lanes[p < full ? p % 16 : 0] += v[b0 + p];
    double block = 0;
    for (float l : lanes) block += l;
    total += block;
  }
  return static_cast<float>(static_cast<double>(init) + total);
}

TEST(ReduceKernelTest, FloatSumsFollowTheLaneNote) {
  // Values with cancellation, so a different grouping gives different bits. Layouts: rows (one
  // run), a middle dim (columns), rows split into runs (dims 0 and 2), and
  // sizes that thread (rows split in pieces, columns split by blocks); short rows, whose lanes are
  // combined 16 rows at a time, with a partial last group and tails.
  auto val = [](int64_t i) { return static_cast<float>(((i * 7919) % 2003) - 1001) * (i % 3 == 0 ? 1e4f : 1e-2f); };
  struct Case { Dims dims; Dims rdims; };
  for (const Case& c : {Case{{7, 3000}, {1}}, Case{{4, 300, 9}, {1}}, Case{{5, 6, 700}, {0, 2}},
                        Case{{2, 70000}, {1}}, Case{{70000, 2}, {0}}, Case{{3, 9000, 5}, {1}},
                        Case{{37, 100}, {1}}, Case{{4000, 21}, {1}}, Case{{50, 2, 16}, {2}},
                        // columns of whole vectors and a tail: one block, and several
                        Case{{3, 700, 40}, {1}}, Case{{2, 4500, 33}, {1}},
                        // blocks L1 holds: lanes in registers, with rows past the last 16 and tails
                        Case{{4, 64, 128}, {1}}, Case{{3, 37, 40}, {1}}, Case{{5, 100, 17}, {1}},
                        // wider blocks, in groups of 64 rows (Note [Column sums by row groups]): rows
                        // past the last group and past the last 16, tails; leading dims in groups of 16
                        Case{{2, 300, 40}, {1}}, Case{{2, 2100, 50}, {1}}, Case{{700, 45}, {0}},
                        // short runs gathered into rows first (Note [Gathered rows]): a batch norm's sums
                        Case{{16, 40, 2, 2}, {0, 2, 3}}, Case{{7, 33, 5}, {0, 2}}, Case{{64, 3, 7}, {0, 2}}}) {
    SCOPED_TRACE(::testing::Message() << DimsToString(c.dims) << " over " << DimsToString(c.rdims));
    int64_t n = 1;
    for (int64_t d : c.dims) n *= d;
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = val(i);
    Builder b;
    int p = b.Param(T(F, c.dims));
    int r = b.Reduce(p, b.Constant(0.5, F), c.rdims, ReduceKind::kAdd);
    b.Result(r);
    Dims od = b.TypeOf(r).dims;
    int64_t outs = 1;
    for (int64_t d : od) outs *= d;
    std::vector<float> got(outs);
    ASSERT_TRUE(RunProgram(b, Bindings(Bind(x, F, c.dims)), Bindings(Bind(got, F, od))).ok());
    // each output's elements in row-major order of the reduced dims
    Dims st = ContiguousStrides(c.dims);
    std::vector<std::vector<float>> per(outs);
    for (int64_t e = 0; e < n; ++e) {
      int64_t o = 0;
      for (size_t d = 0; d < c.dims.size(); ++d)
        if (std::find(c.rdims.begin(), c.rdims.end(), static_cast<int64_t>(d)) == c.rdims.end())
          o = o * c.dims[d] + (e / st[d]) % c.dims[d];
      per[o].push_back(x[e]);
    }
    bool leading = c.rdims == Dims{0};  // leading dims of a contiguous f32 input: double columns
    for (int64_t o = 0; o < outs; ++o) {
      float want = RefLaneSum(per[o], 0.5f);
      if (leading) {
        double s = 0.5;
        for (float v : per[o]) s += v;
        want = static_cast<float>(s);
      }
      ASSERT_EQ(got[o], want) << o;
    }
  }
}

TEST(ReduceKernelTest, ColumnMaxAndMinOverRowGroupsPropagateNaN) {
  // Max and min over the leading dim walk the rows in groups (Note [Column sums by row groups]);
  // a NaN anywhere in a column, in any row of a group or of the last partial one, wins.
  const Dims dims{300, 70};
  std::vector<float> x(300 * 70);
  for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) x[i] = SmallValue(i, 5);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (auto [r, c] : {std::pair<int, int>{0, 3}, {17, 20}, {31, 41}, {299, 69}, {288, 64}, {150, 5}}) x[r * 70 + c] = nan;
  x[5 * 70 + 7] = INFINITY;
  x[6 * 70 + 8] = -INFINITY;
  for (ReduceKind kind : {ReduceKind::kMax, ReduceKind::kMin}) {
    SCOPED_TRACE(kind == ReduceKind::kMax ? "max" : "min");
    Builder b;
    int p = b.Param(T(F, dims));
    int r = b.Reduce(p, b.Constant(kind == ReduceKind::kMax ? -INFINITY : INFINITY, F), {0}, kind);
    b.Result(r);
    std::vector<float> got(70);
    ASSERT_TRUE(RunProgram(b, Bindings(Bind(x, F, dims)), Bindings(Bind(got, F, {70}))).ok());
    for (int c = 0; c < 70; ++c) {
      float want = kind == ReduceKind::kMax ? -INFINITY : INFINITY;
      bool saw_nan = false;
      for (int row = 0; row < 300; ++row) {
        float v = x[row * 70 + c];
        saw_nan |= std::isnan(v);
        want = kind == ReduceKind::kMax ? std::max(want, v) : std::min(want, v);
      }
      if (saw_nan) EXPECT_TRUE(std::isnan(got[c])) << c;
      else EXPECT_EQ(got[c], want) << c;
    }
  }
}

TEST(ReduceKernelTest, TransposedOutputsMatchLoops) {
  // Note [Transposed outputs]: memory [A][R][D][S] read as [A, R, S, D] (the output's last dim D
  // is not the input's unit-stride dim S), reduced over R: sums follow the lane note, max and an
  // integer sum match loops, with sizes that thread.
  const int64_t A = 6, R = 4, D = 16, S = 333;
  std::vector<float> x(A * R * D * S);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((static_cast<int64_t>(i) * 7919) % 2003 - 1001) * (i % 3 ? 1e-2f : 1e3f);
  std::vector<int64_t> xi(x.size());
  for (size_t i = 0; i < x.size(); ++i) xi[i] = static_cast<int64_t>(x[i] * 100);
  const Dims dims = {A, R, S, D}, strides = {R * D * S, D * S, 1, S};
  for (ReduceKind kind : {ReduceKind::kAdd, ReduceKind::kMax}) {
    SCOPED_TRACE(static_cast<int>(kind));
    Builder b;
    int p = b.Param(T(F, dims));
    int q = b.Param(T(DType::kI64, dims));
    b.Result(b.Reduce(p, b.Constant(kind == ReduceKind::kAdd ? 0.0 : -INFINITY, F), {1}, kind));
    b.Result(b.Reduce(q, b.Constant(0, DType::kI64), {1}, ReduceKind::kAdd));
    std::vector<float> got(A * S * D);
    std::vector<int64_t> goti(A * S * D);
    ASSERT_TRUE(RunProgram(b, Bindings(Bind(x, F, dims, strides), Bind(xi, DType::kI64, dims, strides)),
                           Bindings(Bind(got, F, {A, S, D}), Bind(goti, DType::kI64, {A, S, D})))
                    .ok());
    for (int64_t a = 0; a < A; ++a)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t d = 0; d < D; ++d) {
          std::vector<float> run;
          int64_t isum = 0;
          for (int64_t r = 0; r < R; ++r) {
            run.push_back(x[a * strides[0] + r * strides[1] + s + d * S]);
            isum += xi[a * strides[0] + r * strides[1] + s + d * S];
          }
          float want = RefLaneSum(run, 0.0f);
          if (kind == ReduceKind::kMax) want = *std::max_element(run.begin(), run.end());
          const int64_t o = (a * S + s) * D + d;
          ASSERT_EQ(got[o], want) << a << " " << s << " " << d;
          ASSERT_EQ(goti[o], isum) << a << " " << s << " " << d;
        }
  }
}

TEST(ReduceKernelTest, RowMaxAndMinAcrossLengthsAndNaNPositions) {
  // MaxF32Row's vector body, its lane reduction and its tail: the max/min of every length from 1
  // to 200, without a NaN and with one at each of several positions (a NaN anywhere gives NaN),
  // from an init that wins, loses or is NaN.
  for (int64_t n = 1; n <= 200; ++n) {
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = std::sin(static_cast<float>(i) * 1.7f + n) * 100.0f;
    for (bool is_max : {true, false}) {
      const float best = is_max ? *std::max_element(x.begin(), x.end()) : *std::min_element(x.begin(), x.end());
      const float lose = is_max ? -1e30f : 1e30f, win = -lose;
      EXPECT_EQ(MaxF32Row(x.data(), n, lose, is_max), best) << n;
      EXPECT_EQ(MaxF32Row(x.data(), n, win, is_max), win) << n;
      EXPECT_TRUE(std::isnan(MaxF32Row(x.data(), n, NAN, is_max))) << n;
      for (int64_t at : {int64_t{0}, n / 3, n / 2, n - 1}) {
        std::vector<float> y = x;
        y[at] = NAN;
        EXPECT_TRUE(std::isnan(MaxF32Row(y.data(), n, lose, is_max))) << n << " NaN at " << at;
      }
    }
  }
}

TEST(ReduceKernelTest, IntegerSumsWrapLikeTwosComplement) {
  const int64_t n = 50000;  // threaded
  std::vector<int32_t> x(n, 2147483647);
  std::vector<int64_t> y(n, int64_t{1} << 62);
  Builder b;
  int px = b.Param(T(DType::kI32, {n}));
  int py = b.Param(T(DType::kI64, {n}));
  b.Result(b.Reduce(px, b.Constant(0, DType::kI32), {0}, ReduceKind::kAdd));
  b.Result(b.Reduce(py, b.Constant(0, DType::kI64), {0}, ReduceKind::kAdd));
  std::vector<int32_t> sx(1);
  std::vector<int64_t> sy(1);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(x, DType::kI32, {n}), Bind(y, DType::kI64, {n})),
                         Bindings(Bind(sx, DType::kI32, {}), Bind(sy, DType::kI64, {})))
                  .ok());
  uint32_t wx = 0;
  uint64_t wy = 0;
  for (int64_t i = 0; i < n; ++i) wx += 2147483647u, wy += uint64_t{1} << 62;
  EXPECT_EQ(sx[0], static_cast<int32_t>(wx));
  EXPECT_EQ(sy[0], static_cast<int64_t>(wy));
}

TEST(ReduceKernelTest, OtherDTypesAndKinds) {
  Builder b;
  int xi = b.Param(T(DType::kI32, {2, 4}));
  int xb = b.Param(T(DType::kBF16, {2, 4}));
  int xp = b.Param(T(DType::kBool, {2, 4}));
  b.Result(b.Reduce(xi, b.Constant(0, DType::kI32), {1}, ReduceKind::kAdd));
  b.Result(b.Reduce(xi, b.Constant(1, DType::kI32), {1}, ReduceKind::kMul));
  b.Result(b.Reduce(xi, b.Constant(2147483647, DType::kI32), {0}, ReduceKind::kMin));
  b.Result(b.Reduce(xb, b.Constant(0, DType::kBF16), {1}, ReduceKind::kAdd));
  b.Result(b.Reduce(xp, b.Constant(1, DType::kBool), {1}, ReduceKind::kAnd));
  b.Result(b.Reduce(xp, b.Constant(0, DType::kBool), {1}, ReduceKind::kOr));
  std::vector<int32_t> iv = {1, -2, 3, 4, 5, 6, -7, 8};
  std::vector<uint16_t> bv = {ToBf16(1), ToBf16(256), ToBf16(1), ToBf16(1),
                              ToBf16(0.5f), ToBf16(0.25f), ToBf16(0.125f), ToBf16(-1)};
  std::vector<uint8_t> pv = {1, 1, 1, 1, 0, 0, 1, 0};
  std::vector<int32_t> sum(2), prod(2), mn(4);
  std::vector<uint16_t> bsum(2);
  std::vector<uint8_t> all(2), any(2);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(iv, DType::kI32, {2, 4}), Bind(bv, DType::kBF16, {2, 4}),
                                     Bind(pv, DType::kBool, {2, 4})),
                         Bindings(Bind(sum, DType::kI32, {2}), Bind(prod, DType::kI32, {2}),
                                  Bind(mn, DType::kI32, {4}), Bind(bsum, DType::kBF16, {2}),
                                  Bind(all, DType::kBool, {2}), Bind(any, DType::kBool, {2})))
                  .ok());
  EXPECT_EQ(sum, (std::vector<int32_t>{6, 12}));
  EXPECT_EQ(prod, (std::vector<int32_t>{-24, -1680}));
  EXPECT_EQ(mn, (std::vector<int32_t>{1, -2, -7, 4}));
  // bf16 sums accumulate in float and round once: 1 + 256 + 1 + 1 = 259 -> 260 (ulp 2 at 256).
  EXPECT_EQ(FromBf16(bsum[0]), RoundBf16(259.0f));
  EXPECT_EQ(FromBf16(bsum[0]), 260.0f);
  EXPECT_EQ(FromBf16(bsum[1]), -0.125f);
  EXPECT_EQ(all, (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(any, (std::vector<uint8_t>{1, 1}));
}

// Reference arg-max/arg-min: first index of the extreme value; a NaN wins (its first index).
template <typename V>
std::vector<int64_t> RefArg(const std::vector<V>& x, int64_t outer, int64_t red, int64_t inner, bool is_max) {
  std::vector<int64_t> out(outer * inner);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t best = 0;
      for (int64_t r = 0; r < red; ++r) {
        V v = x[(o * red + r) * inner + i], bv = x[(o * red + best) * inner + i];
        if (bv != bv) break;
        if (v != v || (is_max ? v > bv : v < bv)) best = r;
      }
      out[o * inner + i] = best;
    }
  return out;
}

TEST(ArgReduceTest, TiesPickTheFirstIndex) {
  // [2, 5, 3], reduced over dim 1 (a middle dim) and dim 2 (inner).
  std::vector<float> x = {1, 3, 3,  3, 2, 3,  0, 3, 1,  3, 3, 3,  -1, 0, 0,
                          5, 5, 5,  5, 5, 5,  5, 5, 5,  5, 5, 5,  5, 5, 5};
  for (bool is_max : {true, false}) {
    SCOPED_TRACE(is_max ? "argmax" : "argmin");
    ReduceKind k = is_max ? ReduceKind::kMax : ReduceKind::kMin;
    Builder b;
    int p = b.Param(T(F, {2, 5, 3}));
    b.Result(b.ArgReduce(p, 1, k));
    b.Result(b.ArgReduce(p, 2, k));
    b.Result(b.ArgReduce(p, 0, k));
    std::vector<int64_t> mid(6), in(10), lead(15);
    ASSERT_TRUE(RunProgram(b, Bindings(Bind(x, F, {2, 5, 3})),
                           Bindings(Bind(mid, DType::kI64, {2, 3}), Bind(in, DType::kI64, {2, 5}),
                                    Bind(lead, DType::kI64, {5, 3})))
                    .ok());
    EXPECT_EQ(mid, RefArg(x, 2, 5, 3, is_max));
    EXPECT_EQ(in, RefArg(x, 10, 3, 1, is_max));
    EXPECT_EQ(lead, RefArg(x, 1, 2, 15, is_max));
    if (is_max) {
      EXPECT_EQ(in, (std::vector<int64_t>{1, 0, 1, 0, 1, 0, 0, 0, 0, 0}));
      EXPECT_EQ(mid, (std::vector<int64_t>{1, 0, 0, 0, 0, 0}));
    } else {
      EXPECT_EQ(in, (std::vector<int64_t>{0, 1, 0, 0, 0, 0, 0, 0, 0, 0}));
    }
  }
}

TEST(ArgReduceTest, NaNWins) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = {1, nan, 7, nan,   // first NaN at 1
                          9, 2, 3, 4,       // no NaN
                          nan, 1, 2, 3,     // NaN first
                          -1, -2, -3, nan};  // NaN last
  for (bool is_max : {true, false}) {
    Builder b;
    int p = b.Param(T(F, {4, 4}));
    b.Result(b.ArgReduce(p, 1, is_max ? ReduceKind::kMax : ReduceKind::kMin));
    std::vector<int64_t> out(4);
    ASSERT_TRUE(RunProgram(b, Bindings(Bind(x, F, {4, 4})), Bindings(Bind(out, DType::kI64, {4}))).ok());
    EXPECT_EQ(out, (std::vector<int64_t>{1, is_max ? 0 : 1, 0, 3})) << (is_max ? "max" : "min");
  }
}

TEST(ArgReduceTest, LargeRowsAndColumnsMatchReference) {
  // Threaded paths: many rows, a middle dim (columns), and one long row split in pieces; values
  // repeat, so ties pick the first index; a NaN in some rows.
  for (Dims dims : {Dims{300, 4, 500}, Dims{2, 40000, 3}, Dims{1, 1, 90000}}) {
    int64_t n = dims[0] * dims[1] * dims[2];
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>((i * 37) % 101);
    x[n / 2] = NAN;
    for (int64_t dim : {1, 2}) {
      for (bool is_max : {true, false}) {
        SCOPED_TRACE(::testing::Message() << dims[1] << " dim " << dim << (is_max ? " max" : " min"));
        Builder b;
        int p = b.Param(T(F, dims));
        b.Result(b.ArgReduce(p, dim, is_max ? ReduceKind::kMax : ReduceKind::kMin));
        Dims od = dims;
        od.erase(od.begin() + dim);
        std::vector<int64_t> out(n / dims[dim]);
        ASSERT_TRUE(RunProgram(b, Bindings(Bind(x, F, dims)), Bindings(Bind(out, DType::kI64, od))).ok());
        int64_t outer = dim == 1 ? dims[0] : dims[0] * dims[1], inner = dim == 1 ? dims[2] : 1;
        EXPECT_EQ(out, RefArg(x, outer, dims[dim], inner, is_max));
      }
    }
  }
}

TEST(ArgReduceTest, IntegersBf16AndStridedInput) {
  Builder b;
  int xi = b.Param(T(DType::kI64, {3, 4}));
  int xb = b.Param(T(DType::kBF16, {2, 3}));
  b.Result(b.ArgReduce(xi, 0, ReduceKind::kMax));
  b.Result(b.ArgReduce(xb, 1, ReduceKind::kMin));
  // xi is the transpose of a row-major [4, 3] array.
  std::vector<int64_t> m = {int64_t{1} << 40, 5, 5,  -3, -3, 0,  7, 8, 8,  1, 2, 3};
  std::vector<uint16_t> bv = {ToBf16(2), ToBf16(-1), ToBf16(-1), ToBf16(0.5f), ToBf16(0.25f), ToBf16(0.125f)};
  std::vector<int64_t> o1(4), o2(2);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(m, DType::kI64, {3, 4}, {1, 3}), Bind(bv, DType::kBF16, {2, 3})),
                         Bindings(Bind(o1, DType::kI64, {4}), Bind(o2, DType::kI64, {2})))
                  .ok());
  // column j of xi is row j of m: argmax of {2^40, 5, 5}, {-3, -3, 0}, {7, 8, 8}, {1, 2, 3}
  EXPECT_EQ(o1, (std::vector<int64_t>{0, 2, 1, 2}));
  EXPECT_EQ(o2, (std::vector<int64_t>{1, 2}));
}

}  // namespace
}  // namespace tpu::host::testing
