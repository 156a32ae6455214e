// convolution through the host executor: PyTorch's convolution and both gradients, as built by
// ir/conv_grad.h, against plain loops (every oneDNN path, groups, 1d/2d/3d, bfloat16, float64
// through the reference loops), plus layouts given by dimension numbers and strided bindings.
// Values are small multiples of 1/4, so every sum is exact and results compare with ==.
#include <cstdint>
#include <ostream>
#include <limits>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "ir/conv_grad.h"
#include "runtime/host/host_test_util.h"

namespace tpu::host::testing {
namespace {

const DType F = DType::kF32;

struct ConvCase {
  int64_t n, c, o, groups;
  Dims in, kernel, stride, padding, dilation;
};

// Readable test names on failure.
void PrintTo(const ConvCase& k, std::ostream* os) {
  *os << "n=" << k.n << " c=" << k.c << " o=" << k.o << " groups=" << k.groups
      << " in=" << DimsToString(k.in) << " kernel=" << DimsToString(k.kernel)
      << " stride=" << DimsToString(k.stride) << " padding=" << DimsToString(k.padding)
      << " dilation=" << DimsToString(k.dilation);
}

int64_t Prod(const Dims& d) {
  int64_t p = 1;
  for (int64_t v : d) p *= v;
  return p;
}

Dims OutSpatial(const ConvCase& k) {
  Dims out;
  for (size_t d = 0; d < k.in.size(); ++d)
    out.push_back(
        (k.in[d] + 2 * k.padding[d] - k.dilation[d] * (k.kernel[d] - 1) - 1) / k.stride[d] + 1);
  return out;
}

Dims Cat(Dims a, const Dims& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The forward convolution and both gradients by one walk over (n, o, y, c, k).
struct Naive {
  std::vector<double> y, gx, gw;
};
Naive RunNaive(const ConvCase& k, const std::vector<float>& x, const std::vector<float>& w,
               const std::vector<float>& gy) {
  Dims out = OutSpatial(k);
  int64_t rank = k.in.size(), cg = k.c / k.groups, og = k.o / k.groups;
  int64_t in_n = Prod(k.in), out_n = Prod(out), k_n = Prod(k.kernel);
  Naive r{std::vector<double>(k.n * k.o * out_n), std::vector<double>(x.size()),
          std::vector<double>(w.size())};
  for (int64_t b = 0; b < k.n; ++b)
    for (int64_t o = 0; o < k.o; ++o)
      for (int64_t yi = 0; yi < out_n; ++yi)
        for (int64_t ci = 0; ci < cg; ++ci)
          for (int64_t ki = 0; ki < k_n; ++ki) {
            int64_t xi = 0, yr = yi, kr = ki;
            bool valid = true;
            Dims yc(rank), kc(rank);
            for (int64_t d = rank - 1; d >= 0; --d) {
              yc[d] = yr % out[d];
              yr /= out[d];
              kc[d] = kr % k.kernel[d];
              kr /= k.kernel[d];
            }
            for (int64_t d = 0; d < rank; ++d) {
              int64_t pos = yc[d] * k.stride[d] + kc[d] * k.dilation[d] - k.padding[d];
              valid &= pos >= 0 && pos < k.in[d];
              xi = xi * k.in[d] + pos;
            }
            if (!valid) continue;
            int64_t c = (o / og) * cg + ci;
            int64_t xo = (b * k.c + c) * in_n + xi, wo = (o * cg + ci) * k_n + ki;
            int64_t yo = (b * k.o + o) * out_n + yi;
            r.y[yo] += double{x[xo]} * w[wo];
            r.gx[xo] += double{gy[yo]} * w[wo];
            r.gw[wo] += double{gy[yo]} * x[xo];
          }
  return r;
}

// Element types: uint16_t holds bfloat16 bits.
template <typename E>
std::vector<E> Values(int64_t n, int salt) {
  std::vector<E> v(n);
  for (int64_t i = 0; i < n; ++i) {
    float f = SmallValue(i, salt);
    if constexpr (sizeof(E) == 2)
      v[i] = ToBf16(f);
    else
      v[i] = static_cast<E>(f);
  }
  return v;
}

template <typename E>
std::vector<float> AsFloat(const std::vector<E>& v) {
  std::vector<float> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if constexpr (sizeof(E) == 2)
      r[i] = FromBf16(v[i]);
    else
      r[i] = static_cast<float>(v[i]);
  }
  return r;
}

// Runs forward, input grad and weight grad with operands of type E (dt) and results of type R
// (rt), and compares them with the loops.
template <typename E, typename R>
void CheckCase(const ConvCase& k, DType dt, DType rt) {
  Dims out = OutSpatial(k);
  Dims xd = Cat({k.n, k.c}, k.in), wd = Cat({k.o, k.c / k.groups}, k.kernel),
       yd = Cat({k.n, k.o}, out);
  auto x = Values<E>(Prod(xd), 1), w = Values<E>(Prod(wd), 2), gy = Values<E>(Prod(yd), 3);
  Naive want = RunNaive(k, AsFloat(x), AsFloat(w), AsFloat(gy));
  ConvParams p{k.stride, k.padding, k.dilation, k.groups};
  // Results start as NaN: every element must be written (zeros included).
  const R unwritten = std::numeric_limits<R>::quiet_NaN();
  std::vector<R> y(Prod(yd), unwritten), gx(Prod(xd), unwritten), gw(Prod(wd), unwritten);
  {
    Builder b;
    int xp = b.Param(T(dt, xd)), wp = b.Param(T(dt, wd));
    b.Result(ConvForward(b, xp, wp, p, rt));
    ASSERT_TRUE(
        RunProgram(b, Bindings(Bind(x, dt, xd), Bind(w, dt, wd)), Bindings(Bind(y, rt, yd))).ok());
  }
  {
    Builder b;
    int gp = b.Param(T(dt, yd)), wp = b.Param(T(dt, wd));
    b.Result(ConvInputGrad(b, gp, wp, p, k.in, rt));
    Status s =
        RunProgram(b, Bindings(Bind(gy, dt, yd), Bind(w, dt, wd)), Bindings(Bind(gx, rt, xd)));
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  {
    Builder b;
    int xp = b.Param(T(dt, xd)), gp = b.Param(T(dt, yd));
    b.Result(ConvWeightGrad(b, xp, gp, p, k.kernel, rt));
    Status s =
        RunProgram(b, Bindings(Bind(x, dt, xd), Bind(gy, dt, yd)), Bindings(Bind(gw, rt, wd)));
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  auto got = [](R v) { return static_cast<double>(v); };
  for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(got(y[i]), want.y[i]) << "y " << i;
  for (size_t i = 0; i < gx.size(); ++i) ASSERT_EQ(got(gx[i]), want.gx[i]) << "grad x " << i;
  for (size_t i = 0; i < gw.size(); ++i) ASSERT_EQ(got(gw[i]), want.gw[i]) << "grad w " << i;
}

class ConvTest : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvTest, Float32MatchesLoops) { CheckCase<float, float>(GetParam(), F, F); }
TEST_P(ConvTest, Float64ThroughReferenceLoops) {
  CheckCase<double, double>(GetParam(), DType::kF64, DType::kF64);
}
TEST_P(ConvTest, Bfloat16WithFloat32Results) {
  CheckCase<uint16_t, float>(GetParam(), DType::kBF16, F);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ConvTest,
    ::testing::Values(
        ConvCase{2, 3, 4, 1, {7, 6}, {3, 3}, {1, 1}, {1, 1}, {1, 1}},
        ConvCase{2, 16, 32, 1, {6, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}},  // oneDNN's nhwc kernels
        ConvCase{2, 3, 4, 1, {8, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 1}},  // rows no window reaches
        ConvCase{1, 2, 3, 1, {9, 9}, {3, 3}, {1, 1}, {2, 2}, {2, 2}},  // dilation
        ConvCase{2, 4, 6, 2, {6, 7}, {2, 3}, {2, 1}, {0, 1}, {1, 1}},  // groups
        ConvCase{1, 4, 4, 4, {5, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}},  // depthwise
        ConvCase{2, 4, 8, 1, {8, 8}, {1, 1}, {2, 2}, {0, 0}, {1, 1}},  // 1x1 downsample
        ConvCase{1, 2, 2, 1, {5, 4}, {3, 2}, {1, 1}, {3, 2}, {1, 1}},  // padding > kernel extent
        ConvCase{2, 3, 2, 1, {10}, {3}, {2}, {1}, {2}},                // 1d
        // Note [oneDNN on one thread]: 2M multiply-adds and up are split by images over the pool
        ConvCase{4, 32, 32, 1, {16, 16}, {3, 3}, {1, 1}, {1, 1}, {1, 1}},  // equal blocks
        ConvCase{3, 32, 64, 2, {12, 12}, {3, 3}, {1, 1}, {1, 1}, {1, 1}},  // unequal blocks, groups
        // Note [Small convolutions]: forward and both gradients as one matrix product
        ConvCase{2, 8, 16, 1, {2, 2}, {3, 3}, {2, 2}, {1, 1}, {1, 1}},  // 2x2 -> 1x1, stride 2
        ConvCase{3, 8, 8, 1, {1, 1}, {3, 3}, {1, 1}, {1, 1}, {1, 1}},   // 1x1 image: the center tap
        ConvCase{2, 4, 6, 1, {2, 2}, {3, 3}, {1, 1}, {1, 1}, {1, 1}},   // 2x2 -> 2x2
        ConvCase{2, 3, 4, 1, {3}, {3}, {1}, {1}, {1}},                  // 1d
        ConvCase{1, 2, 3, 1, {4, 5, 3}, {2, 3, 2}, {1, 2, 1}, {1, 0, 1}, {1, 1, 1}}));  // 3d

// Strides of NC<spatial> dims laid out channels-last (N, spatial..., C in memory).
Dims ChannelsLastStrides(const Dims& d) {
  Dims s(d.size());
  int64_t acc = d[1];
  s[1] = 1;
  for (size_t i = d.size(); i-- > 2;) {
    s[i] = acc;
    acc *= d[i];
  }
  s[0] = acc;
  return s;
}

// v (contiguous in d) copied to the channels-last memory of the same logical tensor, or back.
std::vector<float> Relayout(const std::vector<float>& v, const Dims& d, bool to_channels_last) {
  Dims cs = ContiguousStrides(d), ls = ChannelsLastStrides(d);
  std::vector<float> r(v.size());
  for (int64_t e = 0; e < static_cast<int64_t>(v.size()); ++e) {
    int64_t off = 0;
    for (size_t i = 0; i < d.size(); ++i) off += (e / cs[i]) % d[i] * ls[i];
    if (to_channels_last) r[off] = v[e];
    else r[e] = v[off];
  }
  return r;
}

// Every operand and result bound channels-last (NHWC memory, as a channels_last PyTorch tensor
// is): oneDNN runs on those layouts directly; results must equal the loops'.
TEST_P(ConvTest, ChannelsLastBindings) {
  const ConvCase& k = GetParam();
  Dims out = OutSpatial(k);
  Dims xd = Cat({k.n, k.c}, k.in), wd = Cat({k.o, k.c / k.groups}, k.kernel), yd = Cat({k.n, k.o}, out);
  auto x = Values<float>(Prod(xd), 1), w = Values<float>(Prod(wd), 2), gy = Values<float>(Prod(yd), 3);
  Naive want = RunNaive(k, x, w, gy);
  ConvParams p{k.stride, k.padding, k.dilation, k.groups};
  auto xl = Relayout(x, xd, true), wl = Relayout(w, wd, true), gyl = Relayout(gy, yd, true);
  const float unwritten = std::numeric_limits<float>::quiet_NaN();  // every element must be written
  std::vector<float> y(Prod(yd), unwritten), gx(Prod(xd), unwritten), gw(Prod(wd), unwritten);
  auto cl = [](std::vector<float>& v, const Dims& d) { return Bind(v, F, d, ChannelsLastStrides(d)); };
  {
    Builder b;
    int xp = b.Param(T(F, xd)), wp = b.Param(T(F, wd));
    b.Result(ConvForward(b, xp, wp, p, F));
    ASSERT_TRUE(RunProgram(b, Bindings(cl(xl, xd), cl(wl, wd)), Bindings(cl(y, yd))).ok());
  }
  {
    Builder b;
    int gp = b.Param(T(F, yd)), wp = b.Param(T(F, wd));
    b.Result(ConvInputGrad(b, gp, wp, p, k.in, F));
    ASSERT_TRUE(RunProgram(b, Bindings(cl(gyl, yd), cl(wl, wd)), Bindings(cl(gx, xd))).ok());
  }
  {
    Builder b;
    int xp = b.Param(T(F, xd)), gp = b.Param(T(F, yd));
    b.Result(ConvWeightGrad(b, xp, gp, p, k.kernel, F));
    ASSERT_TRUE(RunProgram(b, Bindings(cl(xl, xd), cl(gyl, yd)), Bindings(cl(gw, wd))).ok());
  }
  y = Relayout(y, yd, false), gx = Relayout(gx, xd, false), gw = Relayout(gw, wd, false);
  for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], want.y[i]) << "y " << i;
  for (size_t i = 0; i < gx.size(); ++i) ASSERT_EQ(gx[i], want.gx[i]) << "grad x " << i;
  for (size_t i = 0; i < gw.size(); ++i) ASSERT_EQ(gw[i], want.gw[i]) << "grad w " << i;
}

// Operands in other layouts through dimension numbers: x as NHWC, w as HWIO, y as NHWC, the input
// bound through a strided (sliced) view. Compared with the same convolution in NCHW.
TEST(ConvThreadsTest, ACachedPrimitiveRunsOnAnyThread) {
  // Kernels run on the queue worker, the submitting thread or autograd's: a primitive cached on
  // one runs on the others. A dilated convolution takes oneDNN's GEMM kernels, whose im2col
  // scratchpad (onednn_threads.h) belonged to the creating thread before user scratchpads: run
  // elsewhere it failed ("could not execute a primitive") or overran the heap.
  const ConvCase k{1, 2, 3, 1, {12, 14}, {4, 3}, {2, 2}, {1, 1}, {2, 3}};
  auto on_thread = [&] {
    std::thread t([&] { CheckCase<float, float>(k, F, F); });
    t.join();
  };
  on_thread();
  CheckCase<float, float>(k, F, F);
  on_thread();
  CheckCase<float, float>(k, F, F);
}

TEST(ConvLayoutTest, DimensionNumbersAndStridedBindings) {
  const int64_t N = 2, H = 5, W = 6, C = 3, O = 4, K = 3;
  ConvCase k{N, C, O, 1, {H, W}, {K, K}, {1, 2}, {1, 1}, {1, 1}};
  Dims out = OutSpatial(k);
  std::vector<float> x(N * C * H * W), w(O * C * K * K);
  for (size_t i = 0; i < x.size(); ++i) x[i] = SmallValue(i, 1);
  for (size_t i = 0; i < w.size(); ++i) w[i] = SmallValue(i, 2);
  std::vector<float> gy(N * O * out[0] * out[1], 0.0f);
  Naive want = RunNaive(k, x, w, gy);
  // x NHWC inside a buffer twice as wide in C (every other channel slot used).
  std::vector<float> xbig(N * H * W * 2 * C, 99.0f), wh(K * K * C * O), yn(N * out[0] * out[1] * O);
  for (int64_t b = 0; b < N; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < H * W; ++i)
        xbig[(b * H * W + i) * 2 * C + 2 * c] = x[(b * C + c) * H * W + i];
  for (int64_t o = 0; o < O; ++o)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < K * K; ++i) wh[(i * C + c) * O + o] = w[(o * C + c) * K * K + i];
  ConvolutionSpec s = ConvolutionSpec::Nchw(2);
  s.window_strides = {1, 2};
  s.padding_low = s.padding_high = {1, 1};
  s.dn.input_batch = 0, s.dn.input_feature = 3, s.dn.input_spatial = {1, 2};
  s.dn.kernel_spatial = {0, 1}, s.dn.kernel_input_feature = 2, s.dn.kernel_output_feature = 3;
  s.dn.output_batch = 0, s.dn.output_feature = 3, s.dn.output_spatial = {1, 2};
  Builder b;
  int xp = b.Param(T(F, {N, H, W, C})), wp = b.Param(T(F, {K, K, C, O}));
  b.Result(b.Convolution(xp, wp, s, F));
  Dims xs{H * W * 2 * C, W * 2 * C, 2 * C, 2};
  Status st = RunProgram(b, Bindings(Bind(xbig, F, {N, H, W, C}, xs), Bind(wh, F, {K, K, C, O})),
                         Bindings(Bind(yn, F, {N, out[0], out[1], O})));
  ASSERT_TRUE(st.ok()) << st.ToString();
  for (int64_t bb = 0; bb < N; ++bb)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t i = 0; i < out[0] * out[1]; ++i)
        ASSERT_EQ(yn[(bb * out[0] * out[1] + i) * O + o],
                  want.y[(bb * O + o) * out[0] * out[1] + i]);
}

TEST(ConvBuilderTest, RejectsInconsistentShapes) {
  Builder b;
  int x = b.Param(T(F, {1, 3, 5, 5})), w = b.Param(T(F, {4, 2, 3, 3}));  // 3 != 2 * groups(1)
  b.Convolution(x, w, ConvolutionSpec::Nchw(2), F);
  EXPECT_FALSE(b.Finish().ok());
}

}  // namespace
}  // namespace tpu::host::testing
