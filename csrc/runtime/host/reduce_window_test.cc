// reduce_window and arg_reduce_window through the host executor against plain loops: pooling
// windows with strides, padding and dilation, base dilation (the adjoint of a strided window),
// the init value taking part for padding, and the arg-max tie/NaN rules.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/host/host_test_util.h"

namespace tpu::host::testing {
namespace {

const DType F = DType::kF32;
const DType I64 = DType::kI64;

// 2-d pooling over the last two dims of [N, H, W]: window k, stride s, padding p (low = high),
// window dilation d. Padding reads `init`.
std::vector<double> RefPool(const std::vector<float>& x, int64_t n, int64_t h, int64_t w, int64_t k,
                            int64_t s, int64_t p, int64_t d, bool max, double init, int64_t* oh,
                            int64_t* ow) {
  *oh = (h + 2 * p - d * (k - 1) - 1) / s + 1;
  *ow = (w + 2 * p - d * (k - 1) - 1) / s + 1;
  std::vector<double> out;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < *oh; ++i)
      for (int64_t j = 0; j < *ow; ++j) {
        double acc = init;
        for (int64_t a = 0; a < k; ++a)
          for (int64_t c = 0; c < k; ++c) {
            int64_t y = i * s + a * d - p, z = j * s + c * d - p;
            double v = (y >= 0 && y < h && z >= 0 && z < w) ? x[(b * h + y) * w + z] : init;
            acc = max ? std::max(acc, v) : acc + v;
          }
        out.push_back(acc);
      }
  return out;
}

WindowSpec Pool2d(int64_t k, int64_t s, int64_t p, int64_t d) {
  WindowSpec w = WindowSpec::Of({1, k, k});
  w.strides = {1, s, s};
  w.padding_low = w.padding_high = {0, p, p};
  w.window_dilations = {1, d, d};
  return w;
}

struct PoolCase {
  int64_t k, s, p, d;
};

class PoolTest : public ::testing::TestWithParam<PoolCase> {};

TEST_P(PoolTest, MaxAndSumMatchLoops) {
  const PoolCase& c = GetParam();
  const int64_t N = 3, H = 7, W = 6;
  std::vector<float> x(N * H * W);
  for (size_t i = 0; i < x.size(); ++i) x[i] = SmallValue(i, 5);
  for (bool max : {true, false}) {
    SCOPED_TRACE(max ? "max" : "add");
    // A nonzero init for add: padding and the fold itself both take it, as StableHLO says.
    double init = max ? -INFINITY : 0.5;
    int64_t oh, ow;
    auto want = RefPool(x, N, H, W, c.k, c.s, c.p, c.d, max, init, &oh, &ow);
    Builder b;
    int xp = b.Param(T(F, {N, H, W}));
    b.Result(b.ReduceWindow(xp, b.Constant(init, F), Pool2d(c.k, c.s, c.p, c.d),
                            max ? ReduceKind::kMax : ReduceKind::kAdd));
    std::vector<float> out(N * oh * ow);
    ASSERT_TRUE(
        RunProgram(b, Bindings(Bind(x, F, {N, H, W})), Bindings(Bind(out, F, {N, oh, ow}))).ok());
    for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], static_cast<float>(want[i])) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, PoolTest,
                         ::testing::Values(PoolCase{2, 2, 0, 1}, PoolCase{3, 2, 1, 1},
                                           PoolCase{3, 1, 1, 2}, PoolCase{1, 3, 0, 1},
                                           PoolCase{3, 3, 1, 1}));

// Many planes: the outputs are split over threads at points inside a plane (FoldPlanes starts
// mid-plane and crosses planes within a range), for the max and for the arg of the max.
TEST(ReduceWindowTest, ThreadedPlanesMatchLoops) {
  const int64_t N = 40, H = 30, W = 29;
  std::vector<float> x(N * H * W);
  for (size_t i = 0; i < x.size(); ++i) x[i] = SmallValue(i, 7);
  int64_t oh, ow;
  auto want = RefPool(x, N, H, W, 3, 2, 1, 1, true, -INFINITY, &oh, &ow);
  std::vector<int64_t> flat(H * W);
  for (int64_t i = 0; i < H * W; ++i) flat[i] = i;
  Builder b;
  int xp = b.Param(T(F, {N, H, W}));
  int ip = b.Param(T(I64, {H, W}));
  b.Result(b.ReduceWindow(xp, b.Constant(-INFINITY, F), Pool2d(3, 2, 1, 1), ReduceKind::kMax));
  b.Result(b.ArgReduceWindow(xp, b.BroadcastInDim(ip, {N, H, W}, {1, 2}), Pool2d(3, 2, 1, 1)));
  std::vector<float> out(N * oh * ow);
  std::vector<int64_t> arg(N * oh * ow);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(x, F, {N, H, W}), Bind(flat, I64, {H, W})),
                         Bindings(Bind(out, F, {N, oh, ow}), Bind(arg, I64, {N, oh, ow})))
                  .ok());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < oh * ow; ++i) {
      const int64_t o = n * oh * ow + i;
      ASSERT_EQ(out[o], static_cast<float>(want[o])) << o;
      ASSERT_EQ(x[n * H * W + arg[o]], out[o]) << o;  // the index of an element holding the max
    }
}

// Base dilation: a reduce_window over the stride-dilated, padded gradient is the adjoint of a
// strided sum pool (avg-pool backward): every input element receives the outputs whose windows
// cover it.
TEST(ReduceWindowTest, BaseDilationIsTheStridedWindowAdjoint) {
  const int64_t H = 7, k = 3, s = 2, p = 1;
  const int64_t oh = (H + 2 * p - k) / s + 1;
  std::vector<float> g(oh);
  for (int64_t i = 0; i < oh; ++i) g[i] = SmallValue(i, 2);
  std::vector<double> want(H, 0.0);
  for (int64_t i = 0; i < oh; ++i)
    for (int64_t a = 0; a < k; ++a) {
      int64_t y = i * s + a - p;
      if (y >= 0 && y < H) want[y] += g[i];
    }
  WindowSpec w = WindowSpec::Of({k});
  w.base_dilations = {s};
  w.padding_low = {k - 1 - p};
  w.padding_high = {H + p - 1 - (oh - 1) * s};  // the input rows after the last window get 0
  Builder b;
  int gp = b.Param(T(F, {oh}));
  b.Result(b.ReduceWindow(gp, b.Constant(0, F), w, ReduceKind::kAdd));
  std::vector<float> out(H);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(g, F, {oh})), Bindings(Bind(out, F, {H}))).ok());
  for (int64_t i = 0; i < H; ++i) EXPECT_EQ(out[i], static_cast<float>(want[i])) << i;
}

TEST(ReduceWindowTest, StridedBindingAndBfloat16) {
  // x is the transpose of a row-major [W, H] buffer; bf16 values are exact.
  const int64_t H = 4, W = 5;
  std::vector<uint16_t> mem(W * H);
  for (int64_t i = 0; i < W * H; ++i) mem[i] = ToBf16(SmallValue(i, 7));
  Builder b;
  int xp = b.Param(T(DType::kBF16, {H, W}));
  WindowSpec w = WindowSpec::Of({2, 2});
  b.Result(b.ReduceWindow(xp, b.Constant(-INFINITY, DType::kBF16), w, ReduceKind::kMax));
  std::vector<uint16_t> out((H - 1) * (W - 1));
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(mem, DType::kBF16, {H, W}, {1, H})),
                         Bindings(Bind(out, DType::kBF16, {H - 1, W - 1})))
                  .ok());
  for (int64_t i = 0; i + 1 < H; ++i)
    for (int64_t j = 0; j + 1 < W; ++j) {
      float m = -INFINITY;
      for (int64_t a = 0; a < 2; ++a)
        for (int64_t c = 0; c < 2; ++c) m = std::max(m, FromBf16(mem[(j + c) * H + i + a]));
      EXPECT_EQ(FromBf16(out[i * (W - 1) + j]), m);
    }
}

// A 3x3 window's max (min) is its first extreme element in row-major order, as the running
// comparison gives it (and PyTorch's pooling loop): among equal zeros, the first one's sign. The
// whole-box tree must keep it too; a NaN anywhere in the window is the result.
TEST(ReduceWindowTest, ThreeByThreeBoxesKeepTheFirstOfEqualExtremes) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    std::vector<float> x;
    bool max;
    float want;
    bool want_negative_zero;
  };
  const Case cases[] = {
      {{-1, -0.0f, -2, -3, 0.0f, -4, -5, -6, -7}, true, 0.0f, true},    // -0 first: -0
      {{-1, 0.0f, -2, -3, -0.0f, -4, -5, -6, -7}, true, 0.0f, false},   // +0 first: +0
      {{1, 0.0f, 2, 3, -0.0f, 4, 5, 6, 7}, false, 0.0f, false},         // min: +0 first
      {{1, -0.0f, 2, 3, 0.0f, 4, 5, 6, 7}, false, 0.0f, true},          // min: -0 first
      {{-1, -2, -3, -4, -5, -6, -7, -8, 9}, true, 9.0f, false},         // the last element
      {{1, 2, 3, nan, 5, 6, 7, 8, 9}, true, nan, false},                // a NaN wins
  };
  for (const Case& c : cases) {
    std::vector<float> x = c.x, out(1);
    Builder b;
    int xp = b.Param(T(F, {1, 3, 3}));
    const float init = c.max ? -INFINITY : INFINITY;
    b.Result(b.ReduceWindow(xp, b.Constant(init, F), Pool2d(3, 1, 0, 1), c.max ? ReduceKind::kMax : ReduceKind::kMin));
    ASSERT_TRUE(RunProgram(b, Bindings(Bind(x, F, {1, 3, 3})), Bindings(Bind(out, F, {1, 1, 1}))).ok());
    if (std::isnan(c.want)) {
      EXPECT_TRUE(std::isnan(out[0]));
      continue;
    }
    EXPECT_EQ(out[0], c.want);
    EXPECT_EQ(std::signbit(out[0]), c.want_negative_zero) << c.x[1] << " " << c.x[4];
  }
}

TEST(ArgReduceWindowTest, IndexOfFirstMaxLastNanAndPadding) {
  // One row of 6 values, windows of 3 with stride 1 and padding 1; the index operand is an iota.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = {1, 3, 3, nan, 2, nan};
  Builder b;
  int xp = b.Param(T(F, {6}));
  int idx = b.Iota(T(I64, {6}), 0);
  WindowSpec w = WindowSpec::Of({3});
  w.padding_low = w.padding_high = {1};
  b.Result(b.ArgReduceWindow(xp, idx, w));
  std::vector<int64_t> out(6);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(x, F, {6})), Bindings(Bind(out, I64, {6}))).ok());
  // windows: [pad,1,3] [1,3,3] [3,3,nan] [3,nan,2] [nan,2,nan] [2,nan,pad]
  std::vector<int64_t> want = {1, 1, 3, 3, 5, 5};
  EXPECT_EQ(out, want);
}

TEST(ArgReduceWindowTest, AllMinusInfinityPicksFirstInBoundsIndex) {
  std::vector<float> x(4, -INFINITY);
  Builder b;
  int xp = b.Param(T(F, {4}));
  WindowSpec w = WindowSpec::Of({2});
  w.strides = {2};
  w.padding_low = w.padding_high = {1};
  b.Result(b.ArgReduceWindow(xp, b.Iota(T(I64, {4}), 0), w));
  std::vector<int64_t> out(3);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(x, F, {4})), Bindings(Bind(out, I64, {3}))).ok());
  EXPECT_EQ(out, (std::vector<int64_t>{0, 1, 3}));
}

// Pooling over the last two dims without dilation folds each window as a box of rows (Note in
// reduce_window.cc's FoldPlanes): max with NaN propagation, and the arg-max rules (first maximum,
// a NaN above all, among NaNs the last), against the element-wise definition, on data with ties,
// NaNs and -inf, padded windows, and windows of more elements than the arg fold buffers (32).
TEST(ArgReduceWindowTest, PlanarBoxesMatchTheDefinition) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    int64_t h, w, kh, kw, s, p;
  };
  for (Case c : {Case{7, 9, 3, 3, 2, 1}, Case{6, 6, 2, 2, 1, 0}, Case{3, 45, 2, 20, 3, 2}}) {
    SCOPED_TRACE(std::to_string(c.kh) + "x" + std::to_string(c.kw));
    const int64_t n = 2 * c.h * c.w;
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) {
      int64_t r = (i * 7919) % 13;
      x[i] = r == 0 ? nan : r == 1 ? -INFINITY : static_cast<float>(r % 5);  // ties, NaNs, -inf
    }
    if (c.h == 6) std::fill(x.begin(), x.begin() + c.w * 2, nan);  // windows all NaN
    WindowSpec w = WindowSpec::Of({1, c.kh, c.kw});
    w.strides = {1, c.s, c.s};
    w.padding_low = w.padding_high = {0, c.p, c.p};
    const int64_t oh = (c.h + 2 * c.p - c.kh) / c.s + 1, ow = (c.w + 2 * c.p - c.kw) / c.s + 1;
    Builder b;
    int xp = b.Param(T(F, {2, c.h, c.w}));
    b.Result(b.ReduceWindow(xp, b.Constant(-INFINITY, F), w, ReduceKind::kMax));
    b.Result(b.ArgReduceWindow(xp, b.Iota(T(I64, {2, c.h, c.w}), 2), w));
    std::vector<float> mx(2 * oh * ow);
    std::vector<int64_t> arg(2 * oh * ow);
    ASSERT_TRUE(RunProgram(b, Bindings(Bind(x, F, {2, c.h, c.w})),
                           Bindings(Bind(mx, F, {2, oh, ow}), Bind(arg, I64, {2, oh, ow})))
                    .ok());
    for (int64_t pl = 0; pl < 2; ++pl)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          float best = -INFINITY;
          int64_t bi = std::numeric_limits<int64_t>::max();
          bool any_nan = false;
          for (int64_t a = 0; a < c.kh; ++a)
            for (int64_t e = 0; e < c.kw; ++e) {
              int64_t r = i * c.s - c.p + a, q = j * c.s - c.p + e;
              if (r < 0 || r >= c.h || q < 0 || q >= c.w) continue;
              float v = x[(pl * c.h + r) * c.w + q];
              int64_t vi = q;  // the iota over the last dim
              bool vn = std::isnan(v), bn = std::isnan(best);
              any_nan |= vn;
              if (v > best || (vn && !bn) || (v == best && vi < bi) || (vn && bn && vi > bi)) best = v, bi = vi;
            }
          const int64_t o = (pl * oh + i) * ow + j;
          ASSERT_EQ(arg[o], bi) << pl << " " << i << " " << j;
          if (any_nan) ASSERT_TRUE(std::isnan(mx[o])) << pl << " " << i << " " << j;
          else ASSERT_EQ(mx[o], best) << pl << " " << i << " " << j;
        }
  }
}

TEST(ReduceWindowTest, BuilderRejectsBadWindows) {
  Builder b;
  int xp = b.Param(T(F, {4, 4}));
  WindowSpec w = WindowSpec::Of({2});  // rank 1 for a rank-2 operand
  b.ReduceWindow(xp, b.Constant(0, F), w, ReduceKind::kAdd);
  EXPECT_FALSE(b.Finish().ok());
}

}  // namespace
}  // namespace tpu::host::testing
