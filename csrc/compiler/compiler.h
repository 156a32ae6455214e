// The compiler: verify -> passes -> fusion/buffer plan -> Executable, behind an in-process cache
// keyed by the program's structural fingerprint.
#pragma once

#include <atomic>
#include <list>
#include <mutex>
#include <unordered_map>

#include "base/status.h"
#include "ir/graph.h"
#include "runtime/executable.h"

namespace tpu {

StatusOr<ExecutablePtr> Compile(Graph graph, uint64_t fingerprint, std::string name);

class CompileCache {
 public:
  static CompileCache& Get();
  // Returns a cached Executable for this graph, or compiles one. Counts hits/misses/compiles.
  StatusOr<ExecutablePtr> GetOrCompile(Graph&& graph, const char* name);
  // The same for a graph the caller keeps (copied only on a miss).
  StatusOr<ExecutablePtr> GetOrCompile(const Graph& graph, const char* name);
  size_t size() const;
  void Clear();

 private:
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, ExecutablePtr> map_;
  std::list<uint64_t> order_;  // insertion order, oldest first, for eviction
  std::atomic<uint64_t> generation_{1};  // bumped by Clear()
};

}  // namespace tpu
