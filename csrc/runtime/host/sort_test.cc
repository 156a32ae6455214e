#include <limits>

#include "runtime/host/host_test_util.h"

namespace tpu::host {
namespace {
using testing::Bind;
using testing::Bindings;
using testing::RunProgram;
using testing::T;

constexpr DType F = DType::kF32;

TEST(SortTest, StableWithNaNGreatestBothDirections) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = {3, nan, 1, 3, -0.0f, 0, nan, 2};
  for (bool desc : {false, true}) {
    Builder b;
    int p = b.Param(T(F, {8}));
    b.Result(b.Sort(p, 0, desc));
    std::vector<int64_t> out(8);
    ASSERT_TRUE(RunProgram(b, Bindings(Bind(x, F, {8})), Bindings(Bind(out, DType::kI64, {8}))).ok());
    // Equal keys (3 and 3, -0 and 0, the NaNs) keep their order in both directions.
    std::vector<int64_t> want = desc ? std::vector<int64_t>{1, 6, 0, 3, 7, 2, 4, 5}
                                     : std::vector<int64_t>{4, 5, 2, 7, 0, 3, 1, 6};
    EXPECT_EQ(out, want) << (desc ? "descending" : "ascending");
  }
}

TEST(SortTest, MiddleDimOfStridedIntegers) {
  // [2, 3, 2] int64 read through a transposed view of a [2, 2, 3] buffer; sorted along dim 1.
  std::vector<int64_t> buf = {5, -1, 5,  2, 2, 0,   7, 7, 7,  1, 3, 2};
  Builder b;
  int p = b.Param(T(DType::kI64, {2, 3, 2}));
  b.Result(b.Sort(p, 1, false));
  std::vector<int64_t> out(12);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(buf, DType::kI64, {2, 3, 2}, {6, 1, 3})),
                         Bindings(Bind(out, DType::kI64, {2, 3, 2})))
                  .ok());
  // Rows along dim 1: (5, -1, 5) -> 1 0 2; (2, 2, 0) -> 2 0 1; (7, 7, 7) -> 0 1 2; (1, 3, 2) -> 0 2 1.
  EXPECT_EQ(out, (std::vector<int64_t>{1, 2, 0, 0, 2, 1, 0, 0, 1, 2, 2, 1}));
}

}  // namespace
}  // namespace tpu::host
