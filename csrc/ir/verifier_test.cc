// Verify() and the structural fingerprint used as the compile-cache key.
#include "ir/verifier.h"

#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "ir/builder.h"

namespace tpu {
namespace {

TensorType F32(Dims dims) { return TensorType{DType::kF32, std::move(dims)}; }

// y = (x + broadcast(b)) * 2
Graph Small(Dims xdims = {2, 3}, Dims bdims_attr = {1}, OpCode op = OpCode::kMultiply,
            double scale = 2.0, DType dt = DType::kF32) {
  Builder b;
  int x = b.Param(TensorType{dt, xdims});
  int v = b.Param(TensorType{dt, {xdims[bdims_attr[0]]}});
  int bb = b.BroadcastInDim(v, xdims, bdims_attr);
  int s = b.Binary(OpCode::kAdd, x, bb);
  int c = b.ScalarLike(scale, s);
  b.Result(b.Binary(op, s, c));
  auto g = b.Finish();
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return std::move(g).value();
}

void ExpectInternal(const Graph& g, const std::string& fragment) {
  Status s = Verify(g);
  ASSERT_FALSE(s.ok()) << "expected: " << fragment;
  EXPECT_EQ(s.code(), Code::kInternal);
  EXPECT_NE(s.message().find(fragment), std::string::npos) << s.message();
}

TEST(VerifierTest, AcceptsBuiltGraphs) {
  EXPECT_TRUE(Verify(Small()).ok());
  Graph empty;
  EXPECT_TRUE(Verify(empty).ok());
  Graph params_only;
  params_only.params = {F32({3})};
  params_only.results = {0, 0};
  EXPECT_TRUE(Verify(params_only).ok());
}

TEST(VerifierTest, RejectsWrongArity) {
  Graph g = Small();
  g.ops[1].operands.push_back(0);  // add with 3 operands
  ExpectInternal(g, "stablehlo.add expects 2 operands, got 3");
}

TEST(VerifierTest, RejectsUseBeforeDefinition) {
  Graph g = Small();
  // Values: x=0, v=1, broadcast=2, add=3, constant=4, broadcast=5, multiply=6.
  g.ops[1].operands = {0, 6};
  ExpectInternal(g, "stablehlo.add uses value %6 before it is defined");
  Graph h = Small();
  h.ops[1].operands = {0, 3};  // its own result
  ExpectInternal(h, "uses value %3 before it is defined");
  Graph k = Small();
  k.ops[1].operands = {-1, 2};
  ExpectInternal(k, "uses value %-1");
}

TEST(VerifierTest, RejectsPlaceholderAndNegativeDims) {
  Graph g = Small();
  g.ops.insert(g.ops.begin(), Op{OpCode::kParameterPlaceholder, {}, F32({}), {}});
  // (operand ids are now off by one, but the placeholder is reported first)
  ExpectInternal(g, "placeholder op left in a program");
  Graph h = Small();
  h.ops[0].type.dims = {2, -3};
  ExpectInternal(h, "stablehlo.broadcast_in_dim has a negative dimension");
}

TEST(VerifierTest, RejectsElementwiseShapeMismatch) {
  Graph g = Small();
  g.ops[1].type.dims = {3, 2};
  ExpectInternal(g, "stablehlo.add operand shape differs from its result");
  // convert changes the element type, never the shape
  Builder b;
  int x = b.Param(F32({2, 3}));
  b.Result(b.Convert(x, DType::kF64));
  Graph c = std::move(b.Finish()).value();
  EXPECT_TRUE(Verify(c).ok());
  c.ops[0].type.dims = {6};
  ExpectInternal(c, "stablehlo.convert operand shape differs from its result");
}

TEST(VerifierTest, RejectsBadResult) {
  Graph g = Small();
  g.results = {7};
  ExpectInternal(g, "result is not a value");
  g.results = {-1};
  ExpectInternal(g, "result is not a value");
}

TEST(FingerprintTest, EqualForEqualGraphs) {
  Graph a = Small(), b = Small();
  EXPECT_EQ(Fingerprint(a), Fingerprint(b));
  EXPECT_TRUE(StructurallyEqual(a, b));
  Graph c = a;  // a copy
  EXPECT_EQ(Fingerprint(a), Fingerprint(c));
}

TEST(FingerprintTest, DiffersWhenAnythingDiffers) {
  const Graph base = Small();
  const uint64_t h = Fingerprint(base);
  struct Variant {
    const char* what;
    Graph g;
  };
  std::vector<Variant> variants;
  variants.push_back({"shape", Small({4, 3})});
  variants.push_back({"broadcast attribute", Small({3, 3}, {0})});
  variants.push_back({"op", Small({2, 3}, {1}, OpCode::kSubtract)});
  variants.push_back({"constant value", Small({2, 3}, {1}, OpCode::kMultiply, 3.0)});
  variants.push_back({"dtype", Small({2, 3}, {1}, OpCode::kMultiply, 2.0, DType::kF64)});
  {
    Graph g = base;
    g.results.push_back(0);
    variants.push_back({"results", std::move(g)});
  }
  {
    Graph g = base;
    std::swap(g.ops[1].operands[0], g.ops[1].operands[1]);
    variants.push_back({"operand order", std::move(g)});
  }
  {
    Graph g = base;
    g.ops[1].attrs.i = 1;  // an attribute field the op does not use still counts
    variants.push_back({"attr i", std::move(g)});
  }
  {
    Graph g = base;
    g.ops[1].attrs.kind = 1;
    variants.push_back({"attr kind", std::move(g)});
  }
  {
    Graph g = base;
    g.ops[0].attrs.b = {0};
    variants.push_back({"attr b", std::move(g)});
  }
  for (const auto& v : variants) {
    EXPECT_NE(Fingerprint(v.g), h) << v.what;
    EXPECT_FALSE(StructurallyEqual(v.g, base)) << v.what;
  }
  // And they all differ from each other.
  for (size_t i = 0; i < variants.size(); ++i)
    for (size_t j = i + 1; j < variants.size(); ++j)
      EXPECT_NE(Fingerprint(variants[i].g), Fingerprint(variants[j].g))
          << variants[i].what << " vs " << variants[j].what;
}

TEST(FingerprintTest, AttributeAloneChangesIt) {
  // Same types everywhere; only broadcast_dimensions differs.
  Graph a = Small({3, 3}, {0}), b = Small({3, 3}, {1});
  EXPECT_EQ(a.params, b.params);
  EXPECT_NE(Fingerprint(a), Fingerprint(b));
  EXPECT_FALSE(StructurallyEqual(a, b));
}

TEST(FingerprintTest, ReduceDimsAreCanonical) {
  auto make = [](Dims dims) {
    Builder b;
    int x = b.Param(F32({2, 3, 4}));
    b.Result(b.Reduce(x, b.Constant(0, DType::kF32), dims, ReduceKind::kAdd));
    return std::move(b.Finish()).value();
  };
  EXPECT_EQ(Fingerprint(make({2, 0})), Fingerprint(make({0, 2})));
  EXPECT_NE(Fingerprint(make({0, 1})), Fingerprint(make({0, 2})));
}

}  // namespace
}  // namespace tpu
