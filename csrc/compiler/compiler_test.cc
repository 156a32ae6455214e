// The in-process compile cache.
#include "compiler/compiler.h"

#include <gtest/gtest.h>

#include "base/metrics.h"
#include "base/options.h"
#include "ir/builder.h"

namespace tpu {
namespace {

Graph AddN(int n, double c = 1.0) {
  Builder b;
  int x = b.Param(TensorType{DType::kF32, {n}});
  b.Result(b.Binary(OpCode::kAdd, x, b.ScalarLike(c, x)));
  return std::move(b.Finish()).value();
}

class CompileCacheTest : public ::testing::Test {
 protected:
  void SetUp() override { CompileCache::Get().Clear(); }
  void TearDown() override {
    CompileCache::Get().Clear();
    ASSERT_TRUE(Options::Get().Set("cache_size", "4096").ok());
  }
  static int64_t Hits() { return GetCounter("compile_cache_hits")->value(); }
  static int64_t Misses() { return GetCounter("compile_cache_misses")->value(); }
  static int64_t Compiles() { return GetCounter("compiles")->value(); }
};

TEST_F(CompileCacheTest, CountsHitsAndMisses) {
  CompileCache& cache = CompileCache::Get();
  EXPECT_EQ(cache.size(), 0u);
  const int64_t h0 = Hits(), m0 = Misses(), c0 = Compiles();

  auto a = cache.GetOrCompile(AddN(4), "add4");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(Hits() - h0, 0);
  EXPECT_EQ(Misses() - m0, 1);
  EXPECT_EQ(Compiles() - c0, 1);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(a.value()->name, "add4");
  EXPECT_EQ(a.value()->fingerprint, Fingerprint(AddN(4)));
  EXPECT_TRUE(StructurallyEqual(a.value()->source, AddN(4)));

  auto again = cache.GetOrCompile(AddN(4), "add4 again");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.value(), a.value());  // the same Executable object
  EXPECT_EQ(Hits() - h0, 1);
  EXPECT_EQ(Misses() - m0, 1);
  EXPECT_EQ(Compiles() - c0, 1);

  auto other_shape = cache.GetOrCompile(AddN(5), "add5");
  auto other_const = cache.GetOrCompile(AddN(4, 2.0), "add4c2");
  ASSERT_TRUE(other_shape.ok() && other_const.ok());
  EXPECT_NE(other_shape.value(), a.value());
  EXPECT_NE(other_const.value(), a.value());
  EXPECT_EQ(Hits() - h0, 1);
  EXPECT_EQ(Misses() - m0, 3);
  EXPECT_EQ(cache.size(), 3u);

  ASSERT_TRUE(cache.GetOrCompile(AddN(5), "add5").ok());
  EXPECT_EQ(Hits() - h0, 2);

  cache.Clear();
  EXPECT_EQ(cache.size(), 0u);
  ASSERT_TRUE(cache.GetOrCompile(AddN(4), "add4").ok());
  EXPECT_EQ(Misses() - m0, 4);
}

TEST_F(CompileCacheTest, CompileErrorsAreReturnedAndNotCached) {
  Graph bad = AddN(3);
  bad.ops.back().operands = {0};  // add with one operand
  const int64_t m0 = Misses(), c0 = Compiles();
  auto r = CompileCache::Get().GetOrCompile(Graph(bad), "bad");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInternal);
  EXPECT_EQ(CompileCache::Get().size(), 0u);
  EXPECT_EQ(Misses() - m0, 1);
  EXPECT_EQ(Compiles() - c0, 0);
  EXPECT_FALSE(CompileCache::Get().GetOrCompile(std::move(bad), "bad").ok());
  EXPECT_EQ(Misses() - m0, 2);
}

TEST_F(CompileCacheTest, EvictsOldestBeyondCacheSize) {
  ASSERT_TRUE(Options::Get().Set("cache_size", "2").ok());
  CompileCache& cache = CompileCache::Get();
  ASSERT_TRUE(cache.GetOrCompile(AddN(1), "1").ok());
  ASSERT_TRUE(cache.GetOrCompile(AddN(2), "2").ok());
  ASSERT_TRUE(cache.GetOrCompile(AddN(3), "3").ok());  // evicts AddN(1)
  EXPECT_EQ(cache.size(), 2u);
  const int64_t h0 = Hits(), m0 = Misses();
  ASSERT_TRUE(cache.GetOrCompile(AddN(3), "3").ok());
  ASSERT_TRUE(cache.GetOrCompile(AddN(2), "2").ok());
  EXPECT_EQ(Hits() - h0, 2);
  ASSERT_TRUE(cache.GetOrCompile(AddN(1), "1").ok());
  EXPECT_EQ(Misses() - m0, 1);
  EXPECT_EQ(cache.size(), 2u);
}

}  // namespace
}  // namespace tpu
