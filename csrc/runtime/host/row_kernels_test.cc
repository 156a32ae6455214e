// The fused row kernels against float64 references (and, for float32 rows, against the IR chain
// they replace, which they must equal exactly), on strided rows, bf16, threaded sizes.
#include "runtime/host/row_kernels.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/host/host_test_util.h"
#include "runtime/host/plan.h"

namespace tpu::host::testing {
namespace {

const DType F = DType::kF32;

View V(std::vector<float>& v, Dims dims, Dims strides = {}) {
  if (strides.empty()) strides = ContiguousStrides(dims);
  return View{v.data(), F, std::move(dims), std::move(strides)};
}

std::vector<float> Values(int64_t n, int salt, float scale = 1.0f) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.37f * static_cast<float>(i) + salt);
  return v;
}

// Element (o, j) of a [outer, n] row layout where rows are dim 1 of [a, n, c] (o = i * c + k).
struct Layout {
  int64_t a, n, c;  // rows run along the middle dim: offset = (i * n + j) * c + k
  int64_t Off(int64_t o, int64_t j) const { return (o / c * n + j) * c + o % c; }
  int64_t rows() const { return a * c; }
};

// float64 softmax / log-softmax of each row.
std::vector<double> RefSoftmax(const std::vector<float>& x, const Layout& L, bool log) {
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < L.rows(); ++o) {
    double m = -INFINITY, z = 0;
    for (int64_t j = 0; j < L.n; ++j) m = std::max(m, double{x[L.Off(o, j)]});
    for (int64_t j = 0; j < L.n; ++j) z += std::exp(x[L.Off(o, j)] - m);
    for (int64_t j = 0; j < L.n; ++j) {
      double s = x[L.Off(o, j)] - m;
      y[L.Off(o, j)] = log ? s - std::log(z) : std::exp(s) / z;
    }
  }
  return y;
}

TEST(RowKernelsTest, SoftmaxMiddleDimAndThreadedRowsMatchFloat64) {
  for (Layout L : {Layout{3, 50, 7}, Layout{600, 300, 1}}) {
    for (bool log : {false, true}) {
      SCOPED_TRACE(::testing::Message() << L.a << "x" << L.n << "x" << L.c << (log ? " log" : ""));
      std::vector<float> x = Values(L.a * L.n * L.c, 1, 4.0f), y(x.size());
      ASSERT_TRUE(SoftmaxRows(V(x, {L.a, L.n, L.c}), 1, log, V(y, {L.a, L.n, L.c})).ok());
      std::vector<double> want = RefSoftmax(x, L, log);
      for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], want[i], 2e-6 * (log ? 4 : 1)) << i;
      // backward: softmax: y * (g - sum(g * y)); log: g - exp(y) * sum(g)
      std::vector<float> g = Values(x.size(), 2), dx(x.size());
      ASSERT_TRUE(SoftmaxBackwardRows(V(g, {L.a, L.n, L.c}), V(y, {L.a, L.n, L.c}), 1, log, V(dx, {L.a, L.n, L.c})).ok());
      for (int64_t o = 0; o < L.rows(); ++o) {
        double s = 0;
        for (int64_t j = 0; j < L.n; ++j) s += log ? g[L.Off(o, j)] : double{g[L.Off(o, j)]} * want[L.Off(o, j)];
        for (int64_t j = 0; j < L.n; ++j) {
          int64_t e = L.Off(o, j);
          double d = log ? g[e] - std::exp(want[e]) * s : want[e] * (g[e] - s);
          ASSERT_NEAR(dx[e], d, 1e-5) << o << "," << j;
        }
      }
    }
  }
}

// Rows in place whatever their outer layout: a gap between rows (one run of outer dims, rows a
// step apart that is not the row length: the group's base-and-step path) and outer dims that do
// not merge into one run (row by row), against the same rows packed densely, for the softmax
// forward and backward, layer norm and RMS norm.
TEST(RowKernelsTest, InPlaceRowsWithGapsAndUnmergedOuterDimsEqualDenseRows) {
  const int64_t n = 24;
  struct Case {
    Dims dims, strides;
    int64_t span;  // elements the strided buffer needs
  };
  const Case cases[] = {{{40, n}, {n + 8, 1}, 40 * (n + 8)},                    // gap of 8 floats
                        {{2, 20, n}, {40 * n, n, 1}, 80 * n}};                 // [2, 20] of [2, 40]
  for (const Case& c : cases) {
    SCOPED_TRACE(c.dims.size());
    const Dims dense_dims = c.dims;
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < c.dims.size(); ++d) rows *= c.dims[d];
    std::vector<float> x(c.span, std::numeric_limits<float>::quiet_NaN()), g(c.span, 0.5f);
    std::vector<float> xd(rows * n), gd(rows * n);
    auto offset = [&](int64_t r, int64_t j) {  // element (row r, column j) of the strided view
      int64_t off = j, rem = r;
      for (int d = static_cast<int>(c.dims.size()) - 2; d >= 0; --d) {
        off += rem % c.dims[d] * c.strides[d];
        rem /= c.dims[d];
      }
      return off;
    };
    std::vector<float> vals = Values(rows * n, 7, 3.0f), gvals = Values(rows * n, 8);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < n; ++j) {
        x[offset(r, j)] = xd[r * n + j] = vals[r * n + j];
        g[offset(r, j)] = gd[r * n + j] = gvals[r * n + j];
      }
    const int last = static_cast<int>(c.dims.size()) - 1;
    auto check = [&](const std::vector<float>& strided, const std::vector<float>& dense, const char* what) {
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < n; ++j) ASSERT_EQ(strided[offset(r, j)], dense[r * n + j]) << what << " " << r << "," << j;
    };
    for (bool log : {false, true}) {
      std::vector<float> y(c.span), yd(rows * n), dx(c.span), dxd(rows * n);
      ASSERT_TRUE(SoftmaxRows(V(x, c.dims, c.strides), last, log, V(y, c.dims, c.strides)).ok());
      ASSERT_TRUE(SoftmaxRows(V(xd, dense_dims), last, log, V(yd, dense_dims)).ok());
      check(y, yd, log ? "log_softmax" : "softmax");
      ASSERT_TRUE(SoftmaxBackwardRows(V(g, c.dims, c.strides), V(y, c.dims, c.strides), last, log,
                                      V(dx, c.dims, c.strides)).ok());
      ASSERT_TRUE(SoftmaxBackwardRows(V(gd, dense_dims), V(yd, dense_dims), last, log, V(dxd, dense_dims)).ok());
      check(dx, dxd, "softmax backward");
    }
    std::vector<float> w = Values(n, 9), b = Values(n, 10);
    const View wv = V(w, {n}), bv = V(b, {n});
    std::vector<float> y(c.span), yd(rows * n);
    ASSERT_TRUE(LayerNormRows(V(x, c.dims, c.strides), last, &wv, &bv, 1e-5, V(y, c.dims, c.strides), nullptr, nullptr).ok());
    ASSERT_TRUE(LayerNormRows(V(xd, dense_dims), last, &wv, &bv, 1e-5, V(yd, dense_dims), nullptr, nullptr).ok());
    check(y, yd, "layer norm");
    ASSERT_TRUE(RmsNormRows(V(x, c.dims, c.strides), last, &wv, 1e-6, V(y, c.dims, c.strides), nullptr).ok());
    ASSERT_TRUE(RmsNormRows(V(xd, dense_dims), last, &wv, 1e-6, V(yd, dense_dims), nullptr).ok());
    check(y, yd, "rms norm");
  }
}

// Compiles and runs b, checking that its host plan has `rows` row steps (Note [Row chains]): the
// chain-equality tests below compare a planned chain with the same chain kept op by op, which
// would pass trivially if neither were matched.
Status RunWithRowSteps(Builder& b, size_t rows, std::vector<Binding> params, std::vector<Binding> results) {
  ExecutablePtr exe = CompileBuilder(b);
  if (!exe) return Internal("no executable");
  EXPECT_EQ(static_cast<const HostExecutable&>(*exe).rows.size(), rows);
  return RunExe(exe, std::move(params), std::move(results));
}

TEST(RowKernelsTest, SoftmaxEqualsTheIrChainExactly) {
  // The chain softmax.cc builds, run by the executor op by op (its shifted values are also a
  // result, so the planner keeps the chain: Note [Row chains]); the fused kernel must give the
  // same bits. And planned whole, the chain runs as the kernel (planner_test.cc checks the step).
  // Rows of 64 and 100 go in groups of 16 (Note [Row groups]; 97 rows end in a partial group),
  // rows of 1000 and 3000 one at a time (3000: more than a lane block); 100, 1000 and 3000 end
  // past their last whole group of 16.
  const int64_t R = 97;
  for (int64_t N : {1000, 64, 100, 3000}) {
    SCOPED_TRACE(N);
    std::vector<float> x = Values(R * N, 3, 10.0f), y(R * N), want(R * N), shifted(R * N), planned(R * N);
    for (bool log : {false, true}) {
      for (bool keep_chain : {true, false}) {
        Builder b;
        int p = b.Param(T(F, {R, N}));
        int m = b.Reduce(p, b.Constant(-INFINITY, F), {1}, ReduceKind::kMax);
        int s = b.Binary(OpCode::kSubtract, p, b.BroadcastInDim(m, {R, N}, {0}));
        int e = b.Unary(OpCode::kExp, s);
        int z = b.Reduce(e, b.Constant(0.0, F), {1}, ReduceKind::kAdd);
        b.Result(log ? b.Binary(OpCode::kSubtract, s, b.BroadcastInDim(b.Unary(OpCode::kLog, z), {R, N}, {0}))
                     : b.Binary(OpCode::kDivide, e, b.BroadcastInDim(z, {R, N}, {0})));
        if (keep_chain) b.Result(s);
        if (keep_chain)
          ASSERT_TRUE(RunWithRowSteps(b, 0, Bindings(Bind(x, F, {R, N})), Bindings(Bind(want, F, {R, N}), Bind(shifted, F, {R, N}))).ok());
        else
          ASSERT_TRUE(RunWithRowSteps(b, 1, Bindings(Bind(x, F, {R, N})), Bindings(Bind(planned, F, {R, N}))).ok());
      }
      ASSERT_TRUE(SoftmaxRows(V(x, {R, N}), 1, log, V(y, {R, N})).ok());
      for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], want[i]) << (log ? "log " : "") << i;
      for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(planned[i], want[i]) << (log ? "log " : "") << i;
    }
  }
}

TEST(RowKernelsTest, SafeSoftmaxChainPlannedAsARowStepEqualsTheChain) {
  // PyTorch's _safe_softmax as the lowerings emit it: the softmax chain, then
  // select(all(x == -inf, dim) broadcast back, fill, y) -- broadcast directly or through a reshape
  // keeping dim as size 1, the fill a program argument. Planned whole it is one row step carrying
  // the fill (Note [Safe softmax rows]); with the shifted values also a result the chain runs op by
  // op. Both give the same bits, NaN for NaN: rows all -inf (the fill), rows of -inf and one NaN
  // (NaN, the guard does not fire), rows starting with -inf (a causal mask's last rows), rows
  // with +inf (NaN), plain rows. Along the last dim and a middle one, rows in groups and alone.
  const float inf = std::numeric_limits<float>::infinity();
  for (const Dims& full : {Dims{3, 20, 64}, Dims{2, 7, 3000}})
  for (int dim : {1, 2})
  for (bool reshaped : {false, true})
  for (float fill : {0.0f, 2.5f}) {
    SCOPED_TRACE(::testing::Message() << DimsToString(full) << " dim " << dim << (reshaped ? " reshaped" : "") << " fill " << fill);
    const int64_t total = full[0] * full[1] * full[2];
    std::vector<float> x = Values(total, 9, 4.0f), fv{fill}, got[2], shifted(total);
    Dims kept;
    for (int d = 0; d < 3; ++d)
      if (d != dim) kept.push_back(d);
    Dims strides = ContiguousStrides(full);
    const int64_t n = full[dim];
    int64_t row = 0;
    for (int64_t a = 0; a < full[0]; ++a)
      for (int64_t c = 0; c < full[3 - dim]; ++c, ++row) {
        auto at = [&](int64_t j) -> float& {
          return dim == 1 ? x[a * strides[0] + j * strides[1] + c] : x[a * strides[0] + c * strides[1] + j];
        };
        switch (row % 6) {
          case 0: for (int64_t j = 0; j < n; ++j) at(j) = -inf; break;
          case 1: for (int64_t j = 0; j < n; ++j) at(j) = -inf; at(n / 2) = std::nanf(""); break;
          case 2: for (int64_t j = 0; j < n - 3; ++j) at(j) = -inf; break;
          case 3: at(n - 1) = inf; break;
          default: break;
        }
      }
    for (int keep_chain = 0; keep_chain < 2; ++keep_chain) {
      Builder b;
      int p = b.Param(T(F, full));
      int pf = b.Param(T(F, {}));
      int sv = -1;
      int y = SoftmaxChain(b, p, dim, false, &sv);
      int eq = b.Compare(CompareDirection::kEQ, p, b.ScalarLike(-INFINITY, p));
      int all = b.Reduce(eq, b.Constant(1.0, DType::kBool), {dim}, ReduceKind::kAnd);
      Dims one = full;
      one[dim] = 1;
      int pred = reshaped ? b.BroadcastInDim(b.Reshape(all, one), full, {0, 1, 2}) : b.BroadcastInDim(all, full, kept);
      b.Result(b.Select(pred, b.BroadcastInDim(pf, full, {}), y));
      if (keep_chain) b.Result(sv);
      got[keep_chain].resize(total);
      ExecutablePtr exe = CompileBuilder(b);
      ASSERT_NE(exe, nullptr);
      const auto& rows = static_cast<const HostExecutable&>(*exe).rows;
      ASSERT_EQ(rows.size(), keep_chain ? 0u : 1u);
      if (!keep_chain) {
        EXPECT_EQ(rows[0].fill, pf);
      }
      auto results = keep_chain ? Bindings(Bind(got[1], F, full), Bind(shifted, F, full)) : Bindings(Bind(got[0], F, full));
      Status st = RunExe(exe, Bindings(Bind(x, F, full), Bind(fv, F, {})), std::move(results));
      ASSERT_TRUE(st.ok()) << st.ToString();
    }
    int64_t fills = 0, nans = 0;
    for (int64_t i = 0; i < total; ++i) {
      fills += got[0][i] == fill && fill != 0.0f;
      nans += std::isnan(got[0][i]);
      if (std::isnan(got[1][i])) {
        ASSERT_TRUE(std::isnan(got[0][i])) << i;
      } else if (dim == 2) {
        ASSERT_EQ(got[0][i], got[1][i]) << i;
      } else {  // along a middle dim the reduce kernel sums in another order
        ASSERT_NEAR(got[0][i], got[1][i], 1e-6f) << i;
      }
    }
    if (fill != 0.0f) {
      EXPECT_GE(fills, n);  // the all -inf rows hold the fill, not NaN
    }
    EXPECT_GT(nans, 0);                     // and the NaN rows stayed NaN
  }
}

TEST(RowKernelsTest, LayerNormChainPlannedAsARowStepEqualsTheChain) {
  // norm.cc's chain with eps a program argument, weight, bias, and mean/rstd read through
  // reshapes (what native_layer_norm returns). Planned whole it is one row step (Note [Row
  // chains]); with xc and the variance also results the planner keeps the chain (xc alone a result
  // would leave the RMS norm of xc, a row step of its own); both give the same bits.
  // Rows shorter than a lane group, in groups of 16 rows and of 2 rows, and longer than a lane
  // block (summed block by block; 2 rows and 1 row at a time) (Note [Norm row groups]).
  for (const int64_t N : {int64_t{7}, int64_t{130}, int64_t{1024}, int64_t{3000}, int64_t{4100}}) {
    const int64_t A = 6, B = 11;
    std::vector<float> x = Values(A * B * N, 4, 3.0f), w = Values(N, 5), bias = Values(N, 6), eps{1e-5f};
    std::vector<float> y[2], mean[2], rstd[2], xc_out(A * B * N), var_out(A * B);
    for (int keep_chain = 0; keep_chain < 2; ++keep_chain) {
      Builder b;
      int p = b.Param(T(F, {A, B, N}));
      int pw = b.Param(T(F, {N}));
      int pb = b.Param(T(F, {N}));
      int pe = b.Param(T(F, {}));
      auto group_mean = [&](int v) {
        int sum = b.Reduce(v, b.Constant(0.0, F), {2}, ReduceKind::kAdd);
        return b.Binary(OpCode::kDivide, sum, b.ScalarLike(static_cast<double>(N), sum));
      };
      int mu = group_mean(p);
      int xc = b.Binary(OpCode::kSubtract, p, b.BroadcastInDim(mu, {A, B, N}, {0, 1}));
      int var = group_mean(b.Binary(OpCode::kMultiply, xc, xc));
      int r = b.Unary(OpCode::kRsqrt, b.Binary(OpCode::kAdd, var, b.BroadcastTo(pe, {A, B})));
      int out = b.Binary(OpCode::kMultiply, xc, b.BroadcastInDim(r, {A, B, N}, {0, 1}));
      out = b.Binary(OpCode::kMultiply, out, b.BroadcastInDim(pw, {A, B, N}, {2}));
      out = b.Binary(OpCode::kAdd, out, b.BroadcastInDim(pb, {A, B, N}, {2}));
      b.Result(out);
      b.Result(b.Reshape(mu, {A, B, 1}));
      b.Result(b.Reshape(r, {A, B, 1}));
      if (keep_chain) b.Result(xc), b.Result(var);
      y[keep_chain].resize(A * B * N);
      mean[keep_chain].resize(A * B);
      rstd[keep_chain].resize(A * B);
      auto params = Bindings(Bind(x, F, {A, B, N}), Bind(w, F, {N}), Bind(bias, F, {N}), Bind(eps, F, {}));
      Status st = keep_chain ? RunWithRowSteps(b, 0, std::move(params), Bindings(Bind(y[1], F, {A, B, N}), Bind(mean[1], F, {A, B, 1}),
                                                              Bind(rstd[1], F, {A, B, 1}), Bind(xc_out, F, {A, B, N}),
                                                              Bind(var_out, F, {A, B})))
                             : RunWithRowSteps(b, 1, std::move(params), Bindings(Bind(y[0], F, {A, B, N}), Bind(mean[0], F, {A, B, 1}),
                                                              Bind(rstd[0], F, {A, B, 1})));
      ASSERT_TRUE(st.ok()) << st.ToString();
    }
    for (size_t i = 0; i < y[0].size(); ++i) ASSERT_EQ(y[0][i], y[1][i]) << i;
    EXPECT_EQ(mean[0], mean[1]);
    EXPECT_EQ(rstd[0], rstd[1]);
    // and against float64
    for (int64_t row = 0; row < A * B; ++row) {
      double m = 0, v = 0;
      for (int64_t j = 0; j < N; ++j) m += x[row * N + j];
      m /= N;
      for (int64_t j = 0; j < N; ++j) v += (x[row * N + j] - m) * (x[row * N + j] - m);
      double rs = 1 / std::sqrt(v / N + 1e-5);
      ASSERT_NEAR(mean[0][row], m, 1e-6);
      for (int64_t j = 0; j < N; ++j)
        ASSERT_NEAR(y[0][row * N + j], (x[row * N + j] - m) * rs * w[j] + bias[j], 2e-5) << row << "," << j;
    }

  }
}

TEST(RowKernelsTest, VarianceChainPlannedAsARowStepEqualsTheChain) {
  // reduce_stats.cc LowerVar's chain: the mean, the squared deviations' sum, divided by a runtime
  // divisor (n - correction). Planned whole the sums are one row step (the divide stays outside);
  // with the squared deviations also a result the planner keeps the chain; both give the same
  // bits. The mean also a result (var_mean) or not; over the last dim and the last two; rows
  // shorter than a lane group, in groups, and longer than a lane block (Note [Norm row groups]).
  for (const int64_t N : {int64_t{7}, int64_t{130}, int64_t{1024}, int64_t{3000}, int64_t{4100}}) {
    for (const int axis : {1, 2}) {
      for (const bool with_mean : {false, true}) {
        SCOPED_TRACE(::testing::Message() << N << " axis " << axis << " mean " << with_mean);
        const int64_t A = 6, B = axis == 1 ? 3 : 11, rows = axis == 1 ? A : A * B, n = axis == 1 ? B * N : N;
        std::vector<float> x = Values(A * B * N, 4, 3.0f), div{static_cast<float>(n - 1)};
        for (size_t i = 0; i < x.size(); i += 5) x[i] += 1000.0f;  // a large mean: cancellation in x - mu
        std::vector<float> var[2], mean[2], sq_out(A * B * N);
        for (int keep_chain = 0; keep_chain < 2; ++keep_chain) {
          Builder b;
          int p = b.Param(T(F, {A, B, N}));
          int pd = b.Param(T(F, {}));
          Dims red = axis == 1 ? Dims{1, 2} : Dims{2}, kept = axis == 1 ? Dims{0} : Dims{0, 1};
          Dims out_dims = axis == 1 ? Dims{A} : Dims{A, B};
          int sum = b.Reduce(p, b.Constant(0.0, F), red, ReduceKind::kAdd);
          int mu = b.Binary(OpCode::kDivide, sum, b.ScalarLike(static_cast<double>(n), sum));
          int xc = b.Binary(OpCode::kSubtract, p, b.BroadcastInDim(mu, {A, B, N}, kept));
          int sq = b.Binary(OpCode::kMultiply, xc, xc);
          int ss = b.Reduce(sq, b.Constant(0.0, F), red, ReduceKind::kAdd);
          b.Result(b.Binary(OpCode::kDivide, ss, b.BroadcastTo(pd, out_dims)));
          if (with_mean) b.Result(mu);
          if (keep_chain) b.Result(sq);
          var[keep_chain].resize(rows);
          mean[keep_chain].resize(rows);
          std::vector<Binding> results = Bindings(Bind(var[keep_chain], F, out_dims));
          if (with_mean) results.push_back(Bind(mean[keep_chain], F, out_dims));
          if (keep_chain) results.push_back(Bind(sq_out, F, {A, B, N}));
          Status st = RunWithRowSteps(b, keep_chain ? 0 : 1, Bindings(Bind(x, F, {A, B, N}), Bind(div, F, {})),
                                      std::move(results));
          ASSERT_TRUE(st.ok()) << st.ToString();
        }
        for (int64_t r = 0; r < rows; ++r) ASSERT_EQ(var[0][r], var[1][r]) << r;
        if (with_mean) {
          EXPECT_EQ(mean[0], mean[1]);
        }
        for (int64_t r = 0; r < rows; ++r) {  // and against float64
          double m = 0, v = 0;
          for (int64_t j = 0; j < n; ++j) m += x[r * n + j];
          m /= n;
          for (int64_t j = 0; j < n; ++j) v += (x[r * n + j] - m) * (x[r * n + j] - m);
          ASSERT_NEAR(var[0][r], v / (n - 1), 1e-4 * v / (n - 1)) << r;
        }
      }
    }
  }
}

TEST(RowKernelsTest, RmsNormChainPlannedAsARowStepEqualsTheChain) {
  // norm.cc's _fused_rms_norm chain (eps an argument, a weight, rstd read through a reshape), and
  // the keepdim form models write by hand (weight * (x * rsqrt(mean(x^2, keepdim) + eps))); rows
  // short enough to go in groups (Note [Norm row groups]) and longer ones. Planned whole it is one
  // row step; with the squares also a result the planner keeps the chain; both give the same bits.
  for (const int64_t N : {int64_t{7}, int64_t{130}, int64_t{300}, int64_t{1024}, int64_t{3000}, int64_t{4100}})
  for (const bool keepdim : {false, true}) {
    const int64_t A = 5, B = 7;
    std::vector<float> x = Values(A * B * N, 4, 3.0f), w = Values(N, 5), eps{1e-5f};
    std::vector<float> y[2], rstd[2], sq_out(A * B * N);
    for (int keep_chain = 0; keep_chain < 2; ++keep_chain) {
      Builder b;
      int p = b.Param(T(F, {A, B, N}));
      int pw = b.Param(T(F, {N}));
      int pe = b.Param(T(F, {}));
      int sq = b.Binary(OpCode::kMultiply, p, p);
      int sum = b.Reduce(sq, b.Constant(0.0, F), {2}, ReduceKind::kAdd);
      int ms = b.Binary(OpCode::kDivide, sum, b.ScalarLike(static_cast<double>(N), sum));
      int out, r;
      if (!keepdim) {
        r = b.Unary(OpCode::kRsqrt, b.Binary(OpCode::kAdd, ms, b.BroadcastTo(pe, {A, B})));
        out = b.Binary(OpCode::kMultiply, p, b.BroadcastInDim(r, {A, B, N}, {0, 1}));
        out = b.Binary(OpCode::kMultiply, out, b.BroadcastInDim(pw, {A, B, N}, {2}));
      } else {
        r = b.Unary(OpCode::kRsqrt, b.Binary(OpCode::kAdd, b.Reshape(ms, {A, B, 1}), b.BroadcastTo(pe, {A, B, 1})));
        out = b.Binary(OpCode::kMultiply, p, b.BroadcastInDim(r, {A, B, N}, {0, 1, 2}));
        out = b.Binary(OpCode::kMultiply, b.BroadcastInDim(pw, {A, B, N}, {2}), out);
      }
      b.Result(out);
      b.Result(b.Reshape(r, {A, B, 1}));
      if (keep_chain) b.Result(sq);
      y[keep_chain].resize(A * B * N);
      rstd[keep_chain].resize(A * B);
      auto params = Bindings(Bind(x, F, {A, B, N}), Bind(w, F, {N}), Bind(eps, F, {}));
      Status st = keep_chain ? RunWithRowSteps(b, 0, std::move(params),
                                               Bindings(Bind(y[1], F, {A, B, N}), Bind(rstd[1], F, {A, B, 1}),
                                                        Bind(sq_out, F, {A, B, N})))
                             : RunWithRowSteps(b, 1, std::move(params),
                                               Bindings(Bind(y[0], F, {A, B, N}), Bind(rstd[0], F, {A, B, 1})));
      ASSERT_TRUE(st.ok()) << st.ToString();
    }
    for (size_t i = 0; i < y[0].size(); ++i) ASSERT_EQ(y[0][i], y[1][i]) << N << "," << keepdim << ": " << i;
    EXPECT_EQ(rstd[0], rstd[1]) << N << "," << keepdim;
    for (int64_t row = 0; row < A * B; ++row) {  // and against float64
      double ms = 0;
      for (int64_t j = 0; j < N; ++j) ms += static_cast<double>(x[row * N + j]) * x[row * N + j];
      const double rs = 1 / std::sqrt(ms / N + 1e-5);
      ASSERT_NEAR(rstd[0][row], rs, 1e-6 * rs) << N << ": " << row;
      for (int64_t j = 0; j < N; ++j)
        ASSERT_NEAR(y[0][row * N + j], x[row * N + j] * rs * w[j], 2e-5) << N << ": " << row << "," << j;
    }
  }
}

TEST(RowKernelsTest, SoftmaxBackwardChainsPlannedAsRowStepsEqualTheChains) {
  // softmax.cc Backward, along a middle dim and the last: planned whole (one row step) and kept op
  // by op (its sum is also a result) give the same bits. Rows of 33 (a group's rows past a whole
  // group of 16), 64 and 3000 (one at a time, more than a lane block).
  for (const Dims& full : {Dims{5, 40, 33}, Dims{3, 20, 64}, Dims{2, 3, 3000}}) {
    for (int dim : {1, 2}) {
      for (bool log : {false, true}) {
        SCOPED_TRACE(::testing::Message() << DimsToString(full) << " dim " << dim << (log ? " log" : ""));
        const int64_t total = full[0] * full[1] * full[2];
        Dims kept;
        for (int d = 0; d < 3; ++d)
          if (d != dim) kept.push_back(d);
        std::vector<float> g = Values(total, 7), y = Values(total, 8, 0.5f), dx[2];
        std::vector<float> sums(total);
        for (int keep_chain = 0; keep_chain < 2; ++keep_chain) {
          Builder b;
          int pg = b.Param(T(F, full)), py = b.Param(T(F, full));
          int sum = b.Reduce(log ? pg : b.Binary(OpCode::kMultiply, pg, py), b.Constant(0.0, F), {dim}, ReduceKind::kAdd);
          int s = b.BroadcastInDim(sum, full, kept);
          b.Result(log ? b.Binary(OpCode::kSubtract, pg, b.Binary(OpCode::kMultiply, b.Unary(OpCode::kExp, py), s))
                       : b.Binary(OpCode::kMultiply, py, b.Binary(OpCode::kSubtract, pg, s)));
          Dims sdims = full;
          sdims.erase(sdims.begin() + dim);
          if (keep_chain) b.Result(sum);
          dx[keep_chain].resize(g.size());
          auto params = Bindings(Bind(g, F, full), Bind(y, F, full));
          Status st = keep_chain ? RunWithRowSteps(b, 0, std::move(params), Bindings(Bind(dx[1], F, full), Bind(sums, F, sdims)))
                                 : RunWithRowSteps(b, 1, std::move(params), Bindings(Bind(dx[0], F, full)));
          ASSERT_TRUE(st.ok()) << st.ToString();
        }
        if (dim == 2) {
          for (size_t i = 0; i < g.size(); ++i) ASSERT_EQ(dx[0][i], dx[1][i]) << i;
        } else {  // along a middle dim the reduce kernel sums in another order
          for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(dx[0][i], dx[1][i], 1e-5) << i;
        }
      }
    }
  }
}

TEST(RowKernelsTest, SoftmaxBf16EqualsTheFloatKernelRoundedOnce) {
  // Contiguous bfloat16 rows take SoftmaxGroupBf16, which converts as it reads and writes: its
  // bits must be the float kernel's on the widened values, rounded once. Groups of 16 rows
  // (64, 100) and single rows (1000, 3000), tails past the last vector, -inf and NaN rows, and
  // y written over x.
  const int64_t R = 37;
  for (int64_t N : {64, 100, 1000, 3000}) {
    SCOPED_TRACE(N);
    std::vector<float> xf = Values(R * N, 5, 12.0f);
    xf[2 * N + 7] = -std::numeric_limits<float>::infinity();
    xf[3 * N + 1] = std::numeric_limits<float>::quiet_NaN();
    std::vector<uint16_t> xb(R * N), yb(R * N);
    for (size_t i = 0; i < xf.size(); ++i) xb[i] = ToBf16(xf[i]), xf[i] = FromBf16(xb[i]);
    for (bool log : {false, true}) {
      std::vector<float> yf(R * N);
      ASSERT_TRUE(SoftmaxRows(V(xf, {R, N}), 1, log, V(yf, {R, N})).ok());
      View xv{xb.data(), DType::kBF16, {R, N}, {N, 1}}, yv{yb.data(), DType::kBF16, {R, N}, {N, 1}};
      ASSERT_TRUE(SoftmaxRows(xv, 1, log, yv).ok());
      for (int64_t i = 0; i < R * N; ++i) ASSERT_EQ(yb[i], ToBf16(yf[i])) << (log ? "log " : "") << i;
      std::vector<uint16_t> inplace = xb;
      View iv{inplace.data(), DType::kBF16, {R, N}, {N, 1}};
      ASSERT_TRUE(SoftmaxRows(iv, 1, log, iv).ok());
      ASSERT_EQ(inplace, yb) << (log ? "log" : "");
    }
  }
}

TEST(RowKernelsTest, SoftmaxBf16RoundsOnceAndNaNPropagates) {
  const int64_t R = 4, N = 33;
  std::vector<float> xf = Values(R * N, 4, 3.0f);
  xf[N + 5] = std::numeric_limits<float>::quiet_NaN();  // row 1
  std::vector<uint16_t> xb(R * N), yb(R * N);
  for (size_t i = 0; i < xf.size(); ++i) xb[i] = ToBf16(xf[i]), xf[i] = FromBf16(xb[i]);
  View xv{xb.data(), DType::kBF16, {R, N}, {N, 1}}, yv{yb.data(), DType::kBF16, {R, N}, {N, 1}};
  ASSERT_TRUE(SoftmaxRows(xv, 1, false, yv).ok());
  std::vector<double> want = RefSoftmax(xf, Layout{R, N, 1}, false);
  for (int64_t i = 0; i < R * N; ++i) {
    if (i / N == 1) {
      EXPECT_TRUE(std::isnan(FromBf16(yb[i]))) << i;
      continue;
    }
    // one rounding to bf16 of a value within float32 error of the float64 result
    EXPECT_NEAR(FromBf16(yb[i]), want[i], std::abs(want[i]) * (1.0 / 256) + 1e-7) << i;
  }
}

TEST(RowKernelsTest, LayerNormForwardBackwardMatchFloat64) {
  const int64_t R = 300, N = 130;  // threaded
  const double eps = 1e-5;
  std::vector<float> x = Values(R * N, 5, 3.0f), w = Values(N, 6), b = Values(N, 7), g = Values(R * N, 8);
  for (float& v : x) v += 2.0f;  // a mean away from zero
  std::vector<float> y(R * N), mean(R), rstd(R), dx(R * N), dw(N), db(N);
  View wv = V(w, {N}), bv = V(b, {N}), mv = V(mean, {R, 1}), rv = V(rstd, {R, 1});
  ASSERT_TRUE(LayerNormRows(V(x, {R, N}), 1, &wv, &bv, eps, V(y, {R, N}), &mv, &rv).ok());
  View dxv = V(dx, {R, N}), dwv = V(dw, {N}), dbv = V(db, {N});
  ASSERT_TRUE(LayerNormBackwardRows(V(g, {R, N}), V(x, {R, N}), 1, mv, rv, &wv, &dxv, &dwv, &dbv).ok());
  std::vector<double> rdw(N, 0), rdb(N, 0);
  for (int64_t r = 0; r < R; ++r) {
    double mu = 0, var = 0;
    for (int64_t j = 0; j < N; ++j) mu += x[r * N + j];
    mu /= N;
    for (int64_t j = 0; j < N; ++j) var += (x[r * N + j] - mu) * (x[r * N + j] - mu);
    double rs = 1 / std::sqrt(var / N + eps), m1 = 0, m2 = 0;
    ASSERT_NEAR(mean[r], mu, 1e-5);
    ASSERT_NEAR(rstd[r], rs, 1e-5 * rs);
    std::vector<double> xh(N);
    for (int64_t j = 0; j < N; ++j) {
      xh[j] = (x[r * N + j] - mu) * rs;
      ASSERT_NEAR(y[r * N + j], xh[j] * w[j] + b[j], 1e-5) << r << "," << j;
      m1 += double{g[r * N + j]} * w[j];
      m2 += double{g[r * N + j]} * w[j] * xh[j];
      rdw[j] += g[r * N + j] * xh[j];
      rdb[j] += g[r * N + j];
    }
    m1 /= N, m2 /= N;
    for (int64_t j = 0; j < N; ++j)
      ASSERT_NEAR(dx[r * N + j], rs * (double{g[r * N + j]} * w[j] - m1 - xh[j] * m2), 1e-5) << r << "," << j;
  }
  for (int64_t j = 0; j < N; ++j) {
    ASSERT_NEAR(dw[j], rdw[j], 1e-4) << j;
    ASSERT_NEAR(db[j], rdb[j], 1e-4) << j;
  }
}

TEST(RowKernelsTest, LayerNormEqualsTheIrChainExactly) {
  const int64_t R = 64, N = 520;
  std::vector<float> x = Values(R * N, 9, 2.0f), y(R * N), want(R * N), mean(R), want_mean(R);
  Builder b;
  int p = b.Param(T(F, {R, N}));
  auto group_mean = [&](int v) {
    int s = b.Reduce(v, b.Constant(0.0, F), {1}, ReduceKind::kAdd);
    return b.Binary(OpCode::kDivide, s, b.BroadcastInDim(b.Constant(static_cast<double>(N), F), {R}, {}));
  };
  int mu = group_mean(p);
  int xc = b.Binary(OpCode::kSubtract, p, b.BroadcastInDim(mu, {R, N}, {0}));
  int var = group_mean(b.Binary(OpCode::kMultiply, xc, xc));
  int r = b.Unary(OpCode::kRsqrt, b.Binary(OpCode::kAdd, var, b.BroadcastInDim(b.Constant(1e-5, F), {R}, {})));
  b.Result(b.Binary(OpCode::kMultiply, xc, b.BroadcastInDim(r, {R, N}, {0})));
  b.Result(mu);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(x, F, {R, N})), Bindings(Bind(want, F, {R, N}), Bind(want_mean, F, {R}))).ok());
  View mv = V(mean, {R});
  ASSERT_TRUE(LayerNormRows(V(x, {R, N}), 1, nullptr, nullptr, 1e-5, V(y, {R, N}), &mv, nullptr).ok());
  for (int64_t i = 0; i < R; ++i) ASSERT_EQ(mean[i], want_mean[i]) << i;
  for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], want[i]) << i;
}

TEST(RowKernelsTest, RmsNormForwardBackwardMatchFloat64) {
  // rows over the two trailing dims of [5, 6, 40] ([5, 240] groups), x's rows padded apart in
  // memory (a slice of a wider buffer).
  const int64_t A = 5, B = 6, C = 40, N = B * C, P = N + 16;
  const double eps = 1e-6;
  std::vector<float> x = Values(A * P, 10, 2.0f), w = Values(N, 11), g = Values(A * N, 12);
  std::vector<float> y(A * N), rr(A), dx(A * N), dw(N);
  View xv = V(x, {A, B, C}, {P, C, 1});
  View wv = V(w, {B, C}), rv = V(rr, {A}), dxv = V(dx, {A, B, C}), dwv = V(dw, {B, C});
  ASSERT_TRUE(RmsNormRows(xv, 1, &wv, eps, V(y, {A, B, C}), &rv).ok());
  ASSERT_TRUE(RmsNormBackwardRows(V(g, {A, B, C}), xv, 1, rv, &wv, &dxv, &dwv).ok());
  std::vector<double> rdw(N, 0);
  for (int64_t a = 0; a < A; ++a) {
    auto xe = [&](int64_t j) { return double{x[a * P + j]}; };
    double ms = 0, m2 = 0;
    for (int64_t j = 0; j < N; ++j) ms += xe(j) * xe(j);
    double rs = 1 / std::sqrt(ms / N + eps);
    ASSERT_NEAR(rr[a], rs, 1e-5 * rs);
    for (int64_t j = 0; j < N; ++j) {
      ASSERT_NEAR(y[a * N + j], xe(j) * rs * w[j], 1e-5) << a << "," << j;
      m2 += double{g[a * N + j]} * w[j] * xe(j) * rs;
      rdw[j] += g[a * N + j] * xe(j) * rs;
    }
    m2 /= N;
    for (int64_t j = 0; j < N; ++j)
      ASSERT_NEAR(dx[a * N + j], rs * (double{g[a * N + j]} * w[j] - xe(j) * rs * m2), 1e-5) << a << "," << j;
  }
  for (int64_t j = 0; j < N; ++j) ASSERT_NEAR(dw[j], rdw[j], 1e-5) << j;
}

TEST(RowKernelsTest, CrossEntropyForwardBackwardMatchFloat64) {
  const int64_t R = 257, N = 96;  // char_gpt's vocabulary
  std::vector<float> x = Values(R * N, 13, 5.0f), loss(R), lse(R), dx(R * N);
  std::vector<int64_t> t(R);
  for (int64_t r = 0; r < R; ++r) t[r] = r % 7 == 3 ? -100 : (r * 31) % N;
  float gl = 1.0f / R;
  View tv{t.data(), DType::kI64, {R}, {1}}, lv = V(loss, {R}), sv = V(lse, {R});
  View glv{&gl, F, {R}, {0}};  // reduction='mean': one value for every row
  ASSERT_TRUE(CrossEntropyRows(V(x, {R, N}), 1, tv, -100, lv, &sv).ok());
  ASSERT_TRUE(CrossEntropyBackwardRows(V(x, {R, N}), 1, tv, -100, glv, V(dx, {R, N})).ok());
  for (int64_t r = 0; r < R; ++r) {
    double m = -INFINITY, z = 0;
    for (int64_t j = 0; j < N; ++j) m = std::max(m, double{x[r * N + j]});
    for (int64_t j = 0; j < N; ++j) z += std::exp(x[r * N + j] - m);
    double l = m + std::log(z);
    ASSERT_NEAR(lse[r], l, 1e-5);
    bool ignored = t[r] == -100;
    ASSERT_NEAR(loss[r], ignored ? 0.0 : l - x[r * N + t[r]], 1e-5) << r;
    for (int64_t j = 0; j < N; ++j) {
      double p = std::exp(x[r * N + j] - l);
      double want = ignored ? 0.0 : (p - (j == t[r] ? 1.0 : 0.0)) * gl;
      ASSERT_NEAR(dx[r * N + j], want, 1e-7) << r << "," << j;
    }
  }
  t[5] = N;  // out of range: an error naming it, nothing computed
  Status st = CrossEntropyRows(V(x, {R, N}), 1, tv, -100, lv, nullptr);
  EXPECT_EQ(st.code(), Code::kOutOfRange);
  EXPECT_NE(st.message().find("Target 96 is out of bounds"), std::string::npos) << st.ToString();
}

TEST(RowKernelsTest, UnsupportedCasesAreExplicit) {
  std::vector<double> x(12), y(12);
  View xv{x.data(), DType::kF64, {3, 4}, {4, 1}}, yv{y.data(), DType::kF64, {3, 4}, {4, 1}};
  EXPECT_EQ(SoftmaxRows(xv, 1, false, yv).code(), Code::kUnimplemented);
}

// Note [Unmerged rows]: normalized dims [1, 3) of a [2, 3, 4] view whose rows are not one run
// (dims 1, 2 swapped in memory), read and written as they are: the same as on a contiguous copy.
TEST(RowKernelsTest, NormRowsThatAreNotOneRunReadAsTheyAre) {
  std::vector<float> a = Values(24, 3), w = Values(12, 4), bias = Values(12, 5);
  std::vector<float> dense(24);  // a's elements in [2, 3, 4] order
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) dense[i * 12 + j * 4 + k] = a[i * 12 + j + k * 3];
  const View av = V(a, {2, 3, 4}, {12, 1, 3}), dv = V(dense, {2, 3, 4});
  const View wv = V(w, {3, 4}), bv = V(bias, {3, 4});
  for (const bool rms : {false, true}) {
    std::vector<float> got(24), want(24), got_t(24);
    const View gv = V(got, {2, 3, 4}), wantv = V(want, {2, 3, 4});
    const View gtv = V(got_t, {2, 3, 4}, {12, 1, 3});  // an output laid out like a
    if (rms) {
      ASSERT_TRUE(RmsNormRows(av, 1, &wv, 1e-6, gv, nullptr).ok());
      ASSERT_TRUE(RmsNormRows(dv, 1, &wv, 1e-6, wantv, nullptr).ok());
      ASSERT_TRUE(RmsNormRows(dv, 1, &wv, 1e-6, gtv, nullptr).ok());
    } else {
      ASSERT_TRUE(LayerNormRows(av, 1, &wv, &bv, 1e-5, gv, nullptr, nullptr).ok());
      ASSERT_TRUE(LayerNormRows(dv, 1, &wv, &bv, 1e-5, wantv, nullptr, nullptr).ok());
      ASSERT_TRUE(LayerNormRows(dv, 1, &wv, &bv, 1e-5, gtv, nullptr, nullptr).ok());
    }
    EXPECT_EQ(got, want) << rms;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        for (int k = 0; k < 4; ++k)
          EXPECT_EQ(got_t[i * 12 + j + k * 3], want[i * 12 + j * 4 + k]) << rms << " " << i << j << k;
  }
}

}  // namespace
}  // namespace tpu::host::testing
