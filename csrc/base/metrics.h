// Process-wide named counters (executions, compiles, cache hits, transfers, fallbacks...).
// A Counter* is looked up once and then bumped with a relaxed atomic add on the hot path.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>

namespace tpu {

class Counter {
 public:
  void Add(int64_t v = 1) { value_.fetch_add(v, std::memory_order_relaxed); }
  int64_t value() const { return value_.load(std::memory_order_relaxed); }
  void Reset() { value_.store(0, std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> value_{0};
};

// Returns the counter with this name, creating it on first use. The pointer stays valid forever.
Counter* GetCounter(const std::string& name);
std::map<std::string, int64_t> CounterSnapshot();
void ResetCounters();

}  // namespace tpu
