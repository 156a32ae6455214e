// Fused elementwise chains through the host executor, checked against plain loops.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "base/options.h"
#include "runtime/host/half.h"
#include "runtime/host/host_test_util.h"
#include "runtime/host/kernels.h"

namespace tpu::host::testing {
namespace {

template <typename T> constexpr DType kDType = DType::kF32;
template <> constexpr DType kDType<double> = DType::kF64;
template <> constexpr DType kDType<int32_t> = DType::kI32;
template <> constexpr DType kDType<int64_t> = DType::kI64;

template <typename T>
T Value(int64_t i, int salt) {
  if constexpr (std::is_same_v<T, int64_t>) return int64_t{3000000000} + i * (salt + 1) - 40;
  if constexpr (std::is_integral_v<T>) return static_cast<T>((i * 37 + salt * 11) % 101 - 50);
  return static_cast<T>(std::sin(static_cast<double>(i) * 0.7 + salt) * 3.1);
}

template <typename T>
class FusedChainTest : public ::testing::Test {};
using ChainTypes = ::testing::Types<float, double, int32_t, int64_t>;
TYPED_TEST_SUITE(FusedChainTest, ChainTypes);

// r1 = (a + b) * broadcast(k);  r2 = max(r1 - a, b)  (two outputs of one region)
TYPED_TEST(FusedChainTest, AddMulSubMax) {
  using V = TypeParam;
  const DType dt = kDType<V>;
  for (Dims dims : {Dims{3, 5}, Dims{1}, Dims{}, Dims{300, 257}}) {
    SCOPED_TRACE(DimsToString(dims));
    Builder b;
    int a = b.Param(T(dt, dims));
    int c = b.Param(T(dt, dims));
    int k = b.Param(T(dt, {}));
    int kb = b.BroadcastInDim(k, dims, {});
    int r1 = b.Binary(OpCode::kMultiply, b.Binary(OpCode::kAdd, a, c), kb);
    int r2 = b.Binary(OpCode::kMaximum, b.Binary(OpCode::kSubtract, r1, a), c);
    b.Result(r1);
    b.Result(r2);
    int64_t n = T(dt, dims).NumElements();
    std::vector<V> av(n), cv(n), o1(n), o2(n);
    for (int64_t i = 0; i < n; ++i) {
      av[i] = Value<V>(i, 0);
      cv[i] = Value<V>(i, 1);
    }
    std::vector<V> kv = {static_cast<V>(3)};
    ASSERT_TRUE(RunProgram(b, Bindings(Bind(av, dt, dims), Bind(cv, dt, dims), Bind(kv, dt, {})),
                    Bindings(Bind(o1, dt, dims), Bind(o2, dt, dims)))
                    .ok());
    for (int64_t i = 0; i < n; ++i) {
      V e1 = static_cast<V>((av[i] + cv[i]) * kv[0]);
      V d = static_cast<V>(e1 - av[i]);
      V e2 = d > cv[i] ? d : cv[i];
      ASSERT_EQ(o1[i], e1) << i;
      ASSERT_EQ(o2[i], e2) << i;
    }
  }
}

// Note [Transposing copies]: a permuted source copied contiguously goes in blocks; sizes that
// are not multiples of the block, every element size the path takes (4, 8, 2 bytes), large
// enough to thread.
template <typename E>
void CheckTransposingCopy(const Dims& dims, const std::vector<int>& perm) {
  // The source: a contiguous array of the permuted dims, viewed back in `dims` order.
  Dims pd, ps(dims.size());
  for (int d : perm) pd.push_back(dims[d]);
  const Dims pstr = ContiguousStrides(pd);
  for (size_t i = 0; i < perm.size(); ++i) ps[perm[i]] = pstr[i];
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<E> mem(n), out(n, 0);
  for (int64_t i = 0; i < n; ++i) mem[i] = static_cast<E>(i * 2654435761u);
  const Dims cs = ContiguousStrides(dims);
  // The blocked path itself (CopyView takes it for these layouts and sizes).
  ASSERT_TRUE(CopyTransposed(reinterpret_cast<const char*>(mem.data()), reinterpret_cast<char*>(out.data()),
                             static_cast<int>(sizeof(E)), dims, ps, cs));
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < dims.size(); ++d) off += (i / cs[d]) % dims[d] * ps[d];
    ASSERT_EQ(out[i], mem[off]) << DimsToString(dims) << " at " << i;
  }
}

TEST(ElementwiseTest, TransposingCopiesMatchTheDefinition) {
  CheckTransposingCopy<uint32_t>({3, 70, 333}, {0, 2, 1});
  CheckTransposingCopy<uint32_t>({4, 33, 5, 130}, {0, 3, 1, 2});  // the source runs along dim 2
  CheckTransposingCopy<uint64_t>({300, 250}, {1, 0});
  CheckTransposingCopy<uint16_t>({6, 129, 101}, {2, 0, 1});
}

// A copy whose source is one value along its runs (a scatter's zeros, a broadcast row) fills:
// every element size, a converting copy (f32 -> bf16 rounds, f32 -> bool is != 0), a
// non-zero pattern, a strided destination, and short rows (row tiles).
TEST(ElementwiseTest, BroadcastCopiesFill) {
  {
    std::vector<float> v = {1.00390625f};  // a bf16 tie: rounds to even (1)
    std::vector<uint16_t> out(3 * 5000, 7);
    ASSERT_TRUE(CopyView(View{v.data(), DType::kF32, {3, 5000}, {0, 0}}, View{out.data(), DType::kBF16, {3, 5000}, {5000, 1}}).ok());
    for (uint16_t h : out) ASSERT_EQ(h, ToBf16(1.0f));
  }
  {
    std::vector<float> v = {-0.5f};
    std::vector<uint8_t> out(40, 0);
    ASSERT_TRUE(CopyView(View{v.data(), DType::kF32, {40}, {0}}, View{out.data(), DType::kBool, {40}, {1}}).ok());
    for (uint8_t b : out) ASSERT_EQ(b, 1);
  }
  {
    std::vector<int64_t> v = {0, 0, 0, -3};  // one value per row of 3 (a per-row broadcast)
    std::vector<int64_t> out(4 * 3 * 2, 99);   // every other element of a row (strided)
    ASSERT_TRUE(CopyView(View{v.data(), DType::kI64, {4, 3}, {1, 0}}, View{out.data(), DType::kI64, {4, 3}, {6, 2}}).ok());
    for (int64_t r = 0; r < 4; ++r)
      for (int64_t j = 0; j < 6; ++j) ASSERT_EQ(out[r * 6 + j], j % 2 ? 99 : v[r]) << r << "," << j;
  }
  {
    std::vector<int16_t> v = {0x0102};
    std::vector<int16_t> out(70001, 0);
    ASSERT_TRUE(CopyView(View{v.data(), DType::kI16, {70001}, {0}}, View{out.data(), DType::kI16, {70001}, {1}}).ok());
    for (int16_t h : out) ASSERT_EQ(h, 0x0102);
    std::vector<double> z = {0.0};
    std::vector<double> dz(1000, 5.0);
    ASSERT_TRUE(CopyView(View{z.data(), DType::kF64, {10, 100}, {0, 0}}, View{dz.data(), DType::kF64, {10, 100}, {100, 1}}).ok());
    for (double d : dz) ASSERT_EQ(d, 0.0);
  }
}

// Copies of rows of a few words (4 to 64 bytes) go in registers: rows gathered from every
// other row of the source, for element sizes 2, 4 and 8.
template <typename E>
void CheckShortRowCopy(int64_t rows, int64_t inner) {
  std::vector<E> src(rows * 2 * inner), dst(rows * inner, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<E>(i * 7 + 1);
  const DType t = sizeof(E) == 2 ? DType::kI16 : sizeof(E) == 4 ? DType::kF32 : DType::kF64;
  ASSERT_TRUE(CopyView(View{src.data(), t, {rows, inner}, {2 * inner, 1}}, View{dst.data(), t, {rows, inner}, {inner, 1}}).ok());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < inner; ++j) ASSERT_EQ(dst[r * inner + j], src[r * 2 * inner + j]) << r << "," << j;
}

TEST(ElementwiseTest, ShortRowCopies) {
  CheckShortRowCopy<int16_t>(301, 2);  // 4 bytes
  CheckShortRowCopy<float>(3000, 5);   // 20: 16 + 4
  CheckShortRowCopy<float>(77, 16);    // 64
  CheckShortRowCopy<double>(40, 3);    // 24
  CheckShortRowCopy<float>(50, 17);    // 68: the library copy
}

// Note [Tile length]: a region's tile grows with fewer stored values. Chains of 1, 3 and 12 ops
// (tiles of 16384, 4096 / 1280 and 256 elements), each over a size that ends in a partial tile,
// with inputs read in place, broadcast along rows, broadcast along the tile, and transposed (the
// last two are loaded into storage).
TEST(ElementwiseTest, TileLengthsFollowStoredValues) {
  const DType F = DType::kF32;
  const Dims dims = {7, 40003};
  const int64_t rows = dims[0], cols = dims[1], n = rows * cols;
  std::vector<float> a(n), row(cols), col(rows), at(n);
  for (int64_t i = 0; i < n; ++i) a[i] = static_cast<float>(std::sin(i * 0.37) * 2.0);
  for (int64_t j = 0; j < cols; ++j) row[j] = static_cast<float>(std::cos(j * 0.11));
  for (int64_t r = 0; r < rows; ++r) col[r] = 0.25f * static_cast<float>(r + 1);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) at[j * rows + r] = a[r * cols + j] * 0.5f;  // [cols, rows]
  for (int ops : {1, 3, 12}) {
    SCOPED_TRACE(ops);
    Builder b;
    int pa = b.Param(T(F, dims));
    int prow = b.Param(T(F, {cols}));
    int pcol = b.Param(T(F, {rows}));
    int pat = b.Param(T(F, {cols, rows}));
    int v = b.Unary(OpCode::kAbs, pa);
    if (ops >= 3) {
      v = b.Binary(OpCode::kAdd, v, b.BroadcastInDim(prow, dims, {1}));
      v = b.Binary(OpCode::kMultiply, v, b.BroadcastInDim(pcol, dims, {0}));
    }
    for (int k = 3; k < ops; k += 3) {
      v = b.Binary(OpCode::kSubtract, v, b.Transpose(pat, {1, 0}));
      v = b.Binary(OpCode::kMaximum, v, pa);
      v = b.Unary(OpCode::kNegate, v);
    }
    b.Result(v);
    std::vector<float> out(n);
    ASSERT_TRUE(RunProgram(b, Bindings(Bind(a, F, dims), Bind(row, F, {cols}), Bind(col, F, {rows}), Bind(at, F, {cols, rows})),
                           Bindings(Bind(out, F, dims)))
                    .ok());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < cols; ++j) {
        int64_t i = r * cols + j;
        float e = std::fabs(a[i]);
        if (ops >= 3) e = (e + row[j]) * col[r];
        for (int k = 3; k < ops; k += 3) e = -std::max(e - at[j * rows + r], a[i]);
        ASSERT_EQ(out[i], e) << "row " << r << " col " << j;
      }
  }
}

// Note [Row tiles]: rows of 4 and 7 (a per-channel operand over NCHW with small H * W does not
// merge the last two dims) run as tiles of many rows: in-place inputs, per-row broadcasts (spread
// over their rows in one call), one row broadcast over all others (laid out once per call), a
// transposed input and a transposed output (loaded / stored row by row). Rows of 16 and 256 take
// row tiles for their per-row operand, rows of 257 and 1000 do not. Float and double
// (registers of 4 and 8 bytes); sizes that thread and that end in a partial tile.
template <typename V>
void CheckRowTiles(Dims dims) {
  const DType dt = kDType<V>;
  const int64_t A = dims[0], C = dims[1], HW = dims[2], n = A * C * HW;
  std::vector<V> x(n), c(C), rt(n), w(HW), y(n), z(n);
  for (int64_t i = 0; i < n; ++i) x[i] = Value<V>(i, 0);
  for (int64_t i = 0; i < C; ++i) c[i] = Value<V>(i, 1);
  for (int64_t i = 0; i < n; ++i) rt[i] = Value<V>(i, 2);  // [HW, C, A]
  for (int64_t i = 0; i < HW; ++i) w[i] = Value<V>(i, 3);  // one row over all the others
  Builder b;
  int px = b.Param(T(dt, dims));
  int pc = b.Param(T(dt, {C}));
  int prt = b.Param(T(dt, {HW, C, A}));
  int pw = b.Param(T(dt, {HW}));
  int cb = b.BroadcastInDim(pc, dims, {1});
  int v = b.Binary(OpCode::kMultiply, b.Binary(OpCode::kSubtract, px, cb), cb);
  v = b.Binary(OpCode::kAdd, v, b.BroadcastInDim(pw, dims, {2}));
  int out1 = b.Binary(OpCode::kAdd, v, b.Transpose(prt, {2, 1, 0}));
  b.Result(out1);
  b.Result(b.Binary(OpCode::kMultiply, out1, out1));
  // z is written transposed: element (a, ch, h) at h * C * A + ch * A + a.
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(x, dt, dims), Bind(c, dt, {C}), Bind(rt, dt, {HW, C, A}), Bind(w, dt, {HW})),
                         Bindings(Bind(y, dt, dims), Bind(z, dt, dims, {1, A, C * A})))
                  .ok());
  for (int64_t a = 0; a < A; ++a)
    for (int64_t ch = 0; ch < C; ++ch)
      for (int64_t h = 0; h < HW; ++h) {
        int64_t i = (a * C + ch) * HW + h, t = (h * C + ch) * A + a;
        V e = static_cast<V>(static_cast<V>(static_cast<V>(x[i] - c[ch]) * c[ch]) + w[h]);
        e = static_cast<V>(e + rt[t]);
        ASSERT_EQ(y[i], e) << a << " " << ch << " " << h;
        ASSERT_EQ(z[t], static_cast<V>(e * e)) << a << " " << ch << " " << h;
      }
}

TEST(ElementwiseTest, RowTilesForShortRows) {
  for (Dims dims : {Dims{3, 5, 4}, Dims{16, 256, 4}, Dims{7, 1001, 7}, Dims{4, 9, 16}, Dims{5, 7, 256},
                    Dims{3, 4, 257}, Dims{3, 4, 1000}}) {
    SCOPED_TRACE(DimsToString(dims));
    CheckRowTiles<float>(dims);
    CheckRowTiles<double>(dims);
  }
}

TEST(ElementwiseTest, IntegerDivisionTruncates) {
  Builder b;
  int a = b.Param(T(DType::kI32, {6}));
  int c = b.Param(T(DType::kI32, {6}));
  b.Result(b.Binary(OpCode::kDivide, a, c));
  b.Result(b.Binary(OpCode::kRemainder, a, c));
  std::vector<int32_t> av = {-7, 7, -7, 7, std::numeric_limits<int32_t>::min(), 9};
  std::vector<int32_t> cv = {2, -2, -2, 2, -1, 3};
  std::vector<int32_t> q(6), r(6);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(av, DType::kI32, {6}), Bind(cv, DType::kI32, {6})),
                  Bindings(Bind(q, DType::kI32, {6}), Bind(r, DType::kI32, {6})))
                  .ok());
  EXPECT_EQ(q, (std::vector<int32_t>{-3, -3, 3, 3, std::numeric_limits<int32_t>::min(), 3}));
  EXPECT_EQ(r, (std::vector<int32_t>{-1, 1, -1, 1, 0, 0}));
}

TEST(ElementwiseTest, Bf16RoundsAfterEveryOp) {
  const Dims dims = {4, 33};
  const int64_t n = 4 * 33;
  Builder b;
  int a = b.Param(T(DType::kBF16, dims));
  int c = b.Param(T(DType::kBF16, dims));
  int s = b.Binary(OpCode::kAdd, a, c);
  int m = b.Binary(OpCode::kMultiply, s, a);
  int d = b.Binary(OpCode::kDivide, m, c);
  b.Result(d);
  b.Result(b.Convert(s, DType::kF32));  // f32 view of an intermediate bf16 value
  std::vector<uint16_t> av(n), cv(n), out(n);
  std::vector<float> sf(n);
  for (int64_t i = 0; i < n; ++i) {
    av[i] = ToBf16(1.1f + 0.37f * static_cast<float>(i));
    cv[i] = ToBf16(0.3f - 0.013f * static_cast<float>(i * i % 50));
  }
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(av, DType::kBF16, dims), Bind(cv, DType::kBF16, dims)),
                  Bindings(Bind(out, DType::kBF16, dims), Bind(sf, DType::kF32, dims)))
                  .ok());
  for (int64_t i = 0; i < n; ++i) {
    float x = FromBf16(av[i]), y = FromBf16(cv[i]);
    float e_s = RoundBf16(x + y);
    float e_m = RoundBf16(e_s * x);
    uint16_t e_d = ToBf16(e_m / y);
    ASSERT_EQ(out[i], e_d) << i << ": " << FromBf16(out[i]) << " vs " << FromBf16(e_d);
    ASSERT_EQ(sf[i], e_s) << i;
  }
}

TEST(ElementwiseTest, Bf16TiesRoundToEven) {
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7 (even: 1); 1 + 3*2^-8 lies halfway between
  // 1 + 2^-7 (odd) and 1 + 2^-6 (even).
  Builder b;
  int a = b.Param(T(DType::kBF16, {3}));
  int c = b.Param(T(DType::kF32, {3}));
  b.Result(b.Binary(OpCode::kAdd, a, b.Convert(c, DType::kBF16)));
  b.Result(b.Convert(c, DType::kBF16));
  std::vector<uint16_t> av = {ToBf16(1.0f), ToBf16(1.0078125f), ToBf16(-1.0f)};
  std::vector<float> cv = {0.00390625f, 1.01171875f, -0.00390625f};
  std::vector<uint16_t> out(3), conv(3);
  // convert(c) rounds c itself: 2^-8 is exact; 1.01171875 is a tie -> 1.015625; -2^-8 exact.
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(av, DType::kBF16, {3}), Bind(cv, DType::kF32, {3})),
                  Bindings(Bind(out, DType::kBF16, {3}), Bind(conv, DType::kBF16, {3})))
                  .ok());
  EXPECT_EQ(FromBf16(conv[0]), 0.00390625f);
  EXPECT_EQ(FromBf16(conv[1]), 1.015625f);
  EXPECT_EQ(FromBf16(out[0]), 1.0f);          // 1.00390625 -> 1 (even)
  // 1.0078125 + 1.015625 = 2.0234375, halfway between 2.015625 (odd) and 2.03125 (even)
  EXPECT_EQ(FromBf16(out[1]), 2.03125f);
  EXPECT_EQ(FromBf16(out[2]), -1.0f);         // -1.00390625 -> -1 (even)
}

TEST(ElementwiseTest, NarrowingConvertsRoundAtTheStore) {
  // Converts to bf16 and f16 whose values only leave the region (Note [Converts the store
  // rounds]): ties round to even, NaN stays NaN, overflow goes to inf, as a convert would round;
  // a third output reads the bf16 value inside the region too, so that convert keeps its own pass.
  const int64_t n = 300;  // more than a vector, with a tail
  Builder b;
  int a = b.Param(T(DType::kF32, {n}));
  int c = b.Param(T(DType::kF32, {n}));
  int s = b.Binary(OpCode::kAdd, a, c);
  b.Result(b.Convert(s, DType::kBF16));
  b.Result(b.Convert(b.Binary(OpCode::kMultiply, a, c), DType::kF16));
  int shared = b.Convert(b.Binary(OpCode::kSubtract, a, c), DType::kBF16);
  b.Result(shared);
  b.Result(b.Binary(OpCode::kMultiply, shared, shared));
  std::vector<float> av(n), cv(n);
  for (int64_t i = 0; i < n; ++i) {
    av[i] = 1.0f + static_cast<float>(i % 17) * 0.0078125f;  // multiples of 2^-7
    cv[i] = (i % 3 == 0 ? 0.00390625f : -0.01171875f) * static_cast<float>(1 + i % 5);  // ties
  }
  av[7] = std::numeric_limits<float>::quiet_NaN();
  av[11] = 3e38f;  // a + c rounds to bf16's largest finite or inf as the convert would; a * c overflows f16
  std::vector<uint16_t> sum(n), diff(n), sq(n);
  std::vector<Half> prod(n);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(av, DType::kF32, {n}), Bind(cv, DType::kF32, {n})),
                  Bindings(Bind(sum, DType::kBF16, {n}), Bind(prod, DType::kF16, {n}), Bind(diff, DType::kBF16, {n}),
                           Bind(sq, DType::kBF16, {n})))
                  .ok());
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(sum[i], ToBf16(av[i] + cv[i])) << i;
    const float p = static_cast<float>(static_cast<Half>(av[i] * cv[i]));
    const float got = static_cast<float>(prod[i]);
    if (std::isnan(p)) ASSERT_TRUE(std::isnan(got)) << i;
    else ASSERT_EQ(got, p) << i;
    const float d = RoundBf16(av[i] - cv[i]);
    ASSERT_EQ(diff[i], ToBf16(d)) << i;
    ASSERT_EQ(sq[i], ToBf16(d * d)) << i;
  }
}

TEST(ElementwiseTest, U8WrapsAround) {
  const int64_t n = 6;
  Builder b;
  int a = b.Param(T(DType::kU8, {n}));
  int c = b.Param(T(DType::kU8, {n}));
  int i32 = b.Param(T(DType::kI32, {n}));
  b.Result(b.Binary(OpCode::kAdd, a, c));
  b.Result(b.Binary(OpCode::kSubtract, a, c));
  b.Result(b.Binary(OpCode::kMultiply, a, c));
  b.Result(b.Convert(i32, DType::kU8));
  b.Result(b.Binary(OpCode::kAdd, b.Binary(OpCode::kMultiply, a, a), c));  // wraps between ops
  std::vector<uint8_t> av = {200, 255, 5, 0, 128, 17}, cv = {100, 1, 10, 255, 2, 17};
  std::vector<int32_t> iv = {300, -1, 256, 255, -256, 1000};
  std::vector<uint8_t> add(n), sub(n), mul(n), conv(n), chain(n);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(av, DType::kU8, {n}), Bind(cv, DType::kU8, {n}), Bind(iv, DType::kI32, {n})),
                  Bindings(Bind(add, DType::kU8, {n}), Bind(sub, DType::kU8, {n}), Bind(mul, DType::kU8, {n}),
                           Bind(conv, DType::kU8, {n}), Bind(chain, DType::kU8, {n})))
                  .ok());
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(add[i], static_cast<uint8_t>(av[i] + cv[i])) << i;
    EXPECT_EQ(sub[i], static_cast<uint8_t>(av[i] - cv[i])) << i;
    EXPECT_EQ(mul[i], static_cast<uint8_t>(av[i] * cv[i])) << i;
    EXPECT_EQ(conv[i], static_cast<uint8_t>(iv[i])) << i;
    EXPECT_EQ(chain[i], static_cast<uint8_t>(static_cast<uint8_t>(av[i] * av[i]) + cv[i])) << i;
  }
  EXPECT_EQ(add[0], 44);
  EXPECT_EQ(sub[2], 251);
  EXPECT_EQ(conv[0], 44);
  EXPECT_EQ(conv[1], 255);
}

TEST(ElementwiseTest, BoolCompareAndSelect) {
  const int64_t n = 7;
  Builder b;
  int a = b.Param(T(DType::kF32, {n}));
  int c = b.Param(T(DType::kF32, {n}));
  int flag = b.Param(T(DType::kBool, {n}));
  int lt = b.Compare(CompareDirection::kLT, a, c);
  int eq = b.Compare(CompareDirection::kEQ, a, c);
  b.Result(lt);
  b.Result(b.Select(lt, a, c));  // elementwise min
  b.Result(b.Binary(OpCode::kOr, b.Binary(OpCode::kAnd, lt, flag), eq));
  b.Result(b.Unary(OpCode::kNot, flag));
  b.Result(b.Select(flag, b.ScalarLike(1.5, a), a));
  std::vector<float> av = {1, 2, 3, -1, NAN, 0, -0.0f}, cv = {2, 2, 1, -2, 0, NAN, 0.0f};
  std::vector<uint8_t> fv = {1, 0, 1, 1, 1, 0, 1};
  std::vector<uint8_t> o_lt(n, 7), o_logic(n, 7), o_not(n, 7);
  std::vector<float> o_min(n), o_sel(n);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(av, DType::kF32, {n}), Bind(cv, DType::kF32, {n}), Bind(fv, DType::kBool, {n})),
                  Bindings(Bind(o_lt, DType::kBool, {n}), Bind(o_min, DType::kF32, {n}),
                           Bind(o_logic, DType::kBool, {n}), Bind(o_not, DType::kBool, {n}),
                           Bind(o_sel, DType::kF32, {n})))
                  .ok());
  EXPECT_EQ(o_lt, (std::vector<uint8_t>{1, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(o_logic, (std::vector<uint8_t>{1, 1, 0, 0, 0, 0, 1}));  // (lt && flag) || eq; -0 == 0
  EXPECT_EQ(o_not, (std::vector<uint8_t>{0, 1, 0, 0, 0, 1, 0}));
  for (int64_t i = 0; i < n; ++i) {
    float e = av[i] < cv[i] ? av[i] : cv[i];
    if (std::isnan(e)) EXPECT_TRUE(std::isnan(o_min[i])) << i;
    else EXPECT_EQ(o_min[i], e) << i;
    float s = fv[i] ? 1.5f : av[i];
    if (std::isnan(s)) EXPECT_TRUE(std::isnan(o_sel[i])) << i;
    else EXPECT_EQ(o_sel[i], s) << i;
  }
}

TEST(ElementwiseTest, CompareIntegersAndBf16) {
  Builder b;
  int a = b.Param(T(DType::kI64, {4}));
  int c = b.Param(T(DType::kI64, {4}));
  int x = b.Param(T(DType::kBF16, {4}));
  int y = b.Param(T(DType::kBF16, {4}));
  b.Result(b.Compare(CompareDirection::kGE, a, c));
  b.Result(b.Compare(CompareDirection::kNE, x, y));
  std::vector<int64_t> av = {int64_t{1} << 40, -5, 7, 0}, cv = {(int64_t{1} << 40) + 1, -5, 6, -1};
  std::vector<uint16_t> xv = {ToBf16(1), ToBf16(2), ToBf16(-3), ToBf16(0)};
  std::vector<uint16_t> yv = {ToBf16(1), ToBf16(2.5f), ToBf16(-3), ToBf16(-0.0f)};
  std::vector<uint8_t> ge(4), ne(4);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(av, DType::kI64, {4}), Bind(cv, DType::kI64, {4}),
                              Bind(xv, DType::kBF16, {4}), Bind(yv, DType::kBF16, {4})),
                  Bindings(Bind(ge, DType::kBool, {4}), Bind(ne, DType::kBool, {4})))
                  .ok());
  EXPECT_EQ(ge, (std::vector<uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(ne, (std::vector<uint8_t>{0, 1, 0, 0}));
}

TEST(ElementwiseTest, U32IsUnsigned) {
  // ui32 values at and above 2^31 (e.g. random bits) compare, convert and divide as unsigned.
  Builder b;
  int a = b.Param(T(DType::kU32, {4}));
  int c = b.Param(T(DType::kU32, {4}));
  b.Result(b.Compare(CompareDirection::kGT, a, c));
  b.Result(b.Convert(a, DType::kF64));
  b.Result(b.Binary(OpCode::kDivide, a, c));
  b.Result(b.Binary(OpCode::kAdd, a, a));  // wraps modulo 2^32
  b.Result(b.Binary(OpCode::kMaximum, a, c));
  std::vector<uint32_t> av = {0x80000000u, 0xFFFFFFFFu, 5, 3000000000u}, cv = {1, 2, 7, 1000};
  std::vector<uint8_t> gt(4);
  std::vector<double> f(4);
  std::vector<uint32_t> q(4), s(4), mx(4);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(av, DType::kU32, {4}), Bind(cv, DType::kU32, {4})),
                  Bindings(Bind(gt, DType::kBool, {4}), Bind(f, DType::kF64, {4}), Bind(q, DType::kU32, {4}),
                           Bind(s, DType::kU32, {4}), Bind(mx, DType::kU32, {4})))
                  .ok());
  EXPECT_EQ(gt, (std::vector<uint8_t>{1, 1, 0, 1}));
  EXPECT_EQ(f, (std::vector<double>{2147483648.0, 4294967295.0, 5.0, 3000000000.0}));
  EXPECT_EQ(q, (std::vector<uint32_t>{0x80000000u, 0x7FFFFFFFu, 0, 3000000u}));
  EXPECT_EQ(s, (std::vector<uint32_t>{0, 0xFFFFFFFEu, 10, 1705032704u}));
  EXPECT_EQ(mx, (std::vector<uint32_t>{0x80000000u, 0xFFFFFFFFu, 7, 3000000000u}));
}

TEST(ElementwiseTest, WideningConvertsInsideARegionKeepTheirValues) {
  // Note [Register-preserving converts]: u8 -> i32, u32 -> i64 and bf16 -> f32 read their
  // operand's register; the results are those of converting first.
  Builder b;
  int x = b.Param(T(DType::kU8, {5}));
  int u = b.Param(T(DType::kU32, {5}));
  int h = b.Param(T(DType::kBF16, {5}));
  int xi = b.Convert(x, DType::kI32);
  b.Result(xi);
  b.Result(b.Binary(OpCode::kMultiply, xi, b.ScalarLike(3, xi)));
  int ui = b.Convert(u, DType::kI64);
  b.Result(b.Binary(OpCode::kAdd, ui, b.ScalarLike(1, ui)));
  int hf = b.Convert(h, DType::kF32);
  b.Result(b.Binary(OpCode::kMultiply, hf, hf));
  std::vector<uint8_t> xv = {0, 7, 200, 255, 1};
  std::vector<uint32_t> uv = {0, 4294967295u, 123, 2147483648u, 5};
  std::vector<uint16_t> hv = {ToBf16(1.5f), ToBf16(-3.0f), ToBf16(0.1f), ToBf16(1e20f), ToBf16(2.0f)};
  std::vector<int32_t> o1(5), o2(5);
  std::vector<int64_t> o3(5);
  std::vector<float> o4(5);
  ASSERT_TRUE(RunProgram(b,
                         Bindings(Bind(xv, DType::kU8, {5}), Bind(uv, DType::kU32, {5}), Bind(hv, DType::kBF16, {5})),
                         Bindings(Bind(o1, DType::kI32, {5}), Bind(o2, DType::kI32, {5}), Bind(o3, DType::kI64, {5}),
                                  Bind(o4, DType::kF32, {5})))
                  .ok());
  for (int k = 0; k < 5; ++k) {
    EXPECT_EQ(o1[k], xv[k]) << k;
    EXPECT_EQ(o2[k], 3 * xv[k]) << k;
    EXPECT_EQ(o3[k], static_cast<int64_t>(uv[k]) + 1) << k;
    EXPECT_EQ(o4[k], FromBf16(hv[k]) * FromBf16(hv[k])) << k;
  }
}

TEST(ElementwiseTest, ConvertsBetweenClasses) {
  Builder b;
  int x = b.Param(T(DType::kF32, {6}));
  b.Result(b.Convert(x, DType::kI32));   // truncation toward zero
  b.Result(b.Convert(x, DType::kBool));  // != 0
  b.Result(b.Convert(x, DType::kF64));
  b.Result(b.Convert(b.Convert(x, DType::kI64), DType::kF32));
  std::vector<float> xv = {1.9f, -1.9f, 0.0f, 0.25f, -3e9f, 1e10f};
  std::vector<int32_t> i(6);
  std::vector<uint8_t> bo(6);
  std::vector<double> d(6);
  std::vector<float> back(6);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(xv, DType::kF32, {6})),
                  Bindings(Bind(i, DType::kI32, {6}), Bind(bo, DType::kBool, {6}), Bind(d, DType::kF64, {6}),
                           Bind(back, DType::kF32, {6})))
                  .ok());
  EXPECT_EQ(i[0], 1);
  EXPECT_EQ(i[1], -1);
  EXPECT_EQ(i[2], 0);
  EXPECT_EQ(i[3], 0);
  EXPECT_EQ(bo, (std::vector<uint8_t>{1, 1, 0, 1, 1, 1}));
  for (int k = 0; k < 6; ++k) EXPECT_EQ(d[k], static_cast<double>(xv[k])) << k;
  EXPECT_EQ(back, (std::vector<float>{1, -1, 0, 0, -3e9f, 1e10f}));
}

TEST(ElementwiseTest, TranscendentalsMatchLibm) {
  const int64_t n = 1000;
  Builder b;
  int x = b.Param(T(DType::kF32, {n}));
  int ax = b.Unary(OpCode::kAbs, x);
  b.Result(b.Unary(OpCode::kExp, x));
  b.Result(b.Unary(OpCode::kLog, ax));
  b.Result(b.Unary(OpCode::kTanh, x));
  b.Result(b.Unary(OpCode::kLogistic, x));
  b.Result(b.Unary(OpCode::kSqrt, ax));
  std::vector<float> xv(n);
  for (int64_t i = 0; i < n; ++i) xv[i] = -10.0f + 20.0f * static_cast<float>(i) / n + 0.001f;
  std::vector<float> e(n), l(n), t(n), s(n), q(n);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(xv, DType::kF32, {n})),
                  Bindings(Bind(e, DType::kF32, {n}), Bind(l, DType::kF32, {n}), Bind(t, DType::kF32, {n}),
                           Bind(s, DType::kF32, {n}), Bind(q, DType::kF32, {n})))
                  .ok());
  auto near = [](float got, double want) { return std::fabs(got - want) <= 4e-6 * std::fabs(want) + 1e-7; };
  for (int64_t i = 0; i < n; ++i) {
    double v = xv[i];
    ASSERT_TRUE(near(e[i], std::exp(v))) << v << ": " << e[i];
    ASSERT_TRUE(near(l[i], std::log(std::fabs(v)))) << v << ": " << l[i];
    ASSERT_TRUE(near(t[i], std::tanh(v))) << v << ": " << t[i];
    ASSERT_TRUE(near(s[i], 1.0 / (1.0 + std::exp(-v)))) << v << ": " << s[i];
    ASSERT_EQ(q[i], std::sqrt(std::fabs(xv[i]))) << v;
  }
}

}  // namespace
}  // namespace tpu::host::testing

namespace tpu::host::testing {
namespace {

// An elementwise op meeting a type it has no kernel for fails with Unimplemented naming the op
// and the type -- and writes nothing (it once filled zeros). Note [Unimplemented elementwise].
TEST(ElementwiseTest, UnimplementedCombinationsRaiseAndWriteNothing) {
  struct Case {
    OpCode code;
    DType dtype;
    bool binary;
  };
  for (Case c : {Case{OpCode::kExp, DType::kI32, false}, Case{OpCode::kLog1p, DType::kI64, false},
                 Case{OpCode::kSqrt, DType::kU8, false}, Case{OpCode::kNot, DType::kF32, false},
                 Case{OpCode::kAnd, DType::kF32, true}, Case{OpCode::kXor, DType::kF64, true},
                 Case{OpCode::kAtan2, DType::kI64, true}}) {
    SCOPED_TRACE(std::string(OpName(c.code)) + " on " + DTypeName(c.dtype));
    Builder b;
    int x = b.Param(T(c.dtype, {5}));
    // Fused with a supported op, so the region has work before the unsupported one.
    int y = b.Binary(OpCode::kAdd, x, x);
    b.Result(c.binary ? b.Binary(c.code, y, x) : b.Unary(c.code, y));
    std::vector<int64_t> in(5, 0), out(5, 0x5a5a5a5a5a5a5a5a);  // 8 bytes per element is enough
    Status s = RunProgram(b, Bindings(Bind(in.data(), c.dtype, {5})), Bindings(Bind(out.data(), c.dtype, {5})));
    EXPECT_EQ(s.code(), Code::kUnimplemented) << s.ToString();
    EXPECT_NE(s.message().find(OpName(c.code)), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(DTypeName(c.dtype)), std::string::npos) << s.message();
    for (int64_t v : out) EXPECT_EQ(v, 0x5a5a5a5a5a5a5a5a);
  }
}

TEST(ElementwiseTest, NotOnIntegersAndBool) {
  Builder b;
  int x = b.Param(T(DType::kU8, {3}));
  int p = b.Param(T(DType::kBool, {2}));
  b.Result(b.Unary(OpCode::kNot, x));
  b.Result(b.Unary(OpCode::kNot, p));
  std::vector<uint8_t> xv = {0, 5, 255}, pv = {0, 1}, o1(3), o2(2);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(xv, DType::kU8, {3}), Bind(pv, DType::kBool, {2})),
                         Bindings(Bind(o1, DType::kU8, {3}), Bind(o2, DType::kBool, {2})))
                  .ok());
  EXPECT_EQ(o1, (std::vector<uint8_t>{255, 250, 0}));
  EXPECT_EQ(o2, (std::vector<uint8_t>{1, 0}));
}

}  // namespace
}  // namespace tpu::host::testing

namespace tpu::host::testing {
namespace {

// Integer arithmetic wraps like PyTorch's (two's complement), without signed overflow, which C++
// leaves undefined (the ASan+UBSan run of scripts/sanitize.sh aborts on it).
TEST(ElementwiseTest, IntegerArithmeticWraps) {
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max(), kMin = std::numeric_limits<int32_t>::min();
  Builder b;
  int x = b.Param(T(DType::kI32, {3}));
  int y = b.Param(T(DType::kI32, {3}));
  b.Result(b.Binary(OpCode::kAdd, x, y));
  b.Result(b.Binary(OpCode::kSubtract, x, y));
  b.Result(b.Binary(OpCode::kMultiply, x, y));
  b.Result(b.Unary(OpCode::kNegate, x));
  b.Result(b.Unary(OpCode::kAbs, x));
  b.Result(b.Binary(OpCode::kPower, x, y));
  std::vector<int32_t> xv = {kMax, kMin, 65536}, yv = {1, 1, 3};
  std::vector<std::vector<int32_t>> o(6, std::vector<int32_t>(3));
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(xv, DType::kI32, {3}), Bind(yv, DType::kI32, {3})),
                         Bindings(Bind(o[0], DType::kI32, {3}), Bind(o[1], DType::kI32, {3}),
                                  Bind(o[2], DType::kI32, {3}), Bind(o[3], DType::kI32, {3}),
                                  Bind(o[4], DType::kI32, {3}), Bind(o[5], DType::kI32, {3})))
                  .ok());
  EXPECT_EQ(o[0], (std::vector<int32_t>{kMin, kMin + 1, 65539}));
  EXPECT_EQ(o[1], (std::vector<int32_t>{kMax - 1, kMax, 65533}));
  EXPECT_EQ(o[2], (std::vector<int32_t>{kMax, kMin, 196608}));
  EXPECT_EQ(o[3], (std::vector<int32_t>{-kMax, kMin, -65536}));
  EXPECT_EQ(o[4], (std::vector<int32_t>{kMax, kMin, 65536}));  // abs(INT_MIN) is INT_MIN
  EXPECT_EQ(o[5], (std::vector<int32_t>{kMax, kMin, 0}));      // 2^48 wraps to 0

  Builder s;
  int v = s.Param(T(DType::kI64, {2}));
  s.Result(s.Reduce(v, s.Constant(0, DType::kI64), {0}, ReduceKind::kAdd));
  std::vector<int64_t> vv = {std::numeric_limits<int64_t>::max(), 2}, sum(1);
  ASSERT_TRUE(RunProgram(s, Bindings(Bind(vv, DType::kI64, {2})), Bindings(Bind(sum, DType::kI64, {}))).ok());
  EXPECT_EQ(sum[0], std::numeric_limits<int64_t>::min() + 1);
}

}  // namespace
}  // namespace tpu::host::testing
