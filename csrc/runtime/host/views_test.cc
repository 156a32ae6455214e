// Strided views at the program boundary: broadcasts (stride 0), transposed inputs and outputs,
// in-place updates, reshapes of non-contiguous inputs, and buffers from an Allocator.
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/allocator.h"
#include "runtime/host/host_allocator.h"
#include "runtime/host/host_test_util.h"

namespace tpu::host::testing {
namespace {

const DType F = DType::kF32;

TEST(ViewsTest, StrideZeroParams) {
  // a[i][j] = row[j] (stride {0, 1}); c[i][j] = col[i] (stride {1, 0}); s = scalar everywhere.
  Builder b;
  int a = b.Param(T(F, {4, 5}));
  int c = b.Param(T(F, {4, 5}));
  int s = b.Param(T(F, {4, 5}));
  b.Result(b.Binary(OpCode::kAdd, b.Binary(OpCode::kMultiply, a, c), s));
  std::vector<float> row = {1, 2, 3, 4, 5}, col = {10, 20, 30, 40}, scalar = {0.5f};
  std::vector<float> out(20);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(row, F, {4, 5}, {0, 1}), Bind(col, F, {4, 5}, {1, 0}),
                                     Bind(scalar, F, {4, 5}, {0, 0})),
                         Bindings(Bind(out, F, {4, 5})))
                  .ok());
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j) EXPECT_EQ(out[i * 5 + j], row[j] * col[i] + 0.5f) << i << "," << j;
}

TEST(ViewsTest, BroadcastInDimOps) {
  Builder b;
  int v = b.Param(T(F, {5}));
  int col = b.Param(T(F, {4, 1}));
  int bv = b.BroadcastInDim(v, {4, 5}, {1});
  int bc = b.BroadcastInDim(col, {4, 5}, {0, 1});  // size-1 dim stretched
  int bt = b.BroadcastInDim(v, {5, 4}, {0});       // v along rows of the transpose
  b.Result(b.Binary(OpCode::kSubtract, bv, bc));
  b.Result(bt);  // a view as a result: copied into the binding
  std::vector<float> vv = {1, 2, 3, 4, 5}, cv = {100, 200, 300, 400}, o1(20), o2(20);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(vv, F, {5}), Bind(cv, F, {4, 1})),
                         Bindings(Bind(o1, F, {4, 5}), Bind(o2, F, {5, 4})))
                  .ok());
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j) {
      EXPECT_EQ(o1[i * 5 + j], vv[j] - cv[i]);
      EXPECT_EQ(o2[j * 4 + i], vv[j]);
    }
}

TEST(ViewsTest, TransposedInputAndOutput) {
  // x is the transpose of a row-major [4, 3] array m; y = 2x + 1 is written transposed too.
  const int R = 3, C = 4;
  std::vector<float> m(12), ymem(12, -1), zmem(60, -7);
  for (int k = 0; k < 12; ++k) m[k] = static_cast<float>(k * k % 17) - 3;
  Builder b;
  int x = b.Param(T(F, {R, C}));
  int y = b.Binary(OpCode::kAdd, b.Binary(OpCode::kMultiply, x, b.ScalarLike(2, x)), b.ScalarLike(1, x));
  b.Result(y);
  b.Result(y);
  // Second result: offset 5, strides {10, 2} into zmem: gaps stay untouched.
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(m, F, {R, C}, {1, R})),
                         Bindings(Bind(ymem, F, {R, C}, {1, R}), Bind(zmem, F, {R, C}, {10, 2}, 5)))
                  .ok());
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) {
      float xv = m[j * R + i];
      EXPECT_EQ(ymem[j * R + i], 2 * xv + 1) << i << "," << j;
      EXPECT_EQ(zmem[5 + i * 10 + j * 2], 2 * xv + 1) << i << "," << j;
    }
  int written = 0, untouched = 0;
  for (float z : zmem) (z == -7 ? untouched : written)++;
  EXPECT_EQ(written, 12);
  EXPECT_EQ(untouched, 48);
}

TEST(ViewsTest, TransposeAndSliceOps) {
  Builder b;
  int x = b.Param(T(F, {6, 8}));
  int y = b.Param(T(F, {8, 6}));
  b.Result(b.Binary(OpCode::kAdd, b.Transpose(x, {1, 0}), y));
  b.Result(b.Unary(OpCode::kNegate, b.Slice(x, {1, 2}, {5, 8}, {2, 3})));
  std::vector<float> xv(48), yv(48), o1(48), o2(4);
  for (int k = 0; k < 48; ++k) {
    xv[k] = static_cast<float>(k);
    yv[k] = static_cast<float>(1000 * k);
  }
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(xv, F, {6, 8}), Bind(yv, F, {8, 6})),
                         Bindings(Bind(o1, F, {8, 6}), Bind(o2, F, {2, 2})))
                  .ok());
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 6; ++j) EXPECT_EQ(o1[i * 6 + j], xv[j * 8 + i] + yv[i * 6 + j]);
  // rows 1, 3; columns 2, 5
  EXPECT_EQ(o2, (std::vector<float>{-10, -13, -26, -29}));
}

TEST(ViewsTest, InPlaceUpdateOfAllocatorBuffer) {
  HostAllocator alloc(0, int64_t{64} << 20);
  const int64_t n = 3 * 700;
  Buffer* buf = alloc.Allocate(n * 4).value();
  const int64_t reserved = HostAllocator::RoundSize(buf->nbytes());
  float* data = static_cast<float*>(buf->contents());
  for (int64_t i = 0; i < n; ++i) data[i] = SmallValue(i);
  Builder b;
  int x = b.Param(T(F, {3, 700}));
  b.Result(b.Binary(OpCode::kAdd, b.Binary(OpCode::kMultiply, x, x), x));  // x = x*x + x
  ExecutablePtr exe = CompileBuilder(b);
  {
    Launch launch{exe, Bindings(Binding(buf, 0, F, {3, 700})), Bindings(Binding(buf, 0, F, {3, 700}))};
    buf->Release();  // the bindings keep the buffer alive
    EXPECT_EQ(alloc.stats().allocated, reserved);
    HostExecutor ex;
    RunReport report;
    ASSERT_TRUE(ex.Run(launch, &report).ok());
    for (int64_t i = 0; i < n; ++i) {
      float x0 = SmallValue(i);
      ASSERT_EQ(data[i], x0 * x0 + x0) << i;
    }
  }
  EXPECT_EQ(alloc.stats().allocated, 0);  // freed with the last binding
}

TEST(ViewsTest, InPlaceWithATransposedReadOfTheSameParam) {
  // x = x + transpose(x) in place: the region reads elements the same pass overwrites.
  for (int n : {4, 64}) {
    SCOPED_TRACE(n);
    Builder b;
    int x = b.Param(T(F, {n, n}));
    b.Result(b.Binary(OpCode::kAdd, x, b.Transpose(x, {1, 0})));
    std::vector<float> mem(n * n), orig(n * n);
    for (int k = 0; k < n * n; ++k) orig[k] = mem[k] = static_cast<float>(k);
    ASSERT_TRUE(RunProgram(b, Bindings(Bind(mem, F, {n, n})), Bindings(Bind(mem, F, {n, n}))).ok());
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        ASSERT_EQ(mem[i * n + j], orig[i * n + j] + orig[j * n + i]) << i << "," << j;
  }
}

TEST(ViewsTest, InPlaceWhileAKernelStillReadsTheParam) {
  // results: x * 2 (in place), sum(x) -- the sum must see the old x.
  Builder b;
  int x = b.Param(T(F, {8}));
  int twice = b.Binary(OpCode::kMultiply, x, b.ScalarLike(2, x));
  int sum = b.Reduce(x, b.Constant(0, F), {0}, ReduceKind::kAdd);
  b.Result(twice);
  b.Result(sum);
  std::vector<float> mem = {1, 2, 3, 4, 5, 6, 7, 8}, total(1);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(mem, F, {8})), Bindings(Bind(mem, F, {8}), Bind(total, F, {}))).ok());
  EXPECT_EQ(mem, (std::vector<float>{2, 4, 6, 8, 10, 12, 14, 16}));
  EXPECT_EQ(total[0], 36);
}

TEST(ViewsTest, InPlaceWhileAnotherResultIsAViewOfTheParam) {
  // results: x + 1 (in place), transpose(x) (elsewhere) -- the transpose is of the old x.
  Builder b;
  int x = b.Param(T(F, {2, 3}));
  b.Result(b.Binary(OpCode::kAdd, x, b.ScalarLike(1, x)));
  b.Result(b.Transpose(x, {1, 0}));
  std::vector<float> mem = {1, 2, 3, 4, 5, 6}, t(6);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(mem, F, {2, 3})), Bindings(Bind(mem, F, {2, 3}), Bind(t, F, {3, 2}))).ok());
  EXPECT_EQ(mem, (std::vector<float>{2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(t, (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

// A buffer of n floats from `alloc`, holding SmallValue(i).
Buffer* SmallValues(HostAllocator& alloc, int64_t n) {
  Buffer* b = alloc.Allocate(n * 4).value();
  float* d = static_cast<float*>(b->contents());
  for (int64_t i = 0; i < n; ++i) d[i] = SmallValue(i);
  return b;
}

// Runs `exe` once through a fresh executor over `alloc`; returns the launch's peak device memory.
int64_t LaunchPeak(HostAllocator& alloc, ExecutablePtr exe, std::vector<Binding> params, std::vector<Binding> results) {
  Launch launch{std::move(exe), std::move(params), std::move(results)};
  HostExecutor ex(&alloc);
  RunReport report;
  alloc.ResetPeak();
  Status s = ex.Run(launch, &report);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return alloc.stats().peak_allocated;
}

// (m @ m)[i][j] of an n x n matrix, in double (exact for SmallValue entries).
double SquareAt(const float* m, int64_t n, int64_t i, int64_t j) {
  double dot = 0;
  for (int64_t k = 0; k < n; ++k) dot += static_cast<double>(m[i * n + k]) * m[k * n + j];
  return dot;
}

TEST(ViewsTest, InPlaceAfterEveryReadIsWrittenDirectly) {
  // An optimizer step's shape: a kernel reads the weight w (a matmul), then a fused region
  // updates w in place from the kernel's output. Every read of w comes before the region, so
  // the update is written straight into w's buffer (Note [Result scratch]): the launch takes no
  // scratch for it, only for the matmul's temp. Through its temp, the launch would take both.
  HostAllocator alloc(0, int64_t{64} << 20);
  const int64_t n = 64;
  Buffer* w = SmallValues(alloc, n * n);
  Buffer* out = alloc.Allocate(n * n * 4).value();
  float* wd = static_cast<float*>(w->contents());
  std::vector<float> w0(wd, wd + n * n);
  Builder b;
  int wp = b.Param(T(F, {n, n}));
  int g = b.DotGeneral(wp, wp, {}, {}, {1}, {0}, F);  // a temp
  b.Result(b.Binary(OpCode::kSubtract, wp, b.Binary(OpCode::kMultiply, g, b.ScalarLike(0.5, g))));
  b.Result(b.Unary(OpCode::kNegate, g));
  ExecutablePtr exe = CompileBuilder(b);
  const auto& plan = static_cast<const HostExecutable&>(*exe);
  ASSERT_LT(plan.temp_bytes, 2 * n * n * 4);  // the matmul's temp (and a constant's)
  ASSERT_GE(plan.scratch_bytes, plan.temp_bytes + 2 * n * n * 4);  // the results' temps past it
  const int64_t buffers = alloc.stats().allocated;
  EXPECT_EQ(LaunchPeak(alloc, exe, Bindings(Binding(w, 0, F, {n, n})),
                       Bindings(Binding(w, 0, F, {n, n}), Binding(out, 0, F, {n, n}))),
            buffers + HostAllocator::RoundSize(plan.temp_bytes));
  const float* od = static_cast<const float*>(out->contents());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const double dot = SquareAt(w0.data(), n, i, j);
      ASSERT_EQ(wd[i * n + j], w0[i * n + j] - 0.5 * dot) << i << "," << j;
      ASSERT_EQ(od[i * n + j], -dot) << i << "," << j;  // small values: exact sums
    }
  w->Release();
  out->Release();
}

TEST(ViewsTest, AReshapedResultIsWrittenStraightIntoItsBinding) {
  // Note [Reshaped results]: the result is the matmul's output reshaped (a view). The matmul
  // writes into the result's binding, viewed in its own dims: the launch takes no scratch for it
  // and copies nothing after. (Before, the temp was scratch and the result a copy of it.)
  HostAllocator alloc(0, int64_t{64} << 20);
  const int64_t n = 32;
  Buffer* x = SmallValues(alloc, n * n);
  Buffer* out = alloc.Allocate(n * n * 4).value();
  Builder b;
  int xp = b.Param(T(F, {n, n}));
  int d = b.DotGeneral(xp, xp, {}, {}, {1}, {0}, F);
  b.Result(b.Reshape(d, {n * n}));
  ExecutablePtr exe = CompileBuilder(b);
  const auto& plan = static_cast<const HostExecutable&>(*exe);
  EXPECT_EQ(plan.temp_bytes, 0);  // the matmul's temp is planned with the results
  EXPECT_EQ(ResultTemp(plan, plan.graph.results[0]), plan.graph.results[0] - 1);
  const int64_t buffers = alloc.stats().allocated;
  EXPECT_EQ(LaunchPeak(alloc, exe, Bindings(Binding(x, 0, F, {n, n})), Bindings(Binding(out, 0, F, {n * n}))),
            buffers);
  const float* xd = static_cast<const float*>(x->contents());
  const float* od = static_cast<const float*>(out->contents());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      ASSERT_EQ(od[i * n + j], SquareAt(xd, n, i, j)) << i << "," << j;  // small values: exact sums
  x->Release();
  out->Release();
}

TEST(ViewsTest, CopiedViewsTakeScratchUntilTheirLastRead) {
  // Note [Copied views]: flattening a transposed array copies it. Each copy is device memory
  // while it is held, and goes back after its last reader: the second copy (of a value computed
  // from the first) reuses the first's memory, so the launch's peak holds one copy, not two.
  HostAllocator alloc(0, int64_t{64} << 20);
  const int64_t n = 64, bytes = n * n * 4;
  Buffer* x = SmallValues(alloc, n * n);
  Buffer* out = alloc.Allocate(bytes).value();
  const float* xd = static_cast<const float*>(x->contents());
  Builder b;
  int xp = b.Param(T(F, {n, n}));
  int neg = b.Unary(OpCode::kNegate, b.Reshape(xp, {n * n}));  // copy 1, read here
  int t = b.Transpose(b.Reshape(neg, {n, n}), {1, 0});
  b.Result(b.Unary(OpCode::kNegate, b.Reshape(t, {n * n})));  // copy 2
  ExecutablePtr exe = CompileBuilder(b);
  const auto& plan = static_cast<const HostExecutable&>(*exe);
  const int64_t buffers = alloc.stats().allocated;
  // x bound transposed: x[i][j] is xd[j * n + i].
  EXPECT_EQ(LaunchPeak(alloc, exe, Bindings(Binding(x, 0, F, {n, n}, {1, n})), Bindings(Binding(out, 0, F, {n * n}))),
            buffers + HostAllocator::RoundSize(plan.temp_bytes) + HostAllocator::RoundSize(bytes));
  EXPECT_EQ(alloc.stats().allocated, buffers);
  // out = flatten(transpose(x)), and x's transpose is xd read in order.
  const float* od = static_cast<const float*>(out->contents());
  for (int64_t i = 0; i < n * n; ++i) ASSERT_EQ(od[i], xd[i]) << i;
  x->Release();
  out->Release();
}

TEST(ViewsTest, InPlaceOnAStridedView) {
  // Update every other column of a [3, 8] array in place through a [3, 4] view.
  Builder b;
  int x = b.Param(T(F, {3, 4}));
  b.Result(b.Unary(OpCode::kNegate, x));
  std::vector<float> mem(24);
  for (int k = 0; k < 24; ++k) mem[k] = static_cast<float>(k + 1);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(mem, F, {3, 4}, {8, 2}, 1)), Bindings(Bind(mem, F, {3, 4}, {8, 2}, 1))).ok());
  for (int k = 0; k < 24; ++k) EXPECT_EQ(mem[k], (k % 2 == 1) ? -(k + 1.0f) : k + 1.0f) << k;
}

TEST(ViewsTest, ReshapeOfNonContiguousInputMaterializes) {
  // x is a transposed view ([3, 4] over a row-major [4, 3] array); reshape must follow x's
  // logical (row-major) element order, not memory order.
  std::vector<float> m(12);
  for (int k = 0; k < 12; ++k) m[k] = static_cast<float>(k);
  auto logical = [&](int i, int j) { return m[j * 3 + i]; };  // x[i][j]
  Builder b;
  int x = b.Param(T(F, {3, 4}));
  int flat = b.Reshape(x, {12});
  b.Result(flat);
  b.Result(b.Binary(OpCode::kAdd, b.Reshape(x, {2, 6}), b.ScalarLike(100, b.Reshape(x, {2, 6}))));
  b.Result(b.Reshape(x, {3, 2, 2}));  // splits a strided dim: viewable without a copy
  std::vector<float> o1(12), o2(12), o3(12);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(m, F, {3, 4}, {1, 3})),
                         Bindings(Bind(o1, F, {12}), Bind(o2, F, {2, 6}), Bind(o3, F, {3, 2, 2})))
                  .ok());
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      EXPECT_EQ(o1[i * 4 + j], logical(i, j)) << i << "," << j;
      EXPECT_EQ(o2[i * 4 + j], logical(i, j) + 100) << i << "," << j;
      EXPECT_EQ(o3[i * 4 + j], logical(i, j)) << i << "," << j;
    }
}

TEST(ViewsTest, ReshapeOfColumnSlice) {
  // x: columns 2..7 of a row-major [4, 10] array (strides {10, 1}).
  std::vector<float> m(40);
  for (int k = 0; k < 40; ++k) m[k] = static_cast<float>(k);
  Builder b;
  int x = b.Param(T(F, {4, 6}));
  b.Result(b.Reshape(x, {4, 2, 3}));  // view
  b.Result(b.Reshape(x, {24}));       // copy
  b.Result(b.Reshape(x, {8, 3}));     // copy
  std::vector<float> o1(24), o2(24), o3(24);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(m, F, {4, 6}, {10, 1}, 2)),
                         Bindings(Bind(o1, F, {4, 2, 3}), Bind(o2, F, {24}), Bind(o3, F, {8, 3})))
                  .ok());
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j) {
      float want = m[i * 10 + 2 + j];
      EXPECT_EQ(o1[i * 6 + j], want);
      EXPECT_EQ(o2[i * 6 + j], want);
      EXPECT_EQ(o3[i * 6 + j], want);
    }
}

TEST(ViewsTest, HostScalarBindingsAndParamResults) {
  // A Python number arrives as an inline scalar binding; a parameter may be returned as is.
  Builder b;
  int x = b.Param(T(F, {2, 3}));
  int s = b.Param(T(F, {}));
  int k = b.Param(T(DType::kI64, {}));
  b.Result(b.Binary(OpCode::kMultiply, x, b.BroadcastInDim(s, {2, 3}, {})));
  b.Result(x);
  b.Result(b.Binary(OpCode::kAdd, k, k));
  std::vector<float> xv = {1, 2, 3, 4, 5, 6}, o1(6), o2(6);
  std::vector<int64_t> o3(1);
  float sv = -1.5f;
  int64_t kv = int64_t{1} << 35;
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(xv, F, {2, 3}), Binding::Scalar(F, &sv), Binding::Scalar(DType::kI64, &kv)),
                         Bindings(Bind(o1, F, {2, 3}), Bind(o2, F, {2, 3}), Bind(o3, DType::kI64, {})))
                  .ok());
  EXPECT_EQ(o1, (std::vector<float>{-1.5f, -3, -4.5f, -6, -7.5f, -9}));
  EXPECT_EQ(o2, xv);
  EXPECT_EQ(o3[0], int64_t{1} << 36);
}

TEST(ViewsTest, KernelResultIntoStridedBinding) {
  Builder b;
  int x = b.Param(T(F, {3, 4}));
  b.Result(b.Reduce(x, b.Constant(0, F), {1}, ReduceKind::kAdd));
  std::vector<float> xv(12), out(7, -1);
  for (int k = 0; k < 12; ++k) xv[k] = static_cast<float>(k);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(xv, F, {3, 4})), Bindings(Bind(out, F, {3}, {3}))).ok());
  EXPECT_EQ(out, (std::vector<float>{6, -1, -1, 22, -1, -1, 38}));
}

TEST(ViewsTest, LaunchChecksItsArguments) {
  Builder b;
  int x = b.Param(T(F, {2, 2}));
  b.Result(b.Unary(OpCode::kNegate, x));
  ExecutablePtr exe = CompileBuilder(b);
  std::vector<float> a(4), o(4), wrong(6);
  Status too_few = RunExe(exe, {}, Bindings(Bind(o, F, {2, 2})));
  EXPECT_EQ(too_few.code(), Code::kInternal);
  EXPECT_NE(too_few.message().find("wrong number of arguments"), std::string::npos);
  Status bad_shape = RunExe(exe, Bindings(Bind(wrong, F, {3, 2})), Bindings(Bind(o, F, {2, 2})));
  EXPECT_EQ(bad_shape.code(), Code::kInternal);
  EXPECT_NE(bad_shape.message().find("argument 0 of host_test does not match its type"), std::string::npos)
      << bad_shape.message();
  Status bad_dtype = RunExe(exe, Bindings(Bind(a, DType::kI32, {2, 2})), Bindings(Bind(o, F, {2, 2})));
  EXPECT_EQ(bad_dtype.code(), Code::kInternal);
}

TEST(ViewsTest, AFailedStepSkipsOnlyWhatDependsOnIt) {
  // y = x * 2; z = gather(y, bad index) + 1; w = x + 5: the gather fails, z is not computed,
  // y and w are -- as when the ops run one at a time.
  Builder b;
  int x = b.Param(T(F, {4}));
  int idx = b.Param(T(DType::kI64, {1, 1}));
  int y = b.Binary(OpCode::kMultiply, x, b.ScalarLike(2, x));
  int g = b.Gather(y, idx, {}, {0}, {0}, {1});
  int z = b.Binary(OpCode::kAdd, g, b.ScalarLike(1, g));
  int w = b.Binary(OpCode::kAdd, x, b.ScalarLike(5, x));
  b.Result(y);
  b.Result(z);
  b.Result(w);
  ExecutablePtr exe = CompileBuilder(b);
  std::vector<float> xs{1, 2, 3, 4}, ys(4, -1), zs(1, -1), ws(4, -1);
  std::vector<int64_t> bad{9};
  Launch launch{exe, Bindings(Bind(xs, F, {4}), Bind(bad, DType::kI64, {1, 1})),
                Bindings(Bind(ys, F, {4}), Bind(zs, F, {1}), Bind(ws, F, {4}))};
  HostExecutor ex;
  RunReport report;
  Status st = ex.Run(launch, &report);
  ASSERT_EQ(st.code(), Code::kOutOfRange) << st.ToString();
  EXPECT_GE(report.failed_op, 0);
  EXPECT_EQ(exe->SourceOp(report.failed_op) >= 0, true);
  ASSERT_EQ(report.failed_results.size(), 3u);
  EXPECT_EQ(report.failed_results, (std::vector<uint8_t>{0, 1, 0}));
  EXPECT_EQ(ys, (std::vector<float>{2, 4, 6, 8}));
  EXPECT_EQ(zs, (std::vector<float>{-1}));  // never written
  EXPECT_EQ(ws, (std::vector<float>{6, 7, 8, 9}));
}

TEST(ViewsTest, RunsOnTheDeviceQueue) {
  // The path eager execution takes: a device's queue runs the launch on its executor.
  Device& dev = GetBackend().device(0);
  Builder b;
  int x = b.Param(T(F, {16}));
  b.Result(b.Binary(OpCode::kMultiply, x, b.ScalarLike(3, x)));
  ExecutablePtr exe = CompileBuilder(b);
  Buffer* in = dev.allocator().Allocate(64).value();
  Buffer* out = dev.allocator().Allocate(64).value();
  float host[16];
  for (int i = 0; i < 16; ++i) host[i] = static_cast<float>(i);
  dev.queue().Write(in, 0, host, sizeof(host), TaskContext{"test::write", ""});
  Binding params[] = {Binding(in, 0, F, {16})};
  Binding results[] = {Binding(out, 0, F, {16})};
  dev.queue().Launch(exe, params, 1, results, 1, TaskContext{"test::mul", ""}, /*may_run_inline=*/false);
  float back[16] = {};
  ASSERT_TRUE(dev.queue().Read(out, 0, sizeof(back), back).ok());
  for (int i = 0; i < 16; ++i) EXPECT_EQ(back[i], 3.0f * i);
  in->Release();
  out->Release();
}

}  // namespace
}  // namespace tpu::host::testing
