#include "compiler/passes/dce.h"

#include <gtest/gtest.h>

#include "ir/builder.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace tpu {
namespace {

TensorType F32(Dims dims) { return TensorType{DType::kF32, std::move(dims)}; }

TEST(DcePassTest, RemovesDeadOpsAndRemapsValues) {
  Builder b;
  int p0 = b.Param(F32({4}));
  int p1 = b.Param(F32({4}));
  int dead = b.Unary(OpCode::kExp, p0);          // op 0, value 2: unused
  int sum = b.Binary(OpCode::kAdd, p0, p1);      // op 1, value 3
  b.Unary(OpCode::kNegate, dead);                // op 2, value 4: unused chain
  int prod = b.Binary(OpCode::kMultiply, sum, sum);  // op 3, value 5
  b.Result(prod);
  b.Result(p1);
  Graph g = std::move(b.Finish()).value();

  DcePass dce;
  EXPECT_STREQ(dce.name(), "dce");
  StatusOr<bool> changed = dce.Run(g);
  ASSERT_TRUE(changed.ok());
  EXPECT_TRUE(changed.value());
  ASSERT_EQ(g.ops.size(), 2u);
  EXPECT_EQ(g.ops[0].code, OpCode::kAdd);
  EXPECT_EQ(g.ops[0].operands, (std::vector<int>{0, 1}));
  EXPECT_EQ(g.ops[1].code, OpCode::kMultiply);
  EXPECT_EQ(g.ops[1].operands, (std::vector<int>{2, 2}));
  EXPECT_EQ(g.results, (std::vector<int>{3, 1}));
  EXPECT_EQ(g.params.size(), 2u);  // parameters are never removed
  EXPECT_TRUE(Verify(g).ok());

  // A second run finds nothing to do and leaves the graph as it is.
  Graph before = g;
  changed = dce.Run(g);
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(changed.value());
  EXPECT_TRUE(StructurallyEqual(before, g));
}

TEST(DcePassTest, KeepsEverythingLive) {
  Builder b;
  int x = b.Param(F32({3}));
  int e = b.Unary(OpCode::kExp, x);
  b.Result(b.Binary(OpCode::kAdd, e, x));
  Graph g = std::move(b.Finish()).value();
  Graph before = g;
  DcePass dce;
  StatusOr<bool> changed = dce.Run(g);
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(changed.value());
  EXPECT_EQ(PrintStableHlo(g), PrintStableHlo(before));
}

TEST(DcePassTest, NoResultsRemovesEveryOp) {
  Builder b;
  int x = b.Param(F32({3}));
  b.Unary(OpCode::kExp, x);
  b.Constant(1, DType::kF32);
  Graph g = std::move(b.Finish()).value();
  DcePass dce;
  ASSERT_TRUE(dce.Run(g).value());
  EXPECT_TRUE(g.ops.empty());
  EXPECT_EQ(g.num_params(), 1);
}

// IR text in, IR text out: a dead broadcast between live ops.
TEST(DcePassTest, TextBeforeAndAfter) {
  Builder b;
  int x = b.Param(F32({2}));
  int c = b.Constant(3, DType::kF32);
  b.BroadcastInDim(c, {5, 2}, {});  // dead
  int bc = b.BroadcastInDim(c, {2}, {});
  b.Result(b.Binary(OpCode::kMultiply, x, bc));
  Graph g = std::move(b.Finish()).value();
  DcePass dce;
  ASSERT_TRUE(dce.Run(g).value());
  EXPECT_EQ(PrintStableHlo(g),
            "module @tpu_program {\n"
            "  func.func public @main(%arg0: tensor<2xf32>) -> (tensor<2xf32>) {\n"
            "    %0 = stablehlo.constant dense<3.00000000000000000e+00> : tensor<f32>\n"
            "    %1 = \"stablehlo.broadcast_in_dim\"(%0) {broadcast_dimensions = array<i64>} : "
            "(tensor<f32>) -> tensor<2xf32>\n"
            "    %2 = \"stablehlo.multiply\"(%arg0, %1) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>\n"
            "    return %2 : tensor<2xf32>\n"
            "  }\n"
            "}\n");
}

}  // namespace
}  // namespace tpu
