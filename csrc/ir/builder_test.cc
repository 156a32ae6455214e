#include "ir/builder.h"

#include <string>

#include <gtest/gtest.h>

#include "base/bytes.h"
#include "ir/serialize.h"
#include "ir/verifier.h"

namespace tpu {
namespace {

TensorType T(DType dt, Dims dims) { return TensorType{dt, std::move(dims)}; }
TensorType F32(Dims dims) { return T(DType::kF32, std::move(dims)); }

// Finish() must fail with an InvalidArgument naming `what`.
void ExpectFinishError(Builder& b, const std::string& what) {
  StatusOr<Graph> g = b.Finish();
  ASSERT_FALSE(g.ok()) << "expected an error about: " << what;
  EXPECT_EQ(g.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(g.status().message(), "IR builder: " + what);
}

TEST(TypesTest, TensorTypeBasics) {
  EXPECT_EQ(F32({2, 3}).ToString(), "tensor<2x3xf32>");
  EXPECT_EQ(T(DType::kBool, {}).ToString(), "tensor<i1>");
  EXPECT_EQ(T(DType::kU8, {4}).ToString(), "tensor<4xui8>");
  EXPECT_EQ(T(DType::kBF16, {2, 5}).ByteSize(), 20);
  EXPECT_EQ(F32({}).NumElements(), 1);
  EXPECT_EQ(F32({3, 0}).NumElements(), 0);
  EXPECT_EQ(DimsToString({1, 2}), "[1, 2]");
  EXPECT_EQ(DTypeSize(DType::kF64), 8);
  EXPECT_TRUE(IsFloat(DType::kBF16));
  EXPECT_FALSE(IsFloat(DType::kI32));
  EXPECT_TRUE(IsSignedInt(DType::kI8));
  EXPECT_FALSE(IsSignedInt(DType::kU8));
  EXPECT_TRUE(IsInteger(DType::kU64));
  EXPECT_FALSE(IsInteger(DType::kBool));
  EXPECT_STREQ(OpName(OpCode::kDotGeneral), "stablehlo.dot_general");
  EXPECT_EQ(OpArity(OpCode::kSelect), 3);
  EXPECT_EQ(OpArity(OpCode::kConcatenate), -1);
  EXPECT_TRUE(IsElementwise(OpCode::kConvert));
  EXPECT_FALSE(IsElementwise(OpCode::kReshape));
  EXPECT_EQ(GetOpKind(OpCode::kTranspose), OpKind::Structural);
}

TEST(BuilderTest, ValueNumbering) {
  Builder b;
  int x = b.Param(F32({2}));
  int y = b.Param(F32({2}));
  int s = b.Binary(OpCode::kAdd, x, y);
  int n = b.Unary(OpCode::kNegate, s);
  b.Result(n);
  EXPECT_EQ(x, 0);
  EXPECT_EQ(y, 1);
  EXPECT_EQ(s, 2);
  EXPECT_EQ(n, 3);
  auto g = b.Finish();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->num_params(), 2);
  ASSERT_EQ(g->ops.size(), 2u);
  EXPECT_EQ(g->ops[0].code, OpCode::kAdd);
  EXPECT_EQ(g->ops[0].operands, (std::vector<int>{0, 1}));
  EXPECT_EQ(g->ops[1].operands, (std::vector<int>{2}));
  EXPECT_EQ(g->results, (std::vector<int>{3}));
  EXPECT_EQ(g->TypeOf(3), F32({2}));
}

TEST(BuilderTest, ParamsAfterOpsAreNumberedFirst) {
  Builder b;
  int x = b.Param(F32({2}));
  int c = b.ScalarLike(3.0, x);  // constant + broadcast_in_dim
  int y = b.Param(F32({2}));
  int s = b.Binary(OpCode::kAdd, x, y);
  int m = b.Binary(OpCode::kMultiply, s, c);
  b.Result(m);
  b.Result(y);
  auto g = b.Finish();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->num_params(), 2);
  ASSERT_EQ(g->ops.size(), 4u);
  // Values: x=0, y=1, constant=2, broadcast=3, add=4, multiply=5.
  EXPECT_EQ(g->ops[1].operands, (std::vector<int>{2}));
  EXPECT_EQ(g->ops[2].operands, (std::vector<int>{0, 1}));
  EXPECT_EQ(g->ops[3].operands, (std::vector<int>{4, 3}));
  EXPECT_EQ(g->results, (std::vector<int>{5, 1}));
}

TEST(BuilderTest, ElementwiseTypes) {
  Builder b;
  int x = b.Param(F32({2, 3}));
  int y = b.Param(F32({2, 3}));
  EXPECT_EQ(b.TypeOf(b.Compare(CompareDirection::kLT, x, y)), T(DType::kBool, {2, 3}));
  EXPECT_EQ(b.TypeOf(b.Unary(OpCode::kIsFinite, x)), T(DType::kBool, {2, 3}));
  EXPECT_EQ(b.TypeOf(b.Convert(x, DType::kBF16)), T(DType::kBF16, {2, 3}));
  EXPECT_EQ(b.ConvertIfNeeded(x, DType::kF32), x);
  int p = b.Compare(CompareDirection::kEQ, x, y);
  EXPECT_EQ(b.TypeOf(b.Select(p, x, y)), F32({2, 3}));
  EXPECT_EQ(b.TypeOf(b.Clamp(x, y, x)), F32({2, 3}));
  int c = b.Constant(1.5, DType::kF64);
  EXPECT_EQ(b.TypeOf(c), T(DType::kF64, {}));
  EXPECT_EQ(b.TypeOf(b.Iota(T(DType::kI32, {4, 5}), 1)), T(DType::kI32, {4, 5}));
  int s = b.ScalarLike(2.0, x);
  EXPECT_EQ(b.TypeOf(s), F32({2, 3}));
  EXPECT_TRUE(b.Finish().ok());
}

TEST(BuilderTest, LayoutTypes) {
  Builder b;
  int v = b.Param(F32({3}));
  int m = b.Param(F32({2, 3, 4}));
  int big = b.Param(F32({10, 8}));
  int bc = b.BroadcastInDim(v, {2, 3}, {1});
  EXPECT_EQ(b.TypeOf(bc), F32({2, 3}));
  EXPECT_EQ(b.TypeOf(b.BroadcastTo(v, {5, 2, 3})), F32({5, 2, 3}));
  EXPECT_EQ(b.BroadcastTo(v, {3}), v);
  EXPECT_EQ(b.TypeOf(b.Reshape(m, {6, 4})), F32({6, 4}));
  EXPECT_EQ(b.TypeOf(b.Reshape(m, {24})), F32({24}));
  EXPECT_EQ(b.TypeOf(b.Transpose(m, {2, 0, 1})), F32({4, 2, 3}));
  // start 1, limit 9, stride 3 -> elements 1, 4, 7; start 0, limit 8, stride 2 -> 4.
  EXPECT_EQ(b.TypeOf(b.Slice(big, {1, 0}, {9, 8}, {3, 2})), F32({3, 4}));
  EXPECT_EQ(b.TypeOf(b.Slice(big, {2, 5}, {2, 8}, {1, 1})), F32({0, 3}));
  auto g = b.Finish();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->ops[0].attrs.a, (Dims{1}));
}

TEST(BuilderTest, ReverseDropsDimsOfSizeOne) {
  // A 1x1 convolution kernel's spatial dims (which the input gradient reverses) change nothing
  // reversed: no op for them, and none at all when no other dim is reversed.
  Builder b;
  int w = b.Param(F32({4, 3, 1, 1}));
  int e = b.Param(F32({0, 2}));
  EXPECT_EQ(b.Reverse(w, {2, 3}), w);
  EXPECT_EQ(b.Reverse(e, {0}), e);
  int r = b.Reverse(w, {3, 0, 2});
  EXPECT_NE(r, w);
  EXPECT_EQ(b.TypeOf(r), F32({4, 3, 1, 1}));
  auto g = b.Finish();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->ops.size(), 1u);
  EXPECT_EQ(g->ops[0].code, OpCode::kReverse);
  EXPECT_EQ(g->ops[0].attrs.a, (Dims{0}));
  Builder bad;
  int x = bad.Param(F32({2, 1}));
  bad.Reverse(x, {1, 1});  // a repeated dim is still an error, size one or not
  EXPECT_FALSE(bad.Finish().ok());
}

TEST(BuilderTest, ConcatenateAndPadTypes) {
  Builder b;
  int x = b.Param(F32({2, 3}));
  int y = b.Param(F32({4, 3}));
  int z = b.Param(F32({2, 5}));
  int in = b.Param(F32({3, 4}));
  EXPECT_EQ(b.TypeOf(b.Concatenate({x, y, x}, 0)), F32({8, 3}));
  EXPECT_EQ(b.TypeOf(b.Concatenate({x, z}, 1)), F32({2, 8}));
  int pv = b.Constant(0, DType::kF32);
  // dim 0: 1 + 2 + 3 + 2*1 = 8; dim 1: -1 + 0 + 4 + 3*2 = 9
  EXPECT_EQ(b.TypeOf(b.Pad(in, pv, {1, -1}, {2, 0}, {1, 2})), F32({8, 9}));
  EXPECT_EQ(b.TypeOf(b.Pad(in, pv, {-3, 0}, {0, -4}, {0, 0})), F32({0, 0}));
  auto g = b.Finish();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->ops[0].attrs.i, 0);
  EXPECT_EQ(g->ops[1].attrs.i, 1);
  EXPECT_EQ(g->ops[3].attrs.a, (Dims{1, -1}));
  EXPECT_EQ(g->ops[3].attrs.b, (Dims{2, 0}));
  EXPECT_EQ(g->ops[3].attrs.c, (Dims{1, 2}));
}

TEST(BuilderTest, ReduceTypes) {
  Builder b;
  int x = b.Param(F32({2, 3, 4}));
  int zero = b.Constant(0, DType::kF32);
  int r = b.Reduce(x, zero, {2, 0}, ReduceKind::kAdd);
  EXPECT_EQ(b.TypeOf(r), F32({3}));
  EXPECT_EQ(b.TypeOf(b.Reduce(x, zero, {0, 1, 2}, ReduceKind::kMax)), F32({}));
  EXPECT_EQ(b.TypeOf(b.Reduce(x, zero, {}, ReduceKind::kMax)), F32({2, 3, 4}));
  int am = b.ArgReduce(x, 1, ReduceKind::kMax);
  EXPECT_EQ(b.TypeOf(am), T(DType::kI64, {2, 4}));
  EXPECT_EQ(b.TypeOf(b.ArgReduce(x, 2, ReduceKind::kMin)), T(DType::kI64, {2, 3}));
  auto g = b.Finish();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const Op& red = g->ops[1];
  EXPECT_EQ(red.attrs.a, (Dims{0, 2}));  // sorted
  EXPECT_EQ(red.attrs.kind, static_cast<int64_t>(ReduceKind::kAdd));
  const Op& arg = g->ops[4];
  EXPECT_EQ(arg.code, OpCode::kArgReduce);
  EXPECT_EQ(arg.attrs.a, (Dims{1}));
}

TEST(BuilderTest, DotGeneralTypes) {
  Builder b;
  int l = b.Param(F32({5, 2, 3}));
  int r = b.Param(F32({5, 3, 4}));
  int a = b.Param(F32({6, 7}));
  int w = b.Param(F32({9, 7}));     // x @ w.T: both contract dim 1
  int x = b.Param(F32({4, 3, 5}));  // batch dim 1, contract dim 2
  int y = b.Param(F32({3, 5, 2}));  // batch dim 0, contract dim 1
  EXPECT_EQ(b.TypeOf(b.DotGeneral(l, r, {0}, {0}, {2}, {1}, DType::kF32)), F32({5, 2, 4}));
  EXPECT_EQ(b.TypeOf(b.DotGeneral(a, w, {}, {}, {1}, {1}, DType::kF64)), T(DType::kF64, {6, 9}));
  // Result dims: batch, then lhs free, then rhs free.
  EXPECT_EQ(b.TypeOf(b.DotGeneral(x, y, {1}, {0}, {2}, {1}, DType::kF32)), F32({3, 4, 2}));
  // Outer product: nothing contracted.
  EXPECT_EQ(b.TypeOf(b.DotGeneral(a, w, {}, {}, {}, {}, DType::kF32)), F32({6, 7, 9, 7}));
  auto g = b.Finish();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->ops[2].attrs.a, (Dims{1}));
  EXPECT_EQ(g->ops[2].attrs.b, (Dims{0}));
  EXPECT_EQ(g->ops[2].attrs.c, (Dims{2}));
  EXPECT_EQ(g->ops[2].attrs.d, (Dims{1}));
}

TEST(BuilderTest, GatherTypes) {
  Builder b;
  int table = b.Param(F32({10, 4}));
  int ids = b.Param(T(DType::kI64, {6, 1}));
  int ids3 = b.Param(T(DType::kI32, {2, 3, 1}));
  int op3 = b.Param(F32({3, 4, 5}));
  int idx2 = b.Param(T(DType::kI64, {2, 2}));
  // Embedding: rows of the table.
  EXPECT_EQ(b.TypeOf(b.Gather(table, ids, {1}, {0}, {0}, {1, 4})), F32({6, 4}));
  EXPECT_EQ(b.TypeOf(b.Gather(table, ids3, {2}, {0}, {0}, {1, 4})), F32({2, 3, 4}));
  // General: two index components, one collapsed dim, window 2x3 -> [2, 2, 3].
  EXPECT_EQ(b.TypeOf(b.Gather(op3, idx2, {1, 2}, {0}, {0, 2}, {1, 2, 3})), F32({2, 2, 3}));
  // Offset dim first: result[i][b] = table[i][ids[b]] for a [10, 4] table with ids [6, 1].
  EXPECT_EQ(b.TypeOf(b.Gather(table, ids, {0}, {1}, {1}, {10, 1})), F32({10, 6}));
  auto g = b.Finish();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const Op& gather = g->ops[0];
  EXPECT_EQ(gather.attrs.i, 1);     // index_vector_dim is the last index dim
  EXPECT_EQ(gather.attrs.kind, 1);  // checked by default
  EXPECT_EQ(gather.attrs.d, (Dims{1, 4}));
}

TEST(BuilderTest, ScatterAndRngTypes) {
  Builder b;
  int operand = b.Param(F32({5, 3}));
  int idx = b.Param(T(DType::kI64, {4, 1}));
  int upd = b.Param(F32({4, 3}));
  int state = b.Param(T(DType::kU64, {2}));
  int s = b.Scatter(operand, idx, upd, {1}, {0}, {0}, ReduceKind::kAdd);
  EXPECT_EQ(b.TypeOf(s), F32({5, 3}));
  EXPECT_EQ(b.TypeOf(b.RngBits(state, {3, 7})), T(DType::kU32, {3, 7}));
  auto g = b.Finish();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->ops[0].attrs.kind, static_cast<int64_t>(ReduceKind::kAdd) | 256);
}

// Each misuse is recorded and reported by Finish(); later calls still return value ids.
struct Misuse {
  const char* name;
  std::string message;
  void (*build)(Builder& b);
};

TEST(BuilderTest, MisuseIsReportedByFinish) {
  const Misuse cases[] = {
      {"binary type", "binary operands must have the same type",
       [](Builder& b) { b.Binary(OpCode::kAdd, b.Param(F32({2})), b.Param(F32({3}))); }},
      {"binary dtype", "binary operands must have the same type",
       [](Builder& b) { b.Binary(OpCode::kAdd, b.Param(F32({2})), b.Param(T(DType::kF64, {2}))); }},
      {"not binary", "not a binary op",
       [](Builder& b) { int x = b.Param(F32({2})); b.Binary(OpCode::kExp, x, x); }},
      {"not unary", "not a unary op",
       [](Builder& b) { b.Unary(OpCode::kConvert, b.Param(F32({2}))); }},
      {"compare type", "compare operands must have the same type",
       [](Builder& b) { b.Compare(CompareDirection::kLT, b.Param(F32({2})), b.Param(F32({2, 1}))); }},
      {"select pred", "select predicate must be i1",
       [](Builder& b) { int x = b.Param(F32({2})); b.Select(x, x, x); }},
      {"broadcast size", "broadcast_in_dim dimension mismatch",
       [](Builder& b) { b.BroadcastInDim(b.Param(F32({3})), {2, 4}, {1}); }},
      {"broadcast rank", "broadcast_dimensions size != rank",
       [](Builder& b) { b.BroadcastInDim(b.Param(F32({3})), {2, 3}, {0, 1}); }},
      {"broadcast lower", "cannot broadcast to a lower rank",
       [](Builder& b) { b.BroadcastTo(b.Param(F32({2, 3})), {3}); }},
      {"reshape count", "reshape changes the element count",
       [](Builder& b) { b.Reshape(b.Param(F32({2, 3})), {4, 2}); }},
      {"transpose size", "permutation size != rank",
       [](Builder& b) { b.Transpose(b.Param(F32({2, 3})), {0}); }},
      {"transpose range", "permutation out of range",
       [](Builder& b) { b.Transpose(b.Param(F32({2, 3})), {0, 2}); }},
      {"slice bounds", "slice bounds out of range",
       [](Builder& b) { b.Slice(b.Param(F32({4})), {1}, {5}, {1}); }},
      {"slice stride", "slice bounds out of range",
       [](Builder& b) { b.Slice(b.Param(F32({4})), {0}, {4}, {0}); }},
      {"slice rank", "slice attribute sizes != rank",
       [](Builder& b) { b.Slice(b.Param(F32({4, 4})), {0}, {4}, {1}); }},
      {"concat shape", "concatenate shape mismatch",
       [](Builder& b) { b.Concatenate({b.Param(F32({2, 3})), b.Param(F32({2, 4}))}, 0); }},
      {"concat dtype", "concatenate operands differ",
       [](Builder& b) { b.Concatenate({b.Param(F32({2, 3})), b.Param(T(DType::kI32, {2, 3}))}, 0); }},
      {"concat rank", "concatenate operands differ",
       [](Builder& b) { b.Concatenate({b.Param(F32({2, 3})), b.Param(F32({2}))}, 0); }},
      {"concat dim", "concatenate dimension out of range",
       [](Builder& b) { b.Concatenate({b.Param(F32({2, 3})), b.Param(F32({2, 3}))}, 5); }},
      {"concat negative dim", "concatenate dimension out of range",
       [](Builder& b) { b.Concatenate({b.Param(F32({2, 3})), b.Param(F32({2, 3}))}, -1); }},
      {"pad value", "pad value type",
       [](Builder& b) { b.Pad(b.Param(F32({3})), b.Param(F32({1})), {0}, {0}, {0}); }},
      {"pad negative", "pad gives a negative size",
       [](Builder& b) { b.Pad(b.Param(F32({3})), b.Param(F32({})), {-2}, {-2}, {0}); }},
      {"pad interior", "pad gives a negative size",
       [](Builder& b) { b.Pad(b.Param(F32({3})), b.Param(F32({})), {0}, {0}, {-1}); }},
      {"reduce init", "reduce init type",
       [](Builder& b) { b.Reduce(b.Param(F32({3})), b.Param(T(DType::kF64, {})), {0}, ReduceKind::kAdd); }},
      {"reduce dim", "reduce dimension invalid",
       [](Builder& b) { b.Reduce(b.Param(F32({3})), b.Param(F32({})), {1}, ReduceKind::kAdd); }},
      {"reduce repeated", "reduce dimension invalid",
       [](Builder& b) { b.Reduce(b.Param(F32({3, 2})), b.Param(F32({})), {0, 0}, ReduceKind::kAdd); }},
      {"argreduce kind", "arg-reduce kind",
       [](Builder& b) { b.ArgReduce(b.Param(F32({3})), 0, ReduceKind::kAdd); }},
      {"argreduce dim", "arg-reduce dimension invalid",
       [](Builder& b) { b.ArgReduce(b.Param(F32({3})), 1, ReduceKind::kMax); }},
      {"argreduce empty", "arg-reduce dimension invalid",
       [](Builder& b) { b.ArgReduce(b.Param(F32({0, 2})), 0, ReduceKind::kMax); }},
      {"dot contract", "dot_general contracting sizes differ",
       [](Builder& b) { b.DotGeneral(b.Param(F32({2, 3})), b.Param(F32({4, 5})), {}, {}, {1}, {0}, DType::kF32); }},
      {"dot batch", "dot_general batch sizes differ",
       [](Builder& b) { b.DotGeneral(b.Param(F32({2, 3, 4})), b.Param(F32({3, 4, 5})), {0}, {0}, {2}, {1}, DType::kF32); }},
      {"dot counts", "dot_general dimension counts differ",
       [](Builder& b) { b.DotGeneral(b.Param(F32({2, 3})), b.Param(F32({3, 5})), {}, {}, {1}, {}, DType::kF32); }},
      {"dot dim range", "dot_general dimension numbers invalid",
       [](Builder& b) { b.DotGeneral(b.Param(F32({2, 3})), b.Param(F32({3, 5})), {}, {}, {2}, {0}, DType::kF32); }},
      {"dot repeated dim", "dot_general dimension numbers invalid",
       [](Builder& b) { b.DotGeneral(b.Param(F32({3, 3})), b.Param(F32({3, 3, 3})), {0}, {0}, {0}, {1}, DType::kF32); }},
      {"gather float indices", "gather indices must be integers",
       [](Builder& b) { b.Gather(b.Param(F32({10, 4})), b.Param(F32({6, 1})), {1}, {0}, {0}, {1, 4}); }},
      {"gather index vector", "gather index vector size != start_index_map size",
       [](Builder& b) { b.Gather(b.Param(F32({10, 4})), b.Param(T(DType::kI64, {6, 2})), {1}, {0}, {0}, {1, 4}); }},
      {"gather slice sizes", "gather slice_sizes size != rank",
       [](Builder& b) { b.Gather(b.Param(F32({10, 4})), b.Param(T(DType::kI64, {6, 1})), {1}, {0}, {0}, {1}); }},
      {"gather rank-0 indices", "gather index vector size != start_index_map size",
       [](Builder& b) { b.Gather(b.Param(F32({10, 4})), b.Param(T(DType::kI64, {})), {1}, {0}, {0}, {1, 4}); }},
      {"gather slice too big", "gather dimension numbers invalid",
       [](Builder& b) { b.Gather(b.Param(F32({10, 4})), b.Param(T(DType::kI64, {6, 1})), {1}, {0}, {0}, {1, 5}); }},
      {"scatter dtype", "scatter updates dtype != operand dtype",
       [](Builder& b) {
         b.Scatter(b.Param(F32({5})), b.Param(T(DType::kI64, {2, 1})), b.Param(T(DType::kF64, {2})), {}, {0},
                   {0}, ReduceKind::kAdd);
       }},
      {"rng state", "rng state must be tensor<2xui64>",
       [](Builder& b) { b.RngBits(b.Param(T(DType::kU64, {3})), {4}); }},
      {"iota dim", "iota dimension out of range",
       [](Builder& b) { b.Iota(F32({3}), 1); }},
      {"operand", "operand is not a value",
       [](Builder& b) { b.Param(F32({2})); b.Unary(OpCode::kExp, 7); }},
      {"negative operand", "operand is not a value",
       [](Builder& b) { b.Param(F32({2})); b.Unary(OpCode::kExp, -1); }},
      {"dot dtypes", "dot_general operand types differ",
       [](Builder& b) { b.DotGeneral(b.Param(F32({2, 3})), b.Param(T(DType::kBF16, {3, 5})), {}, {}, {1}, {0}, DType::kF32); }},
      {"gather collapsed size", "gather dimension numbers invalid",
       [](Builder& b) { b.Gather(b.Param(F32({10, 4})), b.Param(T(DType::kI64, {6, 1})), {1}, {0}, {0}, {2, 4}); }},
      {"gather start map", "gather dimension numbers invalid",
       [](Builder& b) { b.Gather(b.Param(F32({10, 4})), b.Param(T(DType::kI64, {6, 1})), {1}, {0}, {2}, {1, 4}); }},
      {"gather offset dims", "gather dimension numbers invalid",
       [](Builder& b) { b.Gather(b.Param(F32({10, 4})), b.Param(T(DType::kI64, {6, 1})), {}, {0}, {0}, {1, 4}); }},
      {"result", "result is not a value",
       [](Builder& b) { b.Param(F32({2})); b.Result(3); }},
  };
  for (const Misuse& m : cases) {
    SCOPED_TRACE(m.name);
    Builder b;
    m.build(b);
    EXPECT_FALSE(b.status().ok());
    ExpectFinishError(b, m.message);
  }
}

TEST(BuilderTest, FirstErrorWins) {
  Builder b;
  int x = b.Param(F32({2}));
  int y = b.Param(F32({3}));
  b.Reshape(x, {5});                // first error
  b.Binary(OpCode::kAdd, x, y);     // second error
  b.Result(b.Unary(OpCode::kExp, x));
  ExpectFinishError(b, "reshape changes the element count");
}

}  // namespace
}  // namespace tpu

namespace tpu {
namespace {

// Note [Bounded dims in the IR]: which ops take a bounded operand, how a bounded dim moves
// through them, and that it is part of the type (equality, fingerprint, serialized form).
TEST(BuilderBoundedTest, BoundedDimsFollowTheOpsThatTakeThem) {
  Builder b;
  int x = b.Param(TensorType{DType::kF32, {8, 3}});
  int n = b.Param(TensorType{DType::kI32, {}});
  int xb = b.SetDimensionSize(x, n, 0);
  EXPECT_EQ(b.TypeOf(xb).bounded, 1u);
  EXPECT_EQ(b.TypeOf(xb).dims, (Dims{8, 3}));
  EXPECT_EQ(b.TypeOf(b.Unary(OpCode::kExp, xb)).bounded, 1u);
  EXPECT_EQ(b.TypeOf(b.Compare(CompareDirection::kLT, xb, xb)).bounded, 1u);
  EXPECT_EQ(b.TypeOf(b.Transpose(xb, {1, 0})).bounded, 2u);
  EXPECT_EQ(b.TypeOf(b.BroadcastInDim(xb, {2, 8, 3}, {1, 2})).bounded, 2u);
  EXPECT_EQ(b.TypeOf(b.Reduce(xb, b.Constant(0.0, DType::kF32), {1}, ReduceKind::kAdd)).bounded, 1u);
  EXPECT_EQ(b.TypeOf(b.Reduce(xb, b.Constant(0.0, DType::kF32), {0}, ReduceKind::kAdd)).bounded, 0u);
  EXPECT_EQ(b.TypeOf(b.DotGeneral(xb, xb, {}, {}, {0}, {0}, DType::kF32)).bounded, 0u);  // contracted
  EXPECT_EQ(b.TypeOf(b.DotGeneral(xb, x, {}, {}, {1}, {1}, DType::kF32)).bounded, 1u);   // a free dim
  // A constant size at the bound makes the dim static again; any other size keeps it bounded.
  EXPECT_EQ(b.TypeOf(b.SetDimensionSize(xb, b.Constant(8, DType::kI32), 0)).bounded, 0u);
  EXPECT_EQ(b.TypeOf(b.SetDimensionSize(xb, b.Constant(5, DType::kI32), 0)).bounded, 1u);
  EXPECT_EQ(b.TypeOf(b.GetDimensionSize(xb, 0)), (TensorType{DType::kI32, {}}));
  b.Result(b.Reduce(xb, b.Constant(0.0, DType::kF32), {0, 1}, ReduceKind::kAdd));
  auto g = b.Finish();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE(Verify(g.value()).ok());
}

TEST(BuilderBoundedTest, OpsThatCannotTakeABoundedDimAreErrors) {
  struct Case {
    const char* what;
    void (*build)(Builder& b, int x, int xb, int n);
    const char* message;
  };
  const Case cases[] = {
      {"reshape", [](Builder& b, int, int xb, int) { b.Reshape(xb, {24}); }, "stablehlo.reshape does not take"},
      {"slice", [](Builder& b, int, int xb, int) { b.Slice(xb, {0, 0}, {2, 3}, {1, 1}); }, "stablehlo.slice does not take"},
      {"static and bounded", [](Builder& b, int x, int xb, int) { b.Binary(OpCode::kAdd, x, xb); }, "same type"},
      {"bounded result", [](Builder& b, int, int xb, int) { b.Result(xb); }, "a result is a dense buffer"},
      {"bounded parameter", [](Builder& b, int, int, int) { b.Param(TensorType{DType::kF32, {4}, 1}); },
       "a parameter is a dense buffer"},
      {"f32 size", [](Builder& b, int x, int, int) { b.SetDimensionSize(x, b.Constant(2, DType::kF32), 0); },
       "size must be an i32 scalar"},
      {"dimension", [](Builder& b, int, int xb, int) { b.GetDimensionSize(xb, 2); }, "dimension out of range"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Builder b;
    int x = b.Param(TensorType{DType::kF32, {8, 3}});
    int n = b.Param(TensorType{DType::kI32, {}});
    int xb = b.SetDimensionSize(x, n, 0);
    c.build(b, x, xb, n);
    auto g = b.Finish();
    ASSERT_FALSE(g.ok());
    EXPECT_NE(g.status().ToString().find(c.message), std::string::npos) << g.status().ToString();
  }
}

TEST(BuilderBoundedTest, TheBoundIsPartOfTheTypeEverywhere) {
  auto build = [](bool bounded) {
    Builder b;
    int x = b.Param(TensorType{DType::kF32, {8}});
    int n = b.Param(TensorType{DType::kI32, {}});
    int v = bounded ? b.SetDimensionSize(x, n, 0) : x;
    b.Result(b.Reduce(b.Unary(OpCode::kExp, v), b.Constant(0.0, DType::kF32), {0}, ReduceKind::kAdd));
    b.Result(n);
    return std::move(b.Finish().value());
  };
  Graph bounded = build(true), plain = build(false);
  EXPECT_NE(TensorType({DType::kF32, {8}, 1}), TensorType({DType::kF32, {8}}));
  EXPECT_NE(Fingerprint(bounded), Fingerprint(plain));
  ByteWriter w;
  WriteGraph(bounded, w);
  ByteReader r(w.bytes());
  auto back = ReadGraph(r);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(StructurallyEqual(back.value(), bounded));
  EXPECT_EQ(Fingerprint(back.value()), Fingerprint(bounded));
}

}  // namespace
}  // namespace tpu
