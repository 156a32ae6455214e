// The in-process compile cache.
#include "compiler/compiler.h"

#include <cmath>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "base/metrics.h"
#include "base/options.h"
#include "compiler/test_backend.h"
#include "ir/builder.h"

namespace tpu {
namespace {

CompileOptions Named(const char* name) {
  CompileOptions o;
  o.name = name;
  return o;
}

Graph AddN(int n, double c = 1.0) {
  Builder b;
  int x = b.Param(TensorType{DType::kF32, {n}});
  b.Result(b.Binary(OpCode::kAdd, x, b.ScalarLike(c, x)));
  return std::move(b.Finish()).value();
}

class CompileCacheTest : public ::testing::Test {
 public:
  void SetUp() override { CompileCache::Get().Clear(); }
  void TearDown() override {
    CompileCache::Get().Clear();
    ASSERT_TRUE(Options::Get().Set("cache_size", "4096").ok());
  }
  static int64_t Hits() { return GetCounter("compile_cache_hits")->value(); }
  static int64_t Misses() { return GetCounter("compile_cache_misses")->value(); }
  static int64_t Compiles() { return GetCounter("compiles")->value(); }
  StatusOr<ExecutablePtr> Get(Graph g, const char* name) {
    return CompileCache::Get().GetOrCompile(g, backend, Named(name));
  }
  FakeBackend backend;
};

TEST_F(CompileCacheTest, CountsHitsAndMisses) {
  CompileCache& cache = CompileCache::Get();
  EXPECT_EQ(cache.size(), 0u);
  const int64_t h0 = Hits(), m0 = Misses(), c0 = Compiles();

  auto a = Get(AddN(4), "add4");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(Hits() - h0, 0);
  EXPECT_EQ(Misses() - m0, 1);
  EXPECT_EQ(Compiles() - c0, 1);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(a.value()->name(), "add4");
  EXPECT_EQ(a.value()->fingerprint(), Fingerprint(AddN(4)));
  EXPECT_TRUE(StructurallyEqual(a.value()->source(), AddN(4)));

  auto again = Get(AddN(4), "add4 again");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.value(), a.value());  // the same Executable object
  EXPECT_EQ(Hits() - h0, 1);
  EXPECT_EQ(Misses() - m0, 1);
  EXPECT_EQ(Compiles() - c0, 1);

  auto other_shape = Get(AddN(5), "add5");
  auto other_const = Get(AddN(4, 2.0), "add4c2");
  ASSERT_TRUE(other_shape.ok() && other_const.ok());
  EXPECT_NE(other_shape.value(), a.value());
  EXPECT_NE(other_const.value(), a.value());
  EXPECT_EQ(Hits() - h0, 1);
  EXPECT_EQ(Misses() - m0, 3);
  EXPECT_EQ(cache.size(), 3u);

  ASSERT_TRUE(Get(AddN(5), "add5").ok());
  EXPECT_EQ(Hits() - h0, 2);

  cache.Clear();
  EXPECT_EQ(cache.size(), 0u);
  ASSERT_TRUE(Get(AddN(4), "add4").ok());
  EXPECT_EQ(Misses() - m0, 4);
}

TEST_F(CompileCacheTest, CompileErrorsAreReturnedAndNotCached) {
  Graph bad = AddN(3);
  bad.ops.back().operands = {0};  // add with one operand
  const int64_t m0 = Misses(), c0 = Compiles();
  auto r = Get(bad, "bad");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInternal);
  EXPECT_EQ(CompileCache::Get().size(), 0u);
  EXPECT_EQ(Misses() - m0, 1);
  EXPECT_EQ(Compiles() - c0, 0);
  EXPECT_FALSE(Get(bad, "bad").ok());
  EXPECT_EQ(Misses() - m0, 2);
}

TEST_F(CompileCacheTest, StaysWithinCacheSize) {
  ASSERT_TRUE(Options::Get().Set("cache_size", "2").ok());
  CompileCache& cache = CompileCache::Get();
  for (int i = 1; i <= 5; ++i) ASSERT_TRUE(Get(AddN(i), "n").ok());
  EXPECT_EQ(cache.size(), 2u);
  const int64_t m0 = Misses();
  for (int i = 1; i <= 5; ++i) EXPECT_TRUE(Get(AddN(i), "n").ok());  // evicted ones recompile
  EXPECT_GE(Misses() - m0, 3);
  EXPECT_EQ(cache.size(), 2u);
}

// Looks a program up from a fresh thread, so the per-thread front cache cannot answer it.
bool HitsFromAnotherThread(CompileCacheTest* t, Graph g) {
  int64_t h0 = GetCounter("compile_cache_hits")->value();
  std::thread th([&] { ASSERT_TRUE(t->Get(g, "other thread").ok()); });
  th.join();
  return GetCounter("compile_cache_hits")->value() > h0;
}

TEST_F(CompileCacheTest, ReusedProgramsSurviveNewOnes) {
  ASSERT_TRUE(Options::Get().Set("cache_size", "2").ok());
  ASSERT_TRUE(Get(AddN(1), "1").ok());
  ASSERT_TRUE(Get(AddN(2), "2").ok());
  EXPECT_TRUE(HitsFromAnotherThread(this, AddN(1)));  // 1 is reused: protected
  ASSERT_TRUE(Get(AddN(3), "3").ok());                // evicts 2, the entry never reused
  EXPECT_TRUE(HitsFromAnotherThread(this, AddN(1)));
  EXPECT_FALSE(HitsFromAnotherThread(this, AddN(2)));
}

TEST_F(CompileCacheTest, ALoopLargerThanTheCacheKeepsMostOfItsPrograms) {
  // 300 programs round and round through a 200-entry cache: FIFO or plain LRU would evict
  // each program just before it is needed again and compile all 300 every round.
  ASSERT_TRUE(Options::Get().Set("cache_size", "200").ok());
  std::vector<Graph> programs;
  for (int i = 1; i <= 300; ++i) programs.push_back(AddN(i));
  const int64_t c0 = Compiles();
  for (int round = 0; round < 4; ++round)
    for (const Graph& g : programs) ASSERT_TRUE(Get(g, "loop").ok());
  int64_t compiles = Compiles() - c0;
  EXPECT_GE(compiles, 300 + 3 * 100);  // at least the 100 that cannot fit, each round
  EXPECT_LE(compiles, 300 + 3 * 140) << "the cache cycles its entries instead of keeping reused programs";
  // Everything fits in a large enough cache: no compile after the first round.
  ASSERT_TRUE(Options::Get().Set("cache_size", "400").ok());
  CompileCache::Get().Clear();
  const int64_t c1 = Compiles();
  for (int round = 0; round < 3; ++round)
    for (const Graph& g : programs) ASSERT_TRUE(Get(g, "loop").ok());
  EXPECT_EQ(Compiles() - c1, 300);
}

TEST_F(CompileCacheTest, NaNConstantsHitTheCache) {
  const int64_t c0 = Compiles();
  double nan = std::nan("");
  ASSERT_TRUE(Get(AddN(4, nan), "nan").ok());
  EXPECT_TRUE(HitsFromAnotherThread(this, AddN(4, nan)));
  EXPECT_EQ(Compiles() - c0, 1);
  // -0.0 and 0.0 are different programs (x + -0.0 keeps the sign of a zero x; x + 0.0 does not).
  ASSERT_TRUE(Get(AddN(4, 0.0), "zero").ok());
  ASSERT_TRUE(Get(AddN(4, -0.0), "negative zero").ok());
  EXPECT_EQ(Compiles() - c0, 3);
}

TEST_F(CompileCacheTest, BackendsHaveTheirOwnEntries) {
  FakeBackend other("other");
  auto a = Get(AddN(4), "a");
  auto b = CompileCache::Get().GetOrCompile(AddN(4), other, Named("b"));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a.value(), b.value());
  EXPECT_EQ(other.compiles, 1);
}

}  // namespace
}  // namespace tpu
