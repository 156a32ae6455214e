#include "base/metrics.h"

#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace tpu {
namespace {

TEST(MetricsTest, CounterByNameIsStable) {
  Counter* a = GetCounter("metrics_test_a");
  Counter* b = GetCounter("metrics_test_b");
  EXPECT_NE(a, b);
  EXPECT_EQ(GetCounter("metrics_test_a"), a);
  a->Reset();
  b->Reset();
  a->Add();
  a->Add(4);
  b->Add(-2);
  EXPECT_EQ(a->value(), 5);
  EXPECT_EQ(b->value(), -2);
  auto snap = CounterSnapshot();
  EXPECT_EQ(snap.at("metrics_test_a"), 5);
  EXPECT_EQ(snap.at("metrics_test_b"), -2);
  a->Reset();
  EXPECT_EQ(a->value(), 0);
  EXPECT_EQ(b->value(), -2);
}

TEST(MetricsTest, ResetCountersZeroesEveryCounter) {
  GetCounter("metrics_test_c")->Add(3);
  GetCounter("metrics_test_d")->Add(9);
  ResetCounters();
  auto snap = CounterSnapshot();
  EXPECT_EQ(snap.at("metrics_test_c"), 0);
  EXPECT_EQ(snap.at("metrics_test_d"), 0);
  for (const auto& [name, value] : snap) EXPECT_EQ(value, 0) << name;
}

TEST(MetricsTest, ConcurrentAddsAreNotLost) {
  Counter* c = GetCounter("metrics_test_concurrent");
  c->Reset();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([] {
      // Looked up from each thread: the registry itself must be thread-safe too.
      Counter* mine = GetCounter("metrics_test_concurrent");
      for (int i = 0; i < 10000; ++i) mine->Add();
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(c->value(), 40000);
}

}  // namespace
}  // namespace tpu
