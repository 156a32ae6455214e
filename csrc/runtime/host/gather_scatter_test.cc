// gather / scatter through the host executor.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/host/host_test_util.h"

namespace tpu::host::testing {
namespace {

const DType F = DType::kF32;

TEST(GatherTest, EmbeddingRows) {
  const int64_t V = 10, D = 4;
  std::vector<float> table(V * D);
  for (int64_t i = 0; i < V * D; ++i) table[i] = static_cast<float>(i);
  std::vector<int64_t> ids = {3, 0, 9, 3, 7, 1};
  std::vector<int32_t> ids32 = {2, 2, 5, 0, 9, 8};
  Builder b;
  int t = b.Param(T(F, {V, D}));
  int i64 = b.Param(T(DType::kI64, {6, 1}));
  int i32 = b.Param(T(DType::kI32, {2, 3, 1}));
  b.Result(b.Gather(t, i64, {1}, {0}, {0}, {1, D}));
  b.Result(b.Gather(t, i32, {2}, {0}, {0}, {1, D}));
  std::vector<float> o1(6 * D), o2(6 * D);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(table, F, {V, D}), Bind(ids, DType::kI64, {6, 1}),
                                     Bind(ids32, DType::kI32, {2, 3, 1})),
                         Bindings(Bind(o1, F, {6, D}), Bind(o2, F, {2, 3, D})))
                  .ok());
  for (int r = 0; r < 6; ++r)
    for (int d = 0; d < D; ++d) {
      EXPECT_EQ(o1[r * D + d], table[ids[r] * D + d]) << r << "," << d;
      EXPECT_EQ(o2[r * D + d], table[ids32[r] * D + d]) << r << "," << d;
    }
}

TEST(GatherTest, EmbeddingFromTransposedTable) {
  // The table arrives as a transposed view: rows are strided in memory.
  const int64_t V = 5, D = 3;
  std::vector<float> mem(V * D);  // row-major [D, V]
  for (int64_t i = 0; i < V * D; ++i) mem[i] = static_cast<float>(i * 10);
  std::vector<int64_t> ids = {4, 0, 2};
  Builder b;
  int t = b.Param(T(F, {V, D}));
  int i = b.Param(T(DType::kI64, {3, 1}));
  b.Result(b.Gather(t, i, {1}, {0}, {0}, {1, D}));
  std::vector<float> out(9);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(mem, F, {V, D}, {1, V}), Bind(ids, DType::kI64, {3, 1})),
                         Bindings(Bind(out, F, {3, D})))
                  .ok());
  for (int r = 0; r < 3; ++r)
    for (int d = 0; d < D; ++d) EXPECT_EQ(out[r * D + d], mem[d * V + ids[r]]);
}

TEST(GatherTest, GeneralWindows) {
  // operand [3, 4, 5]; each index vector gives (dim 0, dim 2) starts; window 1x2x3 with dim 0
  // collapsed -> result [2, 2, 3]: r[b][w1][w2] = op[i0][w1][i2 + w2].
  std::vector<float> op(60);
  for (int k = 0; k < 60; ++k) op[k] = static_cast<float>(k);
  std::vector<int64_t> idx = {2, 1, 0, 2};
  Builder b;
  int o = b.Param(T(F, {3, 4, 5}));
  int i = b.Param(T(DType::kI64, {2, 2}));
  int g = b.Gather(o, i, {1, 2}, {0}, {0, 2}, {1, 2, 3});
  ASSERT_EQ(b.TypeOf(g).dims, (Dims{2, 2, 3}));
  b.Result(g);
  std::vector<float> out(12);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(op, F, {3, 4, 5}), Bind(idx, DType::kI64, {2, 2})),
                         Bindings(Bind(out, F, {2, 2, 3})))
                  .ok());
  for (int bb = 0; bb < 2; ++bb)
    for (int w1 = 0; w1 < 2; ++w1)
      for (int w2 = 0; w2 < 3; ++w2)
        EXPECT_EQ(out[(bb * 2 + w1) * 3 + w2], op[idx[bb * 2] * 20 + w1 * 5 + idx[bb * 2 + 1] + w2])
            << bb << "," << w1 << "," << w2;
}

TEST(GatherTest, OffsetDimBeforeBatchDim) {
  // index_select along dim 1: r[i][b] = t[i][ids[b]].
  std::vector<float> t(20);
  for (int k = 0; k < 20; ++k) t[k] = static_cast<float>(k);
  std::vector<int64_t> ids = {4, 0, 4};
  Builder b;
  int tp = b.Param(T(F, {4, 5}));
  int ip = b.Param(T(DType::kI64, {3, 1}));
  b.Result(b.Gather(tp, ip, {0}, {1}, {1}, {4, 1}));
  std::vector<float> out(12);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(t, F, {4, 5}), Bind(ids, DType::kI64, {3, 1})),
                         Bindings(Bind(out, F, {4, 3})))
                  .ok());
  for (int i = 0; i < 4; ++i)
    for (int bb = 0; bb < 3; ++bb) EXPECT_EQ(out[i * 3 + bb], t[i * 5 + ids[bb]]);
}

TEST(GatherTest, CheckedIndexOutOfRangeIsAnError) {
  for (int64_t bad : {int64_t{10}, int64_t{-1}, int64_t{1} << 40}) {
    Builder b;
    int t = b.Param(T(F, {10, 2}));
    int i = b.Param(T(DType::kI64, {3, 1}));
    b.Result(b.Gather(t, i, {1}, {0}, {0}, {1, 2}));
    std::vector<float> table(20), out(6);
    std::vector<int64_t> ids = {1, bad, 2};
    Status s = RunProgram(b, Bindings(Bind(table, F, {10, 2}), Bind(ids, DType::kI64, {3, 1})),
                          Bindings(Bind(out, F, {3, 2})));
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.code(), Code::kOutOfRange);
    EXPECT_EQ(s.message(), "index " + std::to_string(bad) + " is out of bounds for dimension 0 with size 10");
  }
}

TEST(GatherTest, UncheckedIndicesClamp) {
  std::vector<float> t = {0, 1, 10, 11, 20, 21};
  std::vector<int32_t> ids = {7, -3, 1};
  Builder b;
  int tp = b.Param(T(F, {3, 2}));
  int ip = b.Param(T(DType::kI32, {3, 1}));
  b.Result(b.Gather(tp, ip, {1}, {0}, {0}, {1, 2}, /*checked=*/false));
  std::vector<float> out(6);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(t, F, {3, 2}), Bind(ids, DType::kI32, {3, 1})),
                         Bindings(Bind(out, F, {3, 2})))
                  .ok());
  EXPECT_EQ(out, (std::vector<float>{20, 21, 0, 1, 10, 11}));
}

// torch.gather's form: every dim but d a batching dim, the index read as it is. The operand is a
// transposed view (read through its strides).
TEST(GatherTest, BatchedAlongEachDim) {
  const Dims shape = {3, 4, 5};
  std::vector<float> mem(60);  // row-major [5, 4, 3]: the operand [3, 4, 5] transposed
  for (int k = 0; k < 60; ++k) mem[k] = static_cast<float>(k);
  const Dims strides = {1, 3, 12};
  for (int64_t d = 0; d < 3; ++d) {
    const Dims rdims = {3, 4, 5};  // result = index shape without its vector dim
    std::vector<int64_t> idx(60);
    for (int k = 0; k < 60; ++k) idx[k] = (k * 7 + 3) % shape[d];
    Dims batch;
    for (int64_t k = 0; k < 3; ++k)
      if (k != d) batch.push_back(k);
    Builder b;
    int o = b.Param(T(F, shape));
    int i = b.Param(T(DType::kI64, {3, 4, 5, 1}));
    int g = b.Gather(o, i, {}, {d}, {d}, {1, 1, 1}, true, batch, batch);
    ASSERT_EQ(b.TypeOf(g).dims, rdims);
    b.Result(g);
    std::vector<float> out(60);
    ASSERT_TRUE(RunProgram(b, Bindings(Bind(mem, F, shape, strides), Bind(idx, DType::kI64, {3, 4, 5, 1})),
                           Bindings(Bind(out, F, rdims)))
                    .ok());
    for (int64_t p0 = 0; p0 < 3; ++p0)
      for (int64_t p1 = 0; p1 < 4; ++p1)
        for (int64_t p2 = 0; p2 < 5; ++p2) {
          int64_t at = (p0 * 4 + p1) * 5 + p2;
          int64_t c[3] = {p0, p1, p2};
          c[d] = idx[at];
          EXPECT_EQ(out[at], mem[c[0] * 1 + c[1] * 3 + c[2] * 12]) << d << ": " << p0 << "," << p1 << "," << p2;
        }
  }
}

TEST(GatherTest, BatchedOutOfRangeNamesTheFirstBadIndex) {
  Builder b;
  int o = b.Param(T(F, {2, 3}));
  int i = b.Param(T(DType::kI64, {2, 2, 1}));
  b.Result(b.Gather(o, i, {}, {1}, {1}, {1, 1}, true, {0}, {0}));
  std::vector<float> op(6), out(4);
  std::vector<int64_t> idx = {0, 2, 3, -1};  // 3 comes first in result order
  Status s = RunProgram(b, Bindings(Bind(op, F, {2, 3}), Bind(idx, DType::kI64, {2, 2, 1})), Bindings(Bind(out, F, {2, 2})));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "index 3 is out of bounds for dimension 1 with size 3");
}

// torch.scatter_add's form along dim 0 of [4, 3]: updates of one destination combine in index
// order, each column only into its own column.
TEST(ScatterTest, BatchedAddAlongDim) {
  auto run = [](std::vector<float>& operand, std::vector<int64_t>& idx, std::vector<float>& updates,
                std::vector<float>& out) {
    Builder b;
    int o = b.Param(T(F, {4, 3}));
    int i = b.Param(T(DType::kI64, {5, 3, 1}));
    int u = b.Param(T(F, {5, 3}));
    b.Result(b.Scatter(o, i, u, {}, {0}, {0}, ReduceKind::kAdd, true, {1}, {1}));
    return RunProgram(b, Bindings(Bind(operand, F, {4, 3}), Bind(idx, DType::kI64, {5, 3, 1}), Bind(updates, F, {5, 3})),
                      Bindings(Bind(out, F, {4, 3})));
  };
  std::vector<float> operand(12, 1.0f), updates(15), out(12);
  for (int k = 0; k < 15; ++k) updates[k] = static_cast<float>(k + 1);
  std::vector<int64_t> idx = {0, 3, 3, 0, 3, 1, 2, 2, 1, 0, 0, 0, 3, 1, 2};
  ASSERT_TRUE(run(operand, idx, updates, out).ok());
  std::vector<float> want(12, 1.0f);
  for (int j = 0; j < 5; ++j)
    for (int c = 0; c < 3; ++c) want[idx[j * 3 + c] * 3 + c] += updates[j * 3 + c];
  EXPECT_EQ(out, want);
  idx[7] = 4;
  Status s = run(operand, idx, updates, out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "index 4 is out of bounds for dimension 0 with size 4");
}

TEST(ScatterTest, AddWithRepeatedIndices) {
  Builder b;
  int o = b.Param(T(F, {5}));
  int i = b.Param(T(DType::kI64, {4, 1}));
  int u = b.Param(T(F, {4}));
  b.Result(b.Scatter(o, i, u, {}, {0}, {0}, ReduceKind::kAdd));
  std::vector<float> operand = {1, 2, 3, 4, 5}, updates = {10, 20, 30, 40}, out(5);
  std::vector<int64_t> idx = {1, 3, 1, 1};
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(operand, F, {5}), Bind(idx, DType::kI64, {4, 1}), Bind(updates, F, {4})),
                         Bindings(Bind(out, F, {5})))
                  .ok());
  EXPECT_EQ(out, (std::vector<float>{1, 82, 3, 24, 5}));
  EXPECT_EQ(operand, (std::vector<float>{1, 2, 3, 4, 5}));  // the operand is not modified
}

TEST(ScatterTest, RowsAddIntegersAndStridedUpdates) {
  // index_add_ of rows: out[idx[k]] += upd[k], updates given as a transposed view.
  Builder b;
  int o = b.Param(T(DType::kI32, {4, 3}));
  int i = b.Param(T(DType::kI32, {3, 1}));
  int u = b.Param(T(DType::kI32, {3, 3}));
  b.Result(b.Scatter(o, i, u, {1}, {0}, {0}, ReduceKind::kAdd));
  std::vector<int32_t> operand(12, 1), idx = {2, 0, 2}, umem = {1, 2, 3, 4, 5, 6, 7, 8, 9}, out(12);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(operand, DType::kI32, {4, 3}), Bind(idx, DType::kI32, {3, 1}),
                                     Bind(umem, DType::kI32, {3, 3}, {1, 3})),
                         Bindings(Bind(out, DType::kI32, {4, 3})))
                  .ok());
  // upd[k][j] = umem[j * 3 + k]: rows {1,4,7}, {2,5,8}, {3,6,9}
  EXPECT_EQ(out, (std::vector<int32_t>{3, 6, 9, 1, 1, 1, 1 + 1 + 3, 1 + 4 + 6, 1 + 7 + 9, 1, 1, 1}));
}

TEST(ScatterTest, ReplaceMaxAndBounds) {
  Builder b;
  int o = b.Param(T(F, {4}));
  int i = b.Param(T(DType::kI64, {3, 1}));
  int u = b.Param(T(F, {3}));
  b.Result(b.Scatter(o, i, u, {}, {0}, {0}, ReduceKind::kReplace, /*checked=*/false));
  b.Result(b.Scatter(o, i, u, {}, {0}, {0}, ReduceKind::kMax, /*checked=*/false));
  std::vector<float> operand = {5, 5, 5, 5}, updates = {1, 9, 7}, rep(4), mx(4);
  std::vector<int64_t> idx = {0, 4, 2};  // 4 is out of range: skipped when unchecked
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(operand, F, {4}), Bind(idx, DType::kI64, {3, 1}), Bind(updates, F, {3})),
                         Bindings(Bind(rep, F, {4}), Bind(mx, F, {4})))
                  .ok());
  EXPECT_EQ(rep, (std::vector<float>{1, 5, 7, 5}));
  EXPECT_EQ(mx, (std::vector<float>{5, 5, 7, 5}));

  Builder c;
  int o2 = c.Param(T(F, {4}));
  int i2 = c.Param(T(DType::kI64, {3, 1}));
  int u2 = c.Param(T(F, {3}));
  c.Result(c.Scatter(o2, i2, u2, {}, {0}, {0}, ReduceKind::kAdd));  // checked
  std::vector<float> out(4);
  Status s = RunProgram(c, Bindings(Bind(operand, F, {4}), Bind(idx, DType::kI64, {3, 1}), Bind(updates, F, {3})),
                        Bindings(Bind(out, F, {4})));
  EXPECT_EQ(s.code(), Code::kOutOfRange);
  EXPECT_EQ(s.message(), "index 4 is out of bounds for dimension 0 with size 4");
}

// The general scatter against the element-by-element definition, in the updates' row-major order
// (float additions in that order, so the bits match): a DLRM interaction's backward (pairs of
// (row, column) indices, the batch as a leading window dim, repeated pairs), and windows that run
// past the operand's end when unchecked (those elements are skipped, the others applied).
TEST(ScatterTest, GeneralFormMatchesTheDefinition) {
  struct Case {
    Dims operand, indices, updates, window, inserted, to_operand;
    bool checked;
  };
  for (const Case& c : {Case{{6, 5, 5}, {7, 2}, {6, 7}, {0}, {1, 2}, {1, 2}, true},
                        Case{{4, 6}, {3, 1}, {3, 4, 3}, {1, 2}, {}, {1}, false},
                        Case{{3, 4, 5}, {2, 3, 2}, {2, 3, 4}, {2}, {0, 2}, {0, 2}, true}}) {
    SCOPED_TRACE(DimsToString(c.operand) + " " + DimsToString(c.updates));
    auto count = [](const Dims& d) { int64_t n = 1; for (int64_t v : d) n *= v; return n; };
    const int64_t no = count(c.operand), nu = count(c.updates), ni = count(c.indices);
    std::vector<float> operand(no), updates(nu), out(no);
    for (int64_t i = 0; i < no; ++i) operand[i] = static_cast<float>(i % 7) * 0.37f;
    for (int64_t i = 0; i < nu; ++i) updates[i] = static_cast<float>((i * 13) % 11) * 1e3f + 0.1f * static_cast<float>(i);
    const int64_t nvec = c.indices.back();
    std::vector<int64_t> idx(ni);
    for (int64_t i = 0; i < ni; ++i) {
      const int64_t d = c.to_operand[i % nvec];
      idx[i] = c.checked ? (i * 5 / 3) % c.operand[d] : (i * 2) % c.operand[d];  // repeats; starts near the end
    }
    Builder b;
    int o = b.Param(T(F, c.operand));
    int ix = b.Param(T(DType::kI64, c.indices));
    int u = b.Param(T(F, c.updates));
    b.Result(b.Scatter(o, ix, u, c.window, c.inserted, c.to_operand, ReduceKind::kAdd, c.checked));
    ASSERT_TRUE(RunProgram(b, Bindings(Bind(operand, F, c.operand), Bind(idx, DType::kI64, c.indices), Bind(updates, F, c.updates)),
                           Bindings(Bind(out, F, c.operand)))
                    .ok());
    // The definition, element by element.
    std::vector<float> want = operand;
    Dims window_operand;
    for (int64_t d = 0; d < static_cast<int64_t>(c.operand.size()); ++d)
      if (std::find(c.inserted.begin(), c.inserted.end(), d) == c.inserted.end()) window_operand.push_back(d);
    const Dims us = ContiguousStrides(c.updates), os = ContiguousStrides(c.operand);
    for (int64_t e = 0; e < nu; ++e) {
      Dims full(c.operand.size(), 0);
      int64_t bpos = 0;
      size_t wi = 0;
      for (size_t d = 0; d < c.updates.size(); ++d) {
        const int64_t i = e / us[d] % c.updates[d];
        if (std::find(c.window.begin(), c.window.end(), static_cast<int64_t>(d)) != c.window.end()) full[window_operand[wi++]] += i;
        else bpos = bpos * c.updates[d] + i;
      }
      for (int64_t k = 0; k < nvec; ++k) full[c.to_operand[k]] += idx[bpos * nvec + k];
      bool in = true;
      int64_t off = 0;
      for (size_t d = 0; d < full.size(); ++d) {
        in &= full[d] < c.operand[d];
        off += full[d] * os[d];
      }
      if (in) want[off] += updates[e];
    }
    for (int64_t i = 0; i < no; ++i) ASSERT_EQ(out[i], want[i]) << i;
  }
}

TEST(ScatterTest, Bf16CombinerIsUnimplemented) {
  Builder b;
  int o = b.Param(T(DType::kBF16, {4}));
  int i = b.Param(T(DType::kI64, {1, 1}));
  int u = b.Param(T(DType::kBF16, {1}));
  b.Result(b.Scatter(o, i, u, {}, {0}, {0}, ReduceKind::kAdd));
  std::vector<uint16_t> operand(4, 0x3f80), updates(1), out(4, 0x7777);
  std::vector<int64_t> idx = {1};
  Status s = RunProgram(b, Bindings(Bind(operand, DType::kBF16, {4}), Bind(idx, DType::kI64, {1, 1}),
                                    Bind(updates, DType::kBF16, {1})),
                        Bindings(Bind(out, DType::kBF16, {4})));
  EXPECT_EQ(s.code(), Code::kUnimplemented);
  EXPECT_NE(s.message().find("bf16"), std::string::npos) << s.message();
  EXPECT_EQ(out, std::vector<uint16_t>(4, 0x7777));  // refused before writing anything
}

// index_select / index_add along a middle dim (the fast paths of both kernels) against loops:
// x [2, 4, 3] gathered at dim 1 by [5, 1] indices, then scatter-added back with repeats.
TEST(GatherScatterTest, AlongOneMiddleDim) {
  const int64_t A = 2, N = 4, C = 3, M = 5;
  std::vector<float> x(A * N * C);
  for (size_t i = 0; i < x.size(); ++i) x[i] = SmallValue(static_cast<int64_t>(i), 1);
  std::vector<int64_t> ids = {3, 0, 3, 1, 2};
  Builder b;
  int xp = b.Param(T(F, {A, N, C}));
  int ip = b.Param(T(DType::kI64, {M, 1}));
  int g = b.Gather(xp, ip, {0, 2}, {1}, {1}, {A, 1, C});
  b.Result(g);
  int zeros = b.BroadcastInDim(b.Constant(0, F), {A, N, C}, {});
  b.Result(b.Scatter(zeros, ip, g, {0, 2}, {1}, {1}, ReduceKind::kAdd));
  std::vector<float> got(A * M * C), back(A * N * C);
  ExecutablePtr exe = CompileBuilder(b);
  ASSERT_TRUE(RunExe(exe, Bindings(Bind(x, F, {A, N, C}), Bind(ids, DType::kI64, {M, 1})),
                     Bindings(Bind(got, F, {A, M, C}), Bind(back, F, {A, N, C})))
                  .ok());
  std::vector<float> want_back(A * N * C, 0.0f);
  for (int64_t a = 0; a < A; ++a)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t c = 0; c < C; ++c) {
        float v = x[(a * N + ids[m]) * C + c];
        EXPECT_EQ(got[(a * M + m) * C + c], v);
        want_back[(a * N + ids[m]) * C + c] += v;
      }
  EXPECT_EQ(back, want_back);
  // Out of range: an error when checked (the default).
  ids[2] = 4;
  Status s = RunExe(exe, Bindings(Bind(x, F, {A, N, C}), Bind(ids, DType::kI64, {M, 1})),
                    Bindings(Bind(got, F, {A, M, C}), Bind(back, F, {A, N, C})));
  EXPECT_EQ(s.code(), Code::kOutOfRange) << s.ToString();
}

// Threaded sizes of the same paths, plus the general one: torch.gather along dim 1 (full index
// vectors, no window dims) and a window gather, against loops; the first bad index in order is
// the one reported even when the offsets are computed in parallel.
TEST(GatherScatterTest, LargeThreadedPathsMatchLoops) {
  const int64_t A = 3, N = 500, C = 70, M = 900;
  std::vector<float> x(A * N * C);
  for (size_t i = 0; i < x.size(); ++i) x[i] = SmallValue(static_cast<int64_t>(i), 2);
  std::vector<int64_t> ids(M);
  for (int64_t m = 0; m < M; ++m) ids[m] = (m * 37) % N;  // repeats
  Builder b;
  int xp = b.Param(T(F, {A, N, C}));
  int ip = b.Param(T(DType::kI64, {M, 1}));
  int g = b.Gather(xp, ip, {0, 2}, {1}, {1}, {A, 1, C});
  b.Result(g);
  b.Result(b.Scatter(b.BroadcastInDim(b.Constant(0, F), {A, N, C}, {}), ip, g, {0, 2}, {1}, {1}, ReduceKind::kAdd));
  std::vector<float> got(A * M * C), back(A * N * C);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(x, F, {A, N, C}), Bind(ids, DType::kI64, {M, 1})),
                         Bindings(Bind(got, F, {A, M, C}), Bind(back, F, {A, N, C})))
                  .ok());
  std::vector<float> want_back(A * N * C, 0.0f);
  for (int64_t a = 0; a < A; ++a)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t c = 0; c < C; ++c) {
        float v = x[(a * N + ids[m]) * C + c];
        ASSERT_EQ(got[(a * M + m) * C + c], v);
        want_back[(a * N + ids[m]) * C + c] += v;
      }
  ASSERT_EQ(back, want_back);

  // torch.gather(src, 1, idx): src [R, V], idx [R, D] -> full index vectors (row, idx) [R, D, 2]
  const int64_t R = 300, V = 200, D = 250;
  std::vector<float> src(R * V);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i);
  std::vector<int64_t> full(R * D * 2);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t d = 0; d < D; ++d) full[(r * D + d) * 2] = r, full[(r * D + d) * 2 + 1] = (r * 7 + d * 13) % V;
  Builder c;
  int sp = c.Param(T(F, {R, V}));
  int fp = c.Param(T(DType::kI64, {R, D, 2}));
  c.Result(c.Gather(sp, fp, {}, {0, 1}, {0, 1}, {1, 1}));
  // a window gather: whole rows picked by index (offset dim last)
  int wp = c.Param(T(DType::kI64, {R, 1}));
  c.Result(c.Gather(sp, wp, {1}, {0}, {0}, {1, V}));
  std::vector<int64_t> wrow(R);
  for (int64_t r = 0; r < R; ++r) wrow[r] = (r * 11) % R;
  std::vector<float> out(R * D), wout(R * V);
  ExecutablePtr exe = CompileBuilder(c);
  ASSERT_TRUE(RunExe(exe, Bindings(Bind(src, F, {R, V}), Bind(full, DType::kI64, {R, D, 2}), Bind(wrow, DType::kI64, {R, 1})),
                     Bindings(Bind(out, F, {R, D}), Bind(wout, F, {R, V})))
                  .ok());
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t d = 0; d < D; ++d) ASSERT_EQ(out[r * D + d], src[r * V + full[(r * D + d) * 2 + 1]]) << r << "," << d;
    for (int64_t v = 0; v < V; ++v) ASSERT_EQ(wout[r * V + v], src[wrow[r] * V + v]);
  }
  full[(250 * D + 3) * 2 + 1] = V + 5;  // two bad indices: the first in order is reported
  full[(10 * D + 1) * 2 + 1] = -7;
  Status st = RunExe(exe, Bindings(Bind(src, F, {R, V}), Bind(full, DType::kI64, {R, D, 2}), Bind(wrow, DType::kI64, {R, 1})),
                     Bindings(Bind(out, F, {R, D}), Bind(wout, F, {R, V})));
  EXPECT_EQ(st.message(), "index -7 is out of bounds for dimension 1 with size 200") << st.ToString();
}

}  // namespace
}  // namespace tpu::host::testing
