// A program with bounded dims on the PJRT backend (Note [Bounded dims in the IR], ir/types.h):
// printed with StableHLO's bounded dynamism and compiled by the plugin as it is (XLA pads and
// masks it itself), one executable for every runtime size, NaN padding never in a result.
#include "ir/bounded_test_program.h"
#include "ir/printer.h"
#include "runtime/pjrt/backend.h"
#include "runtime/pjrt/pjrt_test_util.h"

namespace tpu::pjrt::testing {
namespace {

using namespace tpu::testing;  // NOLINT: the shared bounded program and its checks

TEST(PjrtBoundedDimsTest, XlaCompilesTheBoundedProgramOnceForEverySize) {
  TPU_REQUIRE_PJRT_PLUGIN();
  Backend* b = TestBackend();
  ASSERT_NE(b, nullptr);
  Device& d = b->device(0);
  Graph g = BoundedTestProgram();
  ASSERT_FALSE(g.ops.empty());
  const std::string text = PrintStableHlo(g, "main");
  EXPECT_NE(text.find("tensor<?x3xf32, #stablehlo.bounds<8, ?>>"), std::string::npos) << text;
  EXPECT_NE(text.find("tensor<3x?xf32, #stablehlo.bounds<?, 8>>"), std::string::npos) << text;
  CompileOptions co;
  co.name = "bounded";
  auto exe = b->Compile(g, co);
  ASSERT_TRUE(exe.ok()) << exe.status().ToString() << "\n" << text;
  const DType f = DType::kF32, i32 = DType::kI32;
  for (int n : {1, 5, 8}) {
    SCOPED_TRACE(n);
    DeviceBuffer x = Upload(d, BoundedTestInput(n)), size = Upload(d, std::vector<int32_t>{n});
    DeviceBuffer size_out = NewBuffer(d, 4), sums = NewBuffer(d, 4 * kBoundedCols), max = NewBuffer(d, 4),
                 twice = NewBuffer(d, 4 * kBoundedRows * kBoundedCols), gram = NewBuffer(d, 4 * kBoundedCols * kBoundedCols),
                 softmax = NewBuffer(d, 4 * kBoundedCols * kBoundedRows), softmax_size = NewBuffer(d, 4);
    ASSERT_TRUE(LaunchAndWait(d, exe.value(), Bindings(x.Bind(T(f, {kBoundedRows, kBoundedCols})), size.Bind(T(i32, {}))),
                              Bindings(size_out.Bind(T(i32, {})), sums.Bind(T(f, {kBoundedCols})), max.Bind(T(f, {})),
                                       twice.Bind(T(f, {kBoundedRows, kBoundedCols})),
                                       gram.Bind(T(f, {kBoundedCols, kBoundedCols})),
                                       softmax.Bind(T(f, {kBoundedCols, kBoundedRows})), softmax_size.Bind(T(i32, {}))))
                    .ok());
    BoundedTestRun run{Download<int32_t>(d, size_out)[0], Download<int32_t>(d, softmax_size)[0],
                       Download<float>(d, sums), Download<float>(d, max), Download<float>(d, twice),
                       Download<float>(d, gram), Download<float>(d, softmax)};
    CheckBoundedTestRun(n, run);
  }
}

}  // namespace
}  // namespace tpu::pjrt::testing
