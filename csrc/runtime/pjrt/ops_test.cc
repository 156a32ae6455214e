// The same programs on XLA (through the PJRT backend) and on the host executor, across the op
// families: results must agree -- exactly for integers, layout ops, indices and exactly
// rounded float ops; within a few float32 ulps where XLA computes with another algorithm
// (its own exp/tanh/erf approximations, another summation order in dot/convolution/reduce).
#include <cmath>
#include <cstring>
#include <random>

#include "runtime/host/executor.h"
#include "runtime/host/host_backend.h"
#include "runtime/pjrt/pjrt_test_util.h"

namespace tpu::pjrt::testing {
namespace {

using Bytes = std::vector<char>;
const DType F = DType::kF32;

float Bf16ToFloat(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
uint16_t FloatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (std::isnan(f)) return 0x7FC0;
  return static_cast<uint16_t>((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
}

// Element i of an array of `dt` as a double.
double ElementAt(const Bytes& b, DType dt, int64_t i) {
  const char* p = b.data() + i * DTypeSize(dt);
  switch (dt) {
    case DType::kF32: { float v; std::memcpy(&v, p, 4); return v; }
    case DType::kF64: { double v; std::memcpy(&v, p, 8); return v; }
    case DType::kBF16: { uint16_t v; std::memcpy(&v, p, 2); return Bf16ToFloat(v); }
    case DType::kF16: { _Float16 v; std::memcpy(&v, p, 2); return static_cast<double>(v); }
    default: return 0;  // integers are compared as bytes
  }
}

// Random values of `t`: normal floats, small integers, 0/1 booleans.
Bytes Random(const TensorType& t, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  int64_t n = t.NumElements();
  Bytes out(static_cast<size_t>(n * DTypeSize(t.dtype)));
  for (int64_t i = 0; i < n; ++i) {
    char* p = out.data() + i * DTypeSize(t.dtype);
    float f = normal(rng);
    int64_t k = static_cast<int64_t>(rng() % 11) - 5;
    switch (t.dtype) {
      case DType::kF32: std::memcpy(p, &f, 4); break;
      case DType::kF64: { double d = f; std::memcpy(p, &d, 8); break; }
      case DType::kBF16: { uint16_t h = FloatToBf16(f); std::memcpy(p, &h, 2); break; }
      case DType::kF16: { _Float16 h = static_cast<_Float16>(f); std::memcpy(p, &h, 2); break; }
      case DType::kBool: *p = static_cast<char>(rng() & 1); break;
      case DType::kU8: case DType::kU32: case DType::kU64: k += 5; [[fallthrough]];
      default: std::memcpy(p, &k, static_cast<size_t>(DTypeSize(t.dtype))); break;  // little-endian
    }
  }
  return out;
}

template <typename T>
Bytes Of(const std::vector<T>& v) {
  Bytes b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}
template <typename T>
std::vector<T> As(const Bytes& b) {
  std::vector<T> v(b.size() / sizeof(T));
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

struct Tolerance {
  double rtol = 1e-5, atol = 1e-6;  // float32; half types use 1e-2 (a bf16 ulp is 2^-8)
};

struct Runs {
  Status host, pjrt;
  std::vector<Bytes> host_out, pjrt_out;
};

class PjrtVsHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TPU_REQUIRE_PJRT_PLUGIN();
    backend_ = TestBackend();
    ASSERT_NE(backend_, nullptr);
  }

  // Runs the builder's program on both backends over `inputs` (random where not given).
  Runs Run(Builder& b, std::vector<Bytes> inputs = {}) {
    auto g = b.Finish();
    EXPECT_TRUE(g.ok()) << g.status().ToString();
    if (!g.ok()) return Runs{g.status(), g.status(), {}, {}};
    return Run(g.value(), std::move(inputs));
  }

  Runs Run(const Graph& graph, std::vector<Bytes> inputs) {
    Runs r;
    for (int p = static_cast<int>(inputs.size()); p < graph.num_params(); ++p)
      inputs.push_back(Random(graph.params[p], 1000 + p));
    CompileOptions co;
    co.name = "ops_test";
    // host executor
    auto hexe = host::CompileForHost(graph, co);
    EXPECT_TRUE(hexe.ok()) << hexe.status().ToString();
    if (!hexe.ok()) return r;
    Launch hl{ExecutablePtr(hexe.value()), {}, {}};
    for (int p = 0; p < graph.num_params(); ++p)
      hl.params.push_back(Binding::External(inputs[p].data(), graph.params[p].dtype, graph.params[p].dims));
    for (int v : graph.results) {
      const TensorType& t = graph.TypeOf(v);
      r.host_out.emplace_back(static_cast<size_t>(t.ByteSize()));
    }
    for (size_t i = 0; i < graph.results.size(); ++i) {
      const TensorType& t = graph.TypeOf(graph.results[i]);
      hl.results.push_back(Binding::External(r.host_out[i].data(), t.dtype, t.dims));
    }
    host::HostExecutor hx;
    RunReport report;
    r.host = hx.Run(hl, &report);
    // PJRT
    Device& d = backend_->device(0);
    auto pexe = backend_->Compile(graph, co);
    if (!pexe.ok()) {
      r.pjrt = pexe.status();
      return r;
    }
    std::vector<DeviceBuffer> ins, outs;
    std::vector<Binding> params, results;
    for (int p = 0; p < graph.num_params(); ++p) {
      ins.push_back(NewBuffer(d, static_cast<int64_t>(inputs[p].size())));
      int64_t n = static_cast<int64_t>(inputs[p].size());
      d.queue().Write(ins.back().buffer, 0, inputs[p].data(), n, TaskContext("in"));
      params.push_back(ins.back().Bind(graph.params[p]));
    }
    for (int v : graph.results) {
      const TensorType& t = graph.TypeOf(v);
      outs.push_back(NewBuffer(d, t.ByteSize()));
      results.push_back(outs.back().Bind(t));
    }
    r.pjrt = LaunchAndWait(d, pexe.value(), std::move(params), std::move(results), "ops_test_op");
    if (r.pjrt.ok())
      for (const DeviceBuffer& o : outs) r.pjrt_out.push_back(Download<char>(d, o));
    EXPECT_TRUE(d.queue().Synchronize().ok());
    return r;
  }

  // Runs both and expects them to succeed with results that agree.
  Runs Check(Builder& b, std::vector<Bytes> inputs = {}, Tolerance tol = {}) {
    auto g = b.Finish();
    EXPECT_TRUE(g.ok()) << g.status().ToString();
    if (!g.ok()) return Runs{g.status(), g.status(), {}, {}};
    const Graph& copy = g.value();
    Runs r = Run(copy, std::move(inputs));
    EXPECT_TRUE(r.host.ok()) << r.host.ToString();
    EXPECT_TRUE(r.pjrt.ok()) << r.pjrt.ToString();
    if (!r.host.ok() || !r.pjrt.ok()) return r;
    for (size_t i = 0; i < copy.results.size(); ++i) {
      const TensorType& t = copy.TypeOf(copy.results[i]);
      SCOPED_TRACE("result " + std::to_string(i) + " " + t.ToString());
      if (!IsFloat(t.dtype)) {
        EXPECT_EQ(r.host_out[i], r.pjrt_out[i]);
        continue;
      }
      bool half = t.dtype == DType::kBF16 || t.dtype == DType::kF16;
      double rtol = half ? std::max(tol.rtol, 1e-2) : tol.rtol, atol = half ? std::max(tol.atol, 1e-2) : tol.atol;
      int bad = 0;
      for (int64_t e = 0; e < t.NumElements() && bad < 5; ++e) {
        double h = ElementAt(r.host_out[i], t.dtype, e), x = ElementAt(r.pjrt_out[i], t.dtype, e);
        bool same = (std::isnan(h) && std::isnan(x)) || h == x || std::fabs(h - x) <= atol + rtol * std::fabs(h);
        if (!same) ++bad;
        EXPECT_TRUE(same) << "element " << e << ": host " << h << ", pjrt " << x;
      }
    }
    return r;
  }

  Backend* backend_ = nullptr;
};

TEST_F(PjrtVsHostTest, ElementwiseFloatWithBroadcast) {
  Builder b;
  int x = b.Param(T(F, {3, 4})), y = b.Param(T(F, {4}));
  int yb = b.BroadcastInDim(y, {3, 4}, {1});
  int ax = b.Unary(OpCode::kAbs, x);
  b.Result(b.Binary(OpCode::kAdd, x, yb));
  b.Result(b.Binary(OpCode::kMultiply, x, yb));
  b.Result(b.Binary(OpCode::kDivide, x, b.Binary(OpCode::kAdd, b.Unary(OpCode::kAbs, yb), b.ScalarLike(0.5, yb))));
  b.Result(b.Binary(OpCode::kMaximum, x, yb));
  b.Result(b.Binary(OpCode::kMinimum, x, yb));
  b.Result(b.Binary(OpCode::kSubtract, x, yb));
  b.Result(b.Binary(OpCode::kPower, b.Binary(OpCode::kAdd, ax, b.ScalarLike(0.1, x)), yb));
  b.Result(b.Binary(OpCode::kRemainder, x, b.ScalarLike(0.7, x)));
  b.Result(b.Binary(OpCode::kAtan2, x, yb));
  for (OpCode u : {OpCode::kExp, OpCode::kExpm1, OpCode::kTanh, OpCode::kLogistic, OpCode::kErf, OpCode::kSine,
                   OpCode::kCosine, OpCode::kFloor, OpCode::kCeil, OpCode::kRoundNearestEven, OpCode::kNegate,
                   OpCode::kSign})
    b.Result(b.Unary(u, x));
  b.Result(b.Unary(OpCode::kLog, ax));
  b.Result(b.Unary(OpCode::kLog1p, ax));
  b.Result(b.Unary(OpCode::kSqrt, ax));
  b.Result(b.Unary(OpCode::kRsqrt, b.Binary(OpCode::kAdd, ax, b.ScalarLike(0.5, x))));
  b.Result(b.Unary(OpCode::kIsFinite, x));
  b.Result(b.Clamp(b.ScalarLike(-0.5, x), x, b.ScalarLike(0.5, x)));
  // NaN, infinities and signed zeros among the inputs: maximum/minimum propagate NaN.
  std::vector<float> xs = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-10f, -1.5f, 2.5f, 100.f, -100.f, 0.5f, -2.5f};
  std::vector<float> ys = {1.0f, NAN, -0.25f, 3.0f};
  Check(b, {Of(xs), Of(ys)});
}

TEST_F(PjrtVsHostTest, CompareSelectAndIntegers) {
  Builder b;
  int x = b.Param(T(F, {2, 5})), y = b.Param(T(F, {2, 5}));
  int i = b.Param(T(DType::kI32, {2, 5})), j = b.Param(T(DType::kI32, {2, 5}));
  int l = b.Param(T(DType::kI64, {2, 5})), u = b.Param(T(DType::kU8, {2, 5}));
  for (CompareDirection dir : {CompareDirection::kEQ, CompareDirection::kNE, CompareDirection::kLT,
                               CompareDirection::kLE, CompareDirection::kGT, CompareDirection::kGE}) {
    b.Result(b.Compare(dir, x, y));
    b.Result(b.Compare(dir, i, j));
  }
  b.Result(b.Select(b.Compare(CompareDirection::kLT, x, y), x, y));
  int jnz = b.Select(b.Compare(CompareDirection::kEQ, j, b.ScalarLike(0, j)), b.ScalarLike(3, j), j);
  for (OpCode op : {OpCode::kAdd, OpCode::kSubtract, OpCode::kMultiply, OpCode::kMaximum, OpCode::kMinimum,
                    OpCode::kAnd, OpCode::kOr, OpCode::kXor})
    b.Result(b.Binary(op, i, j));
  b.Result(b.Binary(OpCode::kDivide, i, jnz));
  b.Result(b.Binary(OpCode::kRemainder, i, jnz));
  b.Result(b.Unary(OpCode::kNot, i));
  b.Result(b.Unary(OpCode::kAbs, i));
  b.Result(b.Binary(OpCode::kMultiply, l, b.ScalarLike(1 << 20, l)));
  b.Result(b.Binary(OpCode::kAdd, u, u));
  b.Result(b.Binary(OpCode::kAnd, b.Compare(CompareDirection::kGT, x, y), b.Compare(CompareDirection::kGT, i, j)));
  std::vector<float> xs = {1, 2, NAN, 4, -1, 0, 3, 3, -2, 5}, ys = {1, 3, NAN, 2, -1, -0.0f, 3, 4, -3, NAN};
  Check(b, {Of(xs), Of(ys)});
}

TEST_F(PjrtVsHostTest, ConvertBetweenDtypes) {
  Builder b;
  int x = b.Param(T(F, {8}));
  int l = b.Param(T(DType::kI64, {8}));
  int h = b.Param(T(DType::kBF16, {8}));
  int p = b.Param(T(DType::kBool, {8}));
  int u = b.Param(T(DType::kU32, {8}));
  int dd = b.Param(T(DType::kF64, {8}));
  for (DType to : {DType::kI32, DType::kI64, DType::kBF16, DType::kF16, DType::kF64, DType::kBool, DType::kI8})
    b.Result(b.Convert(x, to));
  b.Result(b.Convert(b.Unary(OpCode::kAbs, x), DType::kU8));
  b.Result(b.Convert(l, F));
  b.Result(b.Convert(l, DType::kBool));
  b.Result(b.Convert(l, DType::kBF16));
  b.Result(b.Convert(h, F));
  b.Result(b.Convert(h, DType::kI64));
  b.Result(b.Convert(p, F));
  b.Result(b.Convert(p, DType::kI64));
  b.Result(b.Convert(u, DType::kF64));
  b.Result(b.Convert(dd, F));
  std::vector<float> xs = {-2.7f, -0.5f, 0.0f, 0.49f, 1.5f, 2.5f, 100.25f, -7.0f};
  Check(b, {Of(xs)});
}

TEST_F(PjrtVsHostTest, Bfloat16Elementwise) {
  Builder b;
  int x = b.Param(T(DType::kBF16, {5, 3})), y = b.Param(T(DType::kBF16, {5, 3}));
  b.Result(b.Unary(OpCode::kTanh, x));
  b.Result(b.Unary(OpCode::kExp, x));
  b.Result(b.Binary(OpCode::kAdd, x, y));
  b.Result(b.Binary(OpCode::kMultiply, x, y));
  Check(b);
}

TEST_F(PjrtVsHostTest, DotGeneral) {
  Builder b;
  int x = b.Param(T(F, {8, 16})), y = b.Param(T(F, {16, 5}));
  int bx = b.Param(T(F, {2, 3, 4})), by = b.Param(T(F, {2, 4, 5}));
  int hx = b.Param(T(DType::kBF16, {4, 8})), hy = b.Param(T(DType::kBF16, {8, 3}));
  b.Result(b.DotGeneral(x, y, {}, {}, {1}, {0}, F));
  b.Result(b.DotGeneral(bx, by, {0}, {0}, {2}, {1}, F));
  b.Result(b.DotGeneral(y, x, {}, {}, {0}, {1}, F));  // contracting the lhs's major dim
  b.Result(b.DotGeneral(hx, hy, {}, {}, {1}, {0}, F));  // bf16 operands, f32 accumulation
  Check(b, {}, Tolerance{1e-5, 1e-5});
}

TEST_F(PjrtVsHostTest, ReduceAndArgReduce) {
  Builder b;
  int x = b.Param(T(F, {4, 6}));
  int i = b.Param(T(DType::kI32, {4, 6}));
  b.Result(b.Reduce(x, b.Constant(0, F), {1}, ReduceKind::kAdd));
  b.Result(b.Reduce(x, b.Constant(-INFINITY, F), {0, 1}, ReduceKind::kMax));
  b.Result(b.Reduce(x, b.Constant(INFINITY, F), {0}, ReduceKind::kMin));
  b.Result(b.Reduce(i, b.Constant(1, DType::kI32), {1}, ReduceKind::kMul));
  b.Result(b.Reduce(b.Compare(CompareDirection::kGT, x, b.ScalarLike(0, x)), b.Constant(0, DType::kBool), {1},
                    ReduceKind::kOr));
  b.Result(b.ArgReduce(x, 1, ReduceKind::kMax));
  b.Result(b.ArgReduce(x, 0, ReduceKind::kMin));
  b.Result(b.ArgReduce(i, 1, ReduceKind::kMax));  // ties: the first index
  std::vector<float> xs(24);
  for (int k = 0; k < 24; ++k) xs[k] = static_cast<float>((k * 7) % 10) - 4.5f;
  xs[7] = NAN;  // arg-max of a row with NaN is the NaN's index; max-reduction propagates NaN
  Check(b, {Of(xs)});
}

TEST_F(PjrtVsHostTest, GatherAndScatter) {
  const int64_t V = 10, D = 4;
  Builder b;
  int t = b.Param(T(F, {V, D}));
  int ids = b.Param(T(DType::kI64, {6, 1}));
  int upd = b.Param(T(F, {6, D}));
  b.Result(b.Gather(t, ids, {1}, {0}, {0}, {1, D}));
  b.Result(b.Scatter(t, ids, upd, {1}, {0}, {0}, ReduceKind::kAdd));
  int uniq = b.Param(T(DType::kI32, {3, 1}));
  int upd3 = b.Param(T(F, {3, D}));
  b.Result(b.Scatter(t, uniq, upd3, {1}, {0}, {0}, ReduceKind::kReplace));
  // A 2-component index into [3, 4, 5] with 1x2x3 windows (dim 0 collapsed).
  int cube = b.Param(T(F, {3, 4, 5}));
  int starts = b.Param(T(DType::kI64, {2, 2}));
  b.Result(b.Gather(cube, starts, {1, 2}, {0}, {0, 2}, {1, 2, 3}));
  std::vector<int64_t> idv = {3, 0, 9, 3, 7, 1};  // 3 twice: scatter-add combines both
  std::vector<int32_t> uq = {5, 2, 8};
  std::vector<int64_t> st = {2, 1, 0, 2};  // (2, 1) and (0, 2): window [*, 0:2, 1:4] / [.., 2:5]
  Check(b, {Random(T(F, {V, D}), 1), Of(idv), Random(T(F, {6, D}), 2), Of(uq), Random(T(F, {3, D}), 3),
            Random(T(F, {3, 4, 5}), 4), Of(st)});
}

TEST_F(PjrtVsHostTest, OutOfRangeIndicesAreErrorsAsOnTheHost) {
  for (bool gather : {true, false}) {
    SCOPED_TRACE(gather ? "gather" : "scatter");
    Builder b;
    int t = b.Param(T(F, {5, 2}));
    int ids = b.Param(T(DType::kI64, {3, 1}));
    if (gather) {
      b.Result(b.Gather(t, ids, {1}, {0}, {0}, {1, 2}));
    } else {
      b.Result(b.Scatter(t, ids, b.Param(T(F, {3, 2})), {1}, {0}, {0}, ReduceKind::kAdd));
    }
    auto g = b.Finish();
    ASSERT_TRUE(g.ok());
    std::vector<int64_t> bad = {1, 7, 0};
    Runs r = Run(g.value(), {Random(T(F, {5, 2}), 1), Of(bad)});
    ASSERT_FALSE(r.host.ok());
    ASSERT_FALSE(r.pjrt.ok());
    EXPECT_EQ(r.pjrt.code(), Code::kOutOfRange);
    EXPECT_NE(r.host.message().find("index 7 is out of bounds for dimension 0 with size 5"), std::string::npos)
        << r.host.message();
    EXPECT_NE(r.pjrt.message().find("index 7 is out of bounds for dimension 0 with size 5"), std::string::npos)
        << r.pjrt.message();
    EXPECT_NE(r.pjrt.message().find("ops_test_op"), std::string::npos) << r.pjrt.message();
    std::vector<int64_t> negative = {1, -1, 0};
    r = Run(g.value(), {Random(T(F, {5, 2}), 1), Of(negative)});
    ASSERT_FALSE(r.pjrt.ok());
    EXPECT_NE(r.pjrt.message().find("index -1 is out of bounds"), std::string::npos) << r.pjrt.message();
    // In range: both run and agree (the values are sums of the same two floats: exact).
    std::vector<int64_t> good = {4, 0, 2};
    r = Run(g.value(), {Random(T(F, {5, 2}), 1), Of(good)});
    ASSERT_TRUE(r.host.ok()) << r.host.ToString();
    ASSERT_TRUE(r.pjrt.ok()) << r.pjrt.ToString();
    EXPECT_EQ(r.host_out, r.pjrt_out);
  }
}

TEST_F(PjrtVsHostTest, Convolution) {
  Builder b;
  int x = b.Param(T(F, {2, 3, 9, 8})), w = b.Param(T(F, {4, 3, 3, 3}));
  int wg = b.Param(T(F, {6, 1, 3, 3}));
  ConvolutionSpec s = ConvolutionSpec::Nchw(2);
  s.window_strides = {2, 1};
  s.padding_low = {1, 0};
  s.padding_high = {1, 2};
  s.rhs_dilation = {1, 2};
  b.Result(b.Convolution(x, w, s, F));
  ConvolutionSpec g = ConvolutionSpec::Nchw(2);
  g.feature_group_count = 3;  // depthwise, two filters per channel
  b.Result(b.Convolution(x, wg, g, F));
  Check(b, {}, Tolerance{1e-5, 1e-5});
}

TEST_F(PjrtVsHostTest, ReduceWindowAndArgReduceWindow) {
  Builder b;
  int x = b.Param(T(F, {1, 2, 6, 6}));
  WindowSpec w = WindowSpec::Of({1, 1, 3, 3});
  w.strides = {1, 1, 2, 2};
  w.padding_low = {0, 0, 1, 1};
  w.padding_high = {0, 0, 1, 1};
  b.Result(b.ReduceWindow(x, b.Constant(-INFINITY, F), w, ReduceKind::kMax));
  b.Result(b.ReduceWindow(x, b.Constant(0, F), w, ReduceKind::kAdd));
  int idx = b.Iota(T(DType::kI64, {1, 2, 6, 6}), 3);
  b.Result(b.ArgReduceWindow(x, idx, w));
  std::vector<float> xs(72);
  for (int k = 0; k < 72; ++k) xs[k] = static_cast<float>((k * 5) % 7);  // ties
  xs[9] = NAN;
  Check(b, {Of(xs)});
}

TEST_F(PjrtVsHostTest, SortPositions) {
  Builder b;
  int x = b.Param(T(F, {3, 7}));
  int i = b.Param(T(DType::kI32, {3, 7}));
  b.Result(b.Sort(x, 1, false));
  b.Result(b.Sort(x, 1, true));
  b.Result(b.Sort(x, 0, false));
  b.Result(b.Sort(i, 1, false));  // many ties: stable
  std::vector<float> xs = {3, 1, NAN, 2, 1, -0.0f, 0.0f, 5, 5, 5, -1, NAN, 2, 2, 0, 9, -9, INFINITY, -INFINITY, 1, 1};
  Check(b, {Of(xs)});
}

TEST_F(PjrtVsHostTest, LayoutOps) {
  Builder b;
  int x = b.Param(T(F, {3, 4})), y = b.Param(T(F, {2, 4}));
  b.Result(b.Pad(x, b.Constant(-1, F), {1, 0}, {0, 2}, {1, 1}));
  b.Result(b.Slice(x, {0, 1}, {3, 4}, {2, 2}));
  b.Result(b.Concatenate({x, y, x}, 0));
  b.Result(b.Reverse(x, {0, 1}));
  b.Result(b.Transpose(x, {1, 0}));
  b.Result(b.Reshape(x, {2, 6}));
  b.Result(b.BroadcastInDim(y, {3, 2, 4}, {1, 2}));
  b.Result(b.Iota(T(DType::kI32, {2, 3}), 1));
  b.Result(b.Iota(T(F, {4}), 0));
  b.Result(b.Constant(NAN, F));
  b.Result(b.Constant(-INFINITY, DType::kBF16));
  b.Result(b.Constant(7, DType::kI64));
  b.Result(b.Constant(1, DType::kBool));
  Check(b);
}

TEST_F(PjrtVsHostTest, RngBitGeneratorIsDeterministicPerState) {
  // XLA's Philox is not the host executor's: the bits differ between backends (random ops are
  // not expected to match bits), but each is a function of the state alone.
  Builder b;
  int s = b.Param(T(DType::kU64, {2}));
  b.Result(b.RngBits(s, {64, 16}));
  auto g = b.Finish();
  ASSERT_TRUE(g.ok());
  CompileOptions co;
  co.name = "rng";
  auto exe = backend_->Compile(g.value(), co);
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();
  Device& d = backend_->device(0);
  auto run = [&](uint64_t seed, uint64_t offset) {
    DeviceBuffer state = Upload(d, std::vector<uint64_t>{seed, offset});
    DeviceBuffer out = NewBuffer(d, 64 * 16 * 4);
    EXPECT_TRUE(LaunchAndWait(d, exe.value(), Bindings(state.Bind(T(DType::kU64, {2}))),
                              Bindings(out.Bind(T(DType::kU32, {64, 16}))))
                    .ok());
    return Download<uint32_t>(d, out);
  };
  std::vector<uint32_t> a = run(42, 0), again = run(42, 0), other = run(42, 1), seed2 = run(43, 0);
  EXPECT_EQ(a, again);
  EXPECT_NE(a, other);
  EXPECT_NE(a, seed2);
  // Each bit is set about half the time: 1024 words, 32768 bits (6 sigma ~ 540).
  int64_t ones = 0;
  for (uint32_t v : a) ones += __builtin_popcount(v);
  EXPECT_NEAR(static_cast<double>(ones), 16384.0, 600.0);
}

TEST_F(PjrtVsHostTest, ScalarParametersInline) {
  // Rank-0 parameters bound as inline host scalars (a Python number in the torch layer).
  Builder b;
  int x = b.Param(T(F, {4})), a = b.Param(T(F, {})), k = b.Param(T(DType::kI64, {}));
  b.Result(b.Binary(OpCode::kAdd, x, b.BroadcastInDim(a, {4}, {})));
  b.Result(b.Binary(OpCode::kMultiply, b.Convert(x, DType::kI64), b.BroadcastInDim(k, {4}, {})));
  auto g = b.Finish();
  ASSERT_TRUE(g.ok());
  CompileOptions co;
  co.name = "scalars";
  auto exe = backend_->Compile(g.value(), co);
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();
  Device& d = backend_->device(0);
  DeviceBuffer in = Upload(d, std::vector<float>{1, 2, 3, 4});
  for (float av : {0.5f, -2.0f, 0.5f}) {
    int64_t kv = static_cast<int64_t>(av * 10);
    DeviceBuffer o1 = NewBuffer(d, 16), o2 = NewBuffer(d, 32);
    ASSERT_TRUE(LaunchAndWait(d, exe.value(),
                              Bindings(in.Bind(T(F, {4})), Binding::Scalar(F, &av), Binding::Scalar(DType::kI64, &kv)),
                              Bindings(o1.Bind(T(F, {4})), o2.Bind(T(DType::kI64, {4}))))
                    .ok());
    EXPECT_EQ(Download<float>(d, o1), (std::vector<float>{1 + av, 2 + av, 3 + av, 4 + av}));
    EXPECT_EQ(Download<int64_t>(d, o2), (std::vector<int64_t>{kv, 2 * kv, 3 * kv, 4 * kv}));
  }
}

}  // namespace
}  // namespace tpu::pjrt::testing
