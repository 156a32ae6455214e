#include "base/metrics.h"

#include <memory>
#include <mutex>

namespace tpu {
namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, std::unique_ptr<Counter>> counters;
};

Registry& GetRegistry() {
  static Registry* r = new Registry();
  return *r;
}

}  // namespace

Counter* GetCounter(const std::string& name) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto& slot = r.counters[name];
  if (!slot) slot = std::make_unique<Counter>();
  return slot.get();
}

std::map<std::string, int64_t> CounterSnapshot() {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::map<std::string, int64_t> out;
  for (auto& [name, c] : r.counters) out[name] = c->value();
  return out;
}

void ResetCounters() {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (auto& [name, c] : r.counters) c->Reset();
}

}  // namespace tpu
