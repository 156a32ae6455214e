#include "compiler/passes/remat.h"

#include <gtest/gtest.h>

#include "compiler/passes/dce.h"
#include "ir/builder.h"
#include "ir/verifier.h"

namespace tpu {
namespace {

TensorType F32(Dims dims) { return TensorType{DType::kF32, std::move(dims)}; }

// Small limits, so that a few ops make a long gap.
RematPass Pass() { return RematPass(RematPass::Limits{0, 3, 4}); }

// A padding of `n` unrelated ops on q (a stretch of the program that does not read x's value).
int Busy(Builder& b, int q, int n) {
  for (int k = 0; k < n; ++k) q = b.Unary(OpCode::kNegate, q);
  return q;
}

TEST(RematPassTest, ALateUseReadsACopyComputedFromLiveValues) {
  // g = exp(x) + x is read right away and again after a long stretch; x is live there (the late
  // op reads it too), so g is recomputed just before the late use.
  Builder b;
  int x = b.Param(F32({8}));
  int q = b.Param(F32({8}));
  int g = b.Binary(OpCode::kAdd, b.Unary(OpCode::kExp, x), x);  // ops 0, 1 (values 2, 3)
  int early = b.Binary(OpCode::kMultiply, g, q);                // op 2
  int busy = Busy(b, early, 4);                                 // ops 3..6
  int late = b.Binary(OpCode::kMultiply, g, b.Binary(OpCode::kAdd, busy, x));  // ops 7, 8
  b.Result(late);
  Graph graph = std::move(b.Finish()).value();
  const int before = static_cast<int>(graph.ops.size());

  RematPass remat = Pass();
  EXPECT_STREQ(remat.name(), "remat");
  StatusOr<bool> changed = remat.Run(graph);
  ASSERT_TRUE(changed.ok());
  EXPECT_TRUE(changed.value());
  ASSERT_TRUE(Verify(graph).ok());
  // exp and add copied before the late multiply (op 8 before, op 10 now).
  ASSERT_EQ(static_cast<int>(graph.ops.size()), before + 2);
  const int np = graph.num_params();
  const Op& mul = graph.Producer(graph.results[0]);
  EXPECT_EQ(mul.code, OpCode::kMultiply);
  int copy = mul.operands[0];
  EXPECT_NE(copy, g);
  EXPECT_EQ(graph.Producer(copy).code, OpCode::kAdd);
  EXPECT_EQ(graph.Producer(graph.Producer(copy).operands[0]).code, OpCode::kExp);
  EXPECT_EQ(graph.Producer(copy).operands[1], x);  // the live input itself
  EXPECT_GT(copy - np, early - np + 4);             // after the stretch
  EXPECT_EQ(graph.Producer(early).operands[0], g);  // the early use keeps the original
}

TEST(RematPassTest, AValueOnlyReadLateMovesThere) {
  // Nothing reads g early: after DCE only the copy remains, computed just before its use.
  Builder b;
  int x = b.Param(F32({8}));
  int g = b.Unary(OpCode::kExp, x);
  int busy = Busy(b, x, 4);
  b.Result(b.Binary(OpCode::kAdd, g, busy));
  Graph graph = std::move(b.Finish()).value();
  ASSERT_TRUE(Pass().Run(graph).value());
  ASSERT_TRUE(DcePass().Run(graph).value());
  ASSERT_TRUE(Verify(graph).ok());
  ASSERT_EQ(graph.ops.size(), 6u);
  EXPECT_EQ(graph.ops[4].code, OpCode::kExp);  // after the four negates
  EXPECT_EQ(graph.ops[5].operands[0], graph.num_params() + 4);
}

TEST(RematPassTest, ConstantsAndBroadcastsAreCopiedWithTheChain) {
  // g = x * broadcast(2): the constant and its broadcast are read by nothing late, so the chain
  // copies them too.
  Builder b;
  int x = b.Param(F32({4, 4}));
  int two = b.BroadcastInDim(b.Constant(2, DType::kF32), {4, 4}, {});
  int g = b.Binary(OpCode::kMultiply, x, two);
  int early = b.Unary(OpCode::kNegate, g);
  int busy = Busy(b, early, 4);
  b.Result(b.Binary(OpCode::kAdd, g, b.Binary(OpCode::kAdd, busy, x)));
  Graph graph = std::move(b.Finish()).value();
  const size_t before = graph.ops.size();
  ASSERT_TRUE(Pass().Run(graph).value());
  ASSERT_TRUE(Verify(graph).ok());
  EXPECT_EQ(graph.ops.size(), before + 3);  // constant, broadcast, multiply
}

TEST(RematPassTest, LeavesWhatCannotOrNeedNotBeRecomputed) {
  auto unchanged = [](Builder& b, RematPass pass) {
    Graph graph = std::move(b.Finish()).value();
    Graph before = graph;
    StatusOr<bool> changed = pass.Run(graph);
    ASSERT_TRUE(changed.ok());
    EXPECT_FALSE(changed.value());
    EXPECT_TRUE(StructurallyEqual(before, graph));
  };
  {  // g's input s is a reduction's value that nothing reads late: not copied (a kernel).
    Builder b;
    int x = b.Param(F32({8}));
    int s = b.BroadcastInDim(b.Reduce(x, b.Constant(0, DType::kF32), {0}, ReduceKind::kAdd), {8}, {});
    int g = b.Unary(OpCode::kExp, b.Binary(OpCode::kSubtract, x, s));
    int busy = Busy(b, b.Unary(OpCode::kNegate, g), 4);
    b.Result(b.Binary(OpCode::kAdd, g, busy));
    unchanged(b, Pass());
  }
  {  // a result is kept to the end anyway
    Builder b;
    int x = b.Param(F32({8}));
    int g = b.Unary(OpCode::kExp, x);
    int busy = Busy(b, b.Unary(OpCode::kNegate, g), 4);
    b.Result(b.Binary(OpCode::kAdd, g, busy));
    b.Result(g);
    unchanged(b, Pass());
  }
  {  // a short gap, and (with the default limits) a small value
    Builder b;
    int x = b.Param(F32({8}));
    int g = b.Unary(OpCode::kExp, x);
    int busy = Busy(b, b.Unary(OpCode::kNegate, g), 1);
    b.Result(b.Binary(OpCode::kAdd, g, busy));
    Builder b2 = b;
    unchanged(b, Pass());
    unchanged(b2, RematPass());
  }
  {  // a chain longer than max_chain
    Builder b;
    int x = b.Param(F32({8}));
    int g = x;
    for (int k = 0; k < 6; ++k) g = b.Unary(OpCode::kExp, g);
    int busy = Busy(b, b.Unary(OpCode::kNegate, g), 4);
    b.Result(b.Binary(OpCode::kAdd, g, busy));
    unchanged(b, Pass());
  }
}

}  // namespace
}  // namespace tpu
