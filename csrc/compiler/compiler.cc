#include "compiler/compiler.h"

#include <chrono>
#include <memory>

#include "base/metrics.h"
#include "base/options.h"
#include "compiler/fusion.h"
#include "compiler/passes/dce.h"
#include "compiler/program_log.h"
#include "ir/verifier.h"

namespace tpu {

StatusOr<ExecutablePtr> Compile(Graph graph, uint64_t fingerprint, std::string name) {
  TPU_RETURN_IF_ERROR(Verify(graph));
  DcePass dce;
  TPU_ASSIGN_OR_RETURN(bool changed, dce.Run(graph));
  (void)changed;
  auto exe = std::make_shared<Executable>();
  exe->graph = std::move(graph);
  exe->fingerprint = fingerprint;
  exe->name = std::move(name);
  TPU_RETURN_IF_ERROR(PlanExecutable(*exe));
  return ExecutablePtr(std::move(exe));
}

CompileCache& CompileCache::Get() {
  static CompileCache* cache = new CompileCache();
  return *cache;
}

StatusOr<ExecutablePtr> CompileCache::GetOrCompile(Graph&& graph, const char* name) {
  return GetOrCompile(static_cast<const Graph&>(graph), name);
}

StatusOr<ExecutablePtr> CompileCache::GetOrCompile(const Graph& graph, const char* name) {
  static Counter* hits = GetCounter("compile_cache_hits");
  static Counter* misses = GetCounter("compile_cache_misses");
  static Counter* compiles = GetCounter("compiles");
  static Counter* compile_ns = GetCounter("compile_time_ns");
  uint64_t key = Fingerprint(graph);
  // A small per-thread cache in front of the shared map: the eager path repeats the same few
  // programs, and this skips the lock for them. Entries keep their Executable alive.
  struct Recent {
    uint64_t key = 0;
    uint64_t generation = 0;
    ExecutablePtr exe;
  };
  thread_local Recent recent[64];
  Recent& slot = recent[key & 63];
  uint64_t generation = generation_.load(std::memory_order_acquire);
  if (slot.exe && slot.key == key && slot.generation == generation && StructurallyEqual(slot.exe->source, graph)) {
    hits->Add();
    return slot.exe;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    // The structural comparison guards against fingerprint collisions.
    if (it != map_.end() && StructurallyEqual(it->second->source, graph)) {
      hits->Add();
      slot = Recent{key, generation, it->second};
      return it->second;
    }
  }
  misses->Add();
  auto start = std::chrono::steady_clock::now();
  LogProgram(name, graph);
  Graph original = graph;
  TPU_ASSIGN_OR_RETURN(ExecutablePtr exe, Compile(graph, key, name));
  const_cast<Executable&>(*exe).source = std::move(original);
  compiles->Add();
  compile_ns->Add(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now() - start).count());
  std::lock_guard<std::mutex> lock(mu_);
  if (map_.emplace(key, exe).second) order_.push_back(key);
  else map_[key] = exe;
  while (static_cast<int64_t>(map_.size()) > std::max<int64_t>(Flags().cache_size, 1)) {
    map_.erase(order_.front());
    order_.pop_front();
  }
  return exe;
}

size_t CompileCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return map_.size();
}

void CompileCache::Clear() {
  generation_.fetch_add(1, std::memory_order_acq_rel);  // invalidates the per-thread caches
  std::lock_guard<std::mutex> lock(mu_);
  map_.clear();
  order_.clear();
}

}  // namespace tpu
