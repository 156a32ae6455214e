// pad, concatenate, iota and constant through the host executor.
#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/host/host_test_util.h"

namespace tpu::host::testing {
namespace {

const DType F = DType::kF32;

// Reference pad of a row-major 2-D array.
std::vector<float> RefPad(const std::vector<float>& in, int64_t r, int64_t c, Dims lo, Dims hi, Dims interior,
                          float value, int64_t* out_r, int64_t* out_c) {
  int64_t orr = lo[0] + hi[0] + r + std::max<int64_t>(r - 1, 0) * interior[0];
  int64_t oc = lo[1] + hi[1] + c + std::max<int64_t>(c - 1, 0) * interior[1];
  std::vector<float> out(orr * oc, value);
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) {
      int64_t y = lo[0] + i * (1 + interior[0]), x = lo[1] + j * (1 + interior[1]);
      if (y >= 0 && y < orr && x >= 0 && x < oc) out[y * oc + x] = in[i * c + j];
    }
  *out_r = orr;
  *out_c = oc;
  return out;
}

struct PadCase {
  Dims lo, hi, interior;
};

// Reverse of a [2, 3, 2, 3] array over each set of dims: trailing runs take the block path,
// the others the strided copy; both against the index mapping. The input also bound
// channels-last (strides [18, 1, 9, 3], a channels-last kernel's layout): trailing blocks of at
// most 16 elements are gathered block by block, larger ones copied through the reversed view.
TEST(ReverseTest, EverySetOfDims) {
  const Dims dims{2, 3, 2, 3}, cl{18, 1, 9, 3};
  std::vector<float> in(36), in_cl(36);
  for (size_t k = 0; k < in.size(); ++k) in[k] = static_cast<float>(k);
  for (int64_t k = 0; k < 36; ++k)
    in_cl[k / 18 * 18 + k / 6 % 3 + k / 3 % 2 * 9 + k % 3 * 3] = in[k];
  for (int mask = 1; mask < 32; ++mask) {
    const bool channels_last = mask >= 16;
    Dims rev;
    for (int d = 0; d < 4; ++d)
      if (mask & (1 << d)) rev.push_back(d);
    SCOPED_TRACE(DimsToString(rev) + (channels_last ? " channels-last" : ""));
    Builder b;
    b.Result(b.Reverse(b.Param(T(F, dims)), rev));
    std::vector<float> out(36, -1);
    ASSERT_TRUE(RunProgram(b, Bindings(channels_last ? Bind(in_cl, F, dims, cl) : Bind(in, F, dims)),
                           Bindings(Bind(out, F, dims)))
                    .ok());
    for (int64_t i0 = 0; i0 < 2; ++i0)
      for (int64_t i1 = 0; i1 < 3; ++i1)
        for (int64_t i2 = 0; i2 < 2; ++i2)
          for (int64_t i3 = 0; i3 < 3; ++i3) {
            int64_t j0 = mask & 1 ? 1 - i0 : i0, j1 = mask & 2 ? 2 - i1 : i1;
            int64_t j2 = mask & 4 ? 1 - i2 : i2, j3 = mask & 8 ? 2 - i3 : i3;
            ASSERT_EQ(out[((i0 * 3 + i1) * 2 + i2) * 3 + i3], in[((j0 * 3 + j1) * 2 + j2) * 3 + j3]);
          }
  }
}

TEST(PadTest, NegativeLowAndInteriorPadding) {
  const int64_t R = 3, C = 4;
  std::vector<float> in(R * C);
  for (int64_t k = 0; k < R * C; ++k) in[k] = static_cast<float>(k + 1);
  const PadCase cases[] = {
      {{1, -1}, {2, 0}, {1, 2}},    // negative low + interior
      {{-2, -3}, {0, 1}, {1, 1}},   // crop into the interior padding
      {{0, 0}, {-1, -2}, {0, 0}},   // negative high
      {{2, 1}, {1, 2}, {0, 0}},     // plain
      {{-3, 0}, {-1, 0}, {2, 0}},   // crops to one row
  };
  for (const PadCase& pc : cases) {
    SCOPED_TRACE(DimsToString(pc.lo) + DimsToString(pc.hi) + DimsToString(pc.interior));
    int64_t orr, oc;
    std::vector<float> want = RefPad(in, R, C, pc.lo, pc.hi, pc.interior, -0.5f, &orr, &oc);
    Builder b;
    int x = b.Param(T(F, {R, C}));
    int v = b.Param(T(F, {}));
    int p = b.Pad(x, v, pc.lo, pc.hi, pc.interior);
    ASSERT_EQ(b.TypeOf(p).dims, (Dims{orr, oc}));
    b.Result(p);
    std::vector<float> value = {-0.5f}, out(orr * oc, 123);
    ASSERT_TRUE(RunProgram(b, Bindings(Bind(in, F, {R, C}), Bind(value, F, {})), Bindings(Bind(out, F, {orr, oc}))).ok());
    EXPECT_EQ(out, want);
  }
}

TEST(PadTest, TransposedInputAndIntegerValue) {
  // x = transpose of a row-major [2, 3] array; pad with a constant 7 (i32).
  std::vector<int32_t> m = {1, 2, 3, 4, 5, 6};
  Builder b;
  int x = b.Param(T(DType::kI32, {3, 2}));
  b.Result(b.Pad(x, b.Constant(7, DType::kI32), {0, 1}, {1, 0}, {0, 1}));
  std::vector<int32_t> out(4 * 4);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(m, DType::kI32, {3, 2}, {1, 3})), Bindings(Bind(out, DType::kI32, {4, 4}))).ok());
  // x = [[1, 4], [2, 5], [3, 6]]
  EXPECT_EQ(out, (std::vector<int32_t>{7, 1, 7, 4,  7, 2, 7, 5,  7, 3, 7, 6,  7, 7, 7, 7}));
}

TEST(ConcatenateTest, AlongEachDim) {
  std::vector<float> a = {1, 2, 3, 4, 5, 6};     // [2, 3]
  std::vector<float> c = {7, 8, 9};              // [1, 3]
  std::vector<float> tmem = {10, 20, 11, 21};    // [2, 2] viewed transposed: [[10, 11], [20, 21]]
  Builder b;
  int x = b.Param(T(F, {2, 3}));
  int y = b.Param(T(F, {1, 3}));
  int t = b.Param(T(F, {2, 2}));
  b.Result(b.Concatenate({x, y, x}, 0));
  b.Result(b.Concatenate({x, t}, 1));
  std::vector<float> o0(15), o1(10);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(a, F, {2, 3}), Bind(c, F, {1, 3}), Bind(tmem, F, {2, 2}, {1, 2})),
                         Bindings(Bind(o0, F, {5, 3}), Bind(o1, F, {2, 5})))
                  .ok());
  EXPECT_EQ(o0, (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(o1, (std::vector<float>{1, 2, 3, 10, 11, 4, 5, 6, 20, 21}));
}

TEST(ConcatenateTest, ComputedOperandsAndInnerDim) {
  // concat(x + 1, x * 2) along the last dim of a rank-3 value, in i64.
  Builder b;
  int x = b.Param(T(DType::kI64, {2, 2, 2}));
  int p = b.Binary(OpCode::kAdd, x, b.ScalarLike(1, x));
  int q = b.Binary(OpCode::kMultiply, x, b.ScalarLike(2, x));
  b.Result(b.Concatenate({p, q}, 2));
  std::vector<int64_t> xv = {0, 1, 2, 3, 4, 5, 6, int64_t{1} << 40}, out(16);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(xv, DType::kI64, {2, 2, 2})), Bindings(Bind(out, DType::kI64, {2, 2, 4}))).ok());
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(out[r * 4 + 0], xv[r * 2] + 1);
    EXPECT_EQ(out[r * 4 + 1], xv[r * 2 + 1] + 1);
    EXPECT_EQ(out[r * 4 + 2], xv[r * 2] * 2);
    EXPECT_EQ(out[r * 4 + 3], xv[r * 2 + 1] * 2);
  }
}

TEST(ConcatenateTest, DenseColumnsThreaded) {
  // Index vectors as the lowerings build them: one-element i64 columns of 40000 rows (threaded),
  // and i32 pieces of 1 and 3 elements.
  const int64_t R = 40000;
  std::vector<int64_t> a(R), c(R);
  std::vector<int32_t> p(R), q(3 * R);
  for (int64_t r = 0; r < R; ++r) a[r] = r, c[r] = -r * 7, p[r] = static_cast<int32_t>(r);
  for (int64_t i = 0; i < 3 * R; ++i) q[i] = static_cast<int32_t>(-i);
  Builder b;
  int x = b.Param(T(DType::kI64, {R, 1})), y = b.Param(T(DType::kI64, {R, 1}));
  int u = b.Param(T(DType::kI32, {R, 1})), v = b.Param(T(DType::kI32, {R, 3}));
  b.Result(b.Concatenate({x, y, x}, 1));
  b.Result(b.Concatenate({v, u}, 1));
  std::vector<int64_t> o1(3 * R);
  std::vector<int32_t> o2(4 * R);
  ASSERT_TRUE(RunProgram(b,
                         Bindings(Bind(a, DType::kI64, {R, 1}), Bind(c, DType::kI64, {R, 1}),
                                  Bind(p, DType::kI32, {R, 1}), Bind(q, DType::kI32, {R, 3})),
                         Bindings(Bind(o1, DType::kI64, {R, 3}), Bind(o2, DType::kI32, {R, 4})))
                  .ok());
  for (int64_t r = 0; r < R; ++r) {
    ASSERT_EQ(o1[r * 3], a[r]);
    ASSERT_EQ(o1[r * 3 + 1], c[r]);
    ASSERT_EQ(o1[r * 3 + 2], a[r]);
    for (int k = 0; k < 3; ++k) ASSERT_EQ(o2[r * 4 + k], q[r * 3 + k]);
    ASSERT_EQ(o2[r * 4 + 3], p[r]);
  }
}

TEST(ConcatenateTest, ManyShortRowsAndAConvertingCopy) {
  // Note [Row tiles] in copies: pieces of 3 and 5 elements over 7 * 3001 rows (threaded, a partial
  // last tile), one of them a transposed view (loaded row by row); and a bf16 round trip.
  const int64_t A = 7, R = 3001;
  std::vector<float> a(A * R * 3), c(5 * R * A);  // c holds [5, R, A]: read as its [A, R, 5] transpose
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i);
  for (size_t i = 0; i < c.size(); ++i) c[i] = -static_cast<float>(i);
  Builder b;
  int x = b.Param(T(F, {A, R, 3}));
  int y = b.Param(T(F, {A, R, 5}));
  b.Result(b.Concatenate({x, y}, 2));
  b.Result(b.Convert(b.Convert(x, DType::kBF16), F));
  std::vector<float> out(A * R * 8), round(A * R * 3);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(a, F, {A, R, 3}), Bind(c, F, {A, R, 5}, {1, A, R * A})),
                         Bindings(Bind(out, F, {A, R, 8}), Bind(round, F, {A, R, 3})))
                  .ok());
  for (int64_t i = 0; i < A; ++i)
    for (int64_t r = 0; r < R; ++r) {
      for (int64_t k = 0; k < 3; ++k) ASSERT_EQ(out[(i * R + r) * 8 + k], a[(i * R + r) * 3 + k]);
      for (int64_t k = 0; k < 5; ++k) ASSERT_EQ(out[(i * R + r) * 8 + 3 + k], c[k * R * A + r * A + i]);
    }
  for (size_t i = 0; i < a.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &a[i], 4);
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000u;  // round to nearest even, as bf16
    float want;
    std::memcpy(&want, &bits, 4);
    ASSERT_EQ(round[i], want) << i;
  }
}

TEST(IotaTest, EachDimAndDType) {
  Builder b;
  b.Result(b.Iota(T(DType::kI32, {3, 4}), 0));
  b.Result(b.Iota(T(DType::kI64, {3, 4}), 1));
  int f = b.Iota(T(F, {2, 3, 2}), 1);
  b.Result(b.Binary(OpCode::kMultiply, f, b.ScalarLike(0.5, f)));
  std::vector<int32_t> o0(12);
  std::vector<int64_t> o1(12);
  std::vector<float> o2(12);
  ASSERT_TRUE(RunProgram(b, {}, Bindings(Bind(o0, DType::kI32, {3, 4}), Bind(o1, DType::kI64, {3, 4}), Bind(o2, F, {2, 3, 2}))).ok());
  EXPECT_EQ(o0, (std::vector<int32_t>{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2}));
  EXPECT_EQ(o1, (std::vector<int64_t>{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}));
  EXPECT_EQ(o2, (std::vector<float>{0, 0, 0.5f, 0.5f, 1, 1, 0, 0, 0.5f, 0.5f, 1, 1}));
}

TEST(IotaTest, LargeOutputsAreThreaded) {
  const int64_t A = 700, B = 300;  // above the threading threshold
  Builder b;
  b.Result(b.Iota(T(DType::kI64, {A, B}), 1));
  b.Result(b.Iota(T(DType::kI16, {A, B}), 0));  // wraps at 2^15 like a cast: 700 fits
  std::vector<int64_t> o0(A * B);
  std::vector<int16_t> o1(A * B);
  ASSERT_TRUE(RunProgram(b, {}, Bindings(Bind(o0, DType::kI64, {A, B}), Bind(o1, DType::kI16, {A, B}))).ok());
  for (int64_t i = 0; i < A * B; ++i) {
    ASSERT_EQ(o0[i], i % B) << i;
    ASSERT_EQ(o1[i], i / B) << i;
  }
}

TEST(IotaTest, ACompactIotaIsReadAsABroadcast) {
  // Note [Compact iota]: the temp holds one run; a region (one-hot compare), a kernel (a reduce)
  // and a reshape that must copy read it as the full tensor.
  const int64_t A = 300, B = 257;
  Builder b;
  int t = b.Param(T(DType::kI64, {A}));
  int io = b.Iota(T(DType::kI64, {A, B}), 1);
  int hit = b.Compare(CompareDirection::kEQ, io, b.BroadcastInDim(t, {A, B}, {0}));
  b.Result(b.Select(hit, b.BroadcastTo(b.Constant(1.0, F), {A, B}), b.BroadcastTo(b.Constant(0.0, F), {A, B})));
  b.Result(b.Reduce(io, b.Constant(0, DType::kI64), {0}, ReduceKind::kAdd));
  b.Result(b.Reshape(b.Transpose(io, {1, 0}), {A * B}));
  std::vector<int64_t> tv(A), sums(B), flat(A * B);
  for (int64_t i = 0; i < A; ++i) tv[i] = (i * 7) % B;
  std::vector<float> onehot(A * B);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(tv, DType::kI64, {A})),
                         Bindings(Bind(onehot, F, {A, B}), Bind(sums, DType::kI64, {B}), Bind(flat, DType::kI64, {A * B}))).ok());
  for (int64_t i = 0; i < A; ++i)
    for (int64_t j = 0; j < B; ++j) ASSERT_EQ(onehot[i * B + j], j == tv[i] ? 1.0f : 0.0f) << i << "," << j;
  for (int64_t j = 0; j < B; ++j) EXPECT_EQ(sums[j], j * A);
  for (int64_t k = 0; k < A * B; ++k) ASSERT_EQ(flat[k], k / A) << k;
}

TEST(ConstantTest, ScalarsOfEachDType) {
  Builder b;
  b.Result(b.Constant(-2.5, F));
  b.Result(b.Constant(1.0 / 3.0, DType::kBF16));
  b.Result(b.Constant(300, DType::kU8));
  b.Result(b.Constant(3, DType::kBool));
  b.Result(b.ScalarLike(4, b.Param(T(DType::kI16, {3}))));
  std::vector<float> f(1);
  std::vector<uint16_t> h(1);
  std::vector<uint8_t> u(1), p(1);
  std::vector<int16_t> s(3);
  std::vector<int16_t> dummy(3);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(dummy, DType::kI16, {3})),
                         Bindings(Bind(f, F, {}), Bind(h, DType::kBF16, {}), Bind(u, DType::kU8, {}),
                                  Bind(p, DType::kBool, {}), Bind(s, DType::kI16, {3})))
                  .ok());
  EXPECT_EQ(f[0], -2.5f);
  EXPECT_EQ(h[0], ToBf16(1.0f / 3.0f));
  EXPECT_EQ(u[0], 44);
  EXPECT_EQ(p[0], 1);
  EXPECT_EQ(s, (std::vector<int16_t>{4, 4, 4}));
}

}  // namespace
}  // namespace tpu::host::testing
