// The primitive caches' LRU: bounded, least recently used evicted first, values outliving eviction.
#include "runtime/host/lru_cache.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace tpu::host {
namespace {

TEST(LruCacheTest, BoundedAndEvictsTheLeastRecentlyUsed) {
  LruCache<int, std::string> c(3);
  for (int k = 0; k < 3; ++k) c.Insert(k, std::make_shared<std::string>(std::to_string(k)));
  ASSERT_NE(c.Find(0), nullptr);  // 0 is now the most recent; 1 the least
  c.Insert(3, std::make_shared<std::string>("3"));
  EXPECT_EQ(c.size(), 3u);
  EXPECT_EQ(c.Find(1), nullptr);
  EXPECT_EQ(*c.Find(0), "0");
  EXPECT_EQ(*c.Find(2), "2");
  EXPECT_EQ(*c.Find(3), "3");
  for (int k = 10; k < 1000; ++k) c.Insert(k, std::make_shared<std::string>("x"));
  EXPECT_EQ(c.size(), 3u);
}

TEST(LruCacheTest, EvictedValueStaysAliveForItsHolder) {
  LruCache<int, std::string> c(1);
  std::shared_ptr<std::string> held = c.Insert(1, std::make_shared<std::string>("running"));
  c.Insert(2, std::make_shared<std::string>("other"));
  EXPECT_EQ(c.Find(1), nullptr);
  EXPECT_EQ(*held, "running");  // a primitive evicted mid-run is still usable by its caller
}

TEST(LruCacheTest, ConcurrentUse) {
  LruCache<int, int> c(8);
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&c, t] {
      for (int i = 0; i < 2000; ++i) {
        int k = (i * 7 + t) % 20;
        if (auto v = c.Find(k)) EXPECT_EQ(*v, k);
        else c.Insert(k, std::make_shared<int>(k));
      }
    });
  for (auto& th : ts) th.join();
  EXPECT_LE(c.size(), 8u);
}

}  // namespace
}  // namespace tpu::host
