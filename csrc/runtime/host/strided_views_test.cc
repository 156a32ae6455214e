// ir/strided.h's view programs, run by the host executor and checked element by element against
// the view's definition (flat[offset + sum_k i_k * strides[k]]).
#include "ir/strided.h"

#include <random>

#include "runtime/host/host_test_util.h"

namespace tpu::host::testing {
namespace {

struct Case {
  Dims sizes, strides;
  int64_t offset;
  bool nests;
};

const Case kCases[] = {
    {{4, 5}, {5, 1}, 0, true},           // the whole array
    {{2, 3}, {3, 1}, 7, true},           // a contiguous run at an offset
    {{4, 2}, {5, 1}, 3, true},           // columns 3..4 of a 4x5 matrix
    {{5, 4}, {1, 5}, 0, true},           // a transpose
    {{3, 2, 2}, {8, 1, 4}, 1, true},     // permuted nested blocks
    {{3}, {7}, 2, true},                 // every 7th element
    {{2, 1, 3}, {9, 100, 3}, 1, true},   // a size-1 dim with any stride
    {{3, 4}, {0, 2}, 5, true},           // broadcast (stride 0) in a read
    {{}, {}, 13, true},                  // one element
    {{4, 3}, {10, 1}, 3, true},          // columns 3..5 of a 4x10 matrix: the blocks pass the end
    {{2, 3, 2}, {2, 12, 1}, 8, true},    // v of a [3, 12] qkv row, heads first: the same
    {{3, 4}, {12, 1}, 10, true},         // rows that cross a block: a padded copy
    {{3, 3}, {4, 3}, 0, false},          // strides that do not divide
    {{4, 3}, {2, 3}, 1, false},          // overlapping dims (an unfold-style window)
};

std::vector<float> Iota(int64_t n) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i) + 0.5f;
  return v;
}

// The flat index of each element of the view, in row-major order of its sizes.
std::vector<int64_t> Positions(const Case& c) {
  int64_t numel = 1;
  for (int64_t s : c.sizes) numel *= s;
  std::vector<int64_t> out;
  for (int64_t i = 0; i < numel; ++i) {
    int64_t rem = i, pos = c.offset;
    for (int d = static_cast<int>(c.sizes.size()) - 1; d >= 0; --d) {
      pos += (rem % c.sizes[d]) * c.strides[d];
      rem /= c.sizes[d];
    }
    out.push_back(pos);
  }
  return out;
}

constexpr int64_t kN = 40;

TEST(StridedViewsTest, NestingIsRecognized) {
  for (const Case& c : kCases) EXPECT_EQ(StridesNest(c.sizes, c.strides), c.nests) << DimsToString(c.strides);
}

TEST(StridedViewsTest, ReadsMatchTheDefinition) {
  for (bool dynamic : {true, false}) {
    for (const Case& c : kCases) {
      Builder b;
      int flat = b.Param(T(DType::kF32, {kN}));
      ViewOffset off = dynamic ? ViewOffset::Value(b.Param(T(DType::kI64, {}))) : ViewOffset::Constant(c.offset);
      b.Result(ReadStrided(b, flat, c.sizes, c.strides, off));
      std::vector<float> in = Iota(kN);
      std::vector<int64_t> pos = Positions(c);
      std::vector<float> out(pos.size(), -1.0f);
      int64_t o = c.offset;
      auto params = dynamic ? Bindings(Bind(in, DType::kF32, {kN}), Binding::Scalar(DType::kI64, &o))
                            : Bindings(Bind(in, DType::kF32, {kN}));
      ASSERT_TRUE(RunProgram(b, std::move(params), Bindings(Bind(out, DType::kF32, c.sizes))).ok())
          << DimsToString(c.sizes) << " " << DimsToString(c.strides);
      for (size_t i = 0; i < pos.size(); ++i)
        EXPECT_EQ(out[i], in[pos[i]]) << DimsToString(c.sizes) << " / " << DimsToString(c.strides) << " element " << i;
    }
  }
}

TEST(StridedViewsTest, WritesReplaceExactlyTheViewsElements) {
  for (bool dynamic : {true, false}) {
    for (const Case& c : kCases) {
      if (!c.nests && c.strides == Dims{2, 3}) continue;  // writes to an overlapping view are undefined
      std::vector<int64_t> pos = Positions(c);
      Builder b;
      int flat = b.Param(T(DType::kF32, {kN}));
      int upd = b.Param(T(DType::kF32, c.sizes));
      ViewOffset off = dynamic ? ViewOffset::Value(b.Param(T(DType::kI64, {}))) : ViewOffset::Constant(c.offset);
      b.Result(UpdateStrided(b, flat, c.sizes, c.strides, off, upd));
      std::vector<float> in = Iota(kN), out(kN, -1.0f);
      std::vector<float> u(pos.size());
      for (size_t i = 0; i < u.size(); ++i) u[i] = -100.0f - static_cast<float>(i);
      int64_t o = c.offset;
      auto params = dynamic ? Bindings(Bind(in, DType::kF32, {kN}), Bind(u, DType::kF32, c.sizes),
                                       Binding::Scalar(DType::kI64, &o))
                            : Bindings(Bind(in, DType::kF32, {kN}), Bind(u, DType::kF32, c.sizes));
      ASSERT_TRUE(RunProgram(b, std::move(params), Bindings(Bind(out, DType::kF32, {kN}))).ok())
          << DimsToString(c.sizes) << " " << DimsToString(c.strides);
      std::vector<float> expected = in;
      for (size_t i = 0; i < pos.size(); ++i) expected[pos[i]] = u[i];  // in order: the last write wins
      EXPECT_EQ(out, expected) << DimsToString(c.sizes) << " / " << DimsToString(c.strides);
    }
  }
}

// Note [Views inside a row]: views that start inside a row of their blocks and stay in it read
// and write the array through slices and reshapes only (views on the host); only a view that
// crosses a block pays for a padded copy.
TEST(StridedViewsTest, ViewsInsideARowCopyNothing) {
  auto pads = [](const Builder& b) {
    StatusOr<Graph> g = Builder(b).Finish();
    int n = 0;
    for (const Op& op : g->ops) n += op.code == OpCode::kPad;
    return n;
  };
  const Case in_row[] = {{{4, 3}, {10, 1}, 3, true}, {{2, 3, 2}, {2, 12, 1}, 8, true}};
  for (const Case& c : in_row) {
    Builder r, w;
    ReadStrided(r, r.Param(T(DType::kF32, {kN})), c.sizes, c.strides, ViewOffset::Constant(c.offset));
    UpdateStrided(w, w.Param(T(DType::kF32, {kN})), c.sizes, c.strides, ViewOffset::Constant(c.offset),
                  w.Param(T(DType::kF32, c.sizes)));
    EXPECT_EQ(pads(r), 0) << DimsToString(c.strides);
    EXPECT_EQ(pads(w), 0) << DimsToString(c.strides);
  }
  Builder crossing;
  ReadStrided(crossing, crossing.Param(T(DType::kF32, {kN})), {3, 4}, {12, 1}, ViewOffset::Constant(10));
  EXPECT_EQ(pads(crossing), 1);
}

TEST(StridedViewsTest, OneProgramServesEveryOffset) {
  // The offset is a value: the same program reads a 2x2 block anywhere in a 6x6 matrix.
  Builder b;
  int flat = b.Param(T(DType::kF32, {36}));
  int off = b.Param(T(DType::kI64, {}));
  b.Result(ReadStrided(b, flat, {2, 2}, {6, 1}, ViewOffset::Value(off)));
  ExecutablePtr exe = CompileBuilder(b);
  std::vector<float> in = Iota(36);
  for (int64_t o : {0, 7, 14, 28}) {
    std::vector<float> out(4);
    ASSERT_TRUE(RunExe(exe, Bindings(Bind(in, DType::kF32, {36}), Binding::Scalar(DType::kI64, &o)),
                       Bindings(Bind(out, DType::kF32, {2, 2})))
                    .ok());
    EXPECT_EQ(out, (std::vector<float>{in[o], in[o + 1], in[o + 6], in[o + 7]})) << o;
  }
}

}  // namespace
}  // namespace tpu::host::testing
