// Programs with bounded dims on the host executor (Note [Bounded dims in the IR], ir/types.h):
// one executable serves every runtime size, and the padding (NaN here) never reaches a result.
#include "compiler/passes/bounded.h"
#include "ir/bounded_test_program.h"
#include "runtime/host/host_test_util.h"

namespace tpu::host::testing {
namespace {

using namespace tpu::testing;  // NOLINT: the shared bounded program and its checks

TEST(BoundedDimsTest, OneExecutableServesEverySizeAndPaddingNeverLeaks) {
  CompileOptions options;
  options.name = "bounded";
  auto exe = CompileForHost(BoundedTestProgram(), options);
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();
  for (int n : {1, 5, 8}) {
    SCOPED_TRACE(n);
    std::vector<float> x = BoundedTestInput(n);
    std::vector<int32_t> size{n};
    BoundedTestRun run;
    run.sums.resize(kBoundedCols);
    run.max.resize(1);
    run.twice.resize(kBoundedRows * kBoundedCols);
    run.gram.resize(kBoundedCols * kBoundedCols);
    run.softmax.resize(kBoundedCols * kBoundedRows);
    ASSERT_TRUE(RunExe(ExecutablePtr(exe.value()),
                       Bindings(Bind(x, DType::kF32, {kBoundedRows, kBoundedCols}), Bind(size, DType::kI32, {})),
                       Bindings(Bind(&run.size, DType::kI32, {}), Bind(run.sums, DType::kF32, {kBoundedCols}),
                                Bind(run.max, DType::kF32, {}), Bind(run.twice, DType::kF32, {kBoundedRows, kBoundedCols}),
                                Bind(run.gram, DType::kF32, {kBoundedCols, kBoundedCols}),
                                Bind(run.softmax, DType::kF32, {kBoundedCols, kBoundedRows}),
                                Bind(&run.softmax_size, DType::kI32, {})))
                    .ok());
    CheckBoundedTestRun(n, run);
  }
}

TEST(BoundedDimsTest, ThePassMasksBeforeCombiningOpsAndLeavesStaticProgramsAlone) {
  Graph g = BoundedTestProgram();
  ASSERT_FALSE(g.ops.empty());
  Graph before = g;
  auto changed = BoundedDimsPass().Run(g);
  ASSERT_TRUE(changed.ok() && changed.value());
  int selects = 0;
  for (const Op& op : g.ops) {
    EXPECT_EQ(op.type.bounded, 0u) << OpName(op.code);
    EXPECT_NE(op.code, OpCode::kSetDimensionSize);
    EXPECT_NE(op.code, OpCode::kGetDimensionSize);
    selects += op.code == OpCode::kSelect;
  }
  // One per reduce over the bounded dim (the sum, the max, the softmax's max and sum) and one per
  // side of the contraction.
  EXPECT_EQ(selects, 6);
  EXPECT_FALSE(BoundedDimsPass().Run(g).value());  // now static: nothing to do
  EXPECT_FALSE(StructurallyEqual(before, g));
}

}  // namespace
}  // namespace tpu::host::testing
