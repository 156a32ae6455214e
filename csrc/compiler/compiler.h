// The target-independent part of compiling a program: verification and the IR passes
// (compiler/passes/), and the compile cache in front of every backend's Compile.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "base/hash.h"
#include "base/status.h"
#include "ir/graph.h"
#include "runtime/device.h"

namespace tpu {

// Bumped whenever a change here or in a backend's code generation changes what a program
// compiles to (part of every compile-cache key, the persistent tier's included).
constexpr uint32_t kCompilerVersion = 2;

// Verifies `graph` and runs the pass pipeline over it. Each op's `src` is set to its index in the
// graph as given, and passes carry it to the ops they make from it.
Status Optimize(Graph& graph);

// Rough cost of running a graph (Executable::work()).
int64_t EstimateWork(const Graph& graph);

class CompileCache {
 public:
  static CompileCache& Get();
  // A cached Executable for this graph on `backend` with `options`, or a new one from
  // backend.Compile. Counts requests, hits, misses, compiles and compile time.
  StatusOr<ExecutablePtr> GetOrCompile(const Graph& graph, Backend& backend, const CompileOptions& options);
  // The same for a graph whose 128-bit fingerprint the caller built as it recorded the ops (a
  // fused window): the key is trusted, so a hit costs neither a walk nor a comparison.
  StatusOr<ExecutablePtr> GetOrCompile(const Graph& graph, const Fingerprint128& fingerprint, Backend& backend,
                                       const CompileOptions& options);
  size_t size() const;
  void Clear();

 private:
  // Note [Cache eviction]: a segmented LRU that survives loops. A new program enters the
  // probationary segment; a hit promotes it to the protected one (at most 4/5 of the entries, its
  // least recently used demoted back). To make room, an entry unused for more than twice the
  // cache's size goes first (protected, then probationary: stale programs of an earlier phase);
  // failing that, the newest probationary entry. So a loop with more programs than entries keeps
  // a stable part of them and compiles only the rest each round, where LRU and FIFO would evict
  // every program just before the loop needs it again (N compiles per round instead of N - size).
  struct Entry {
    uint64_t key = 0;
    uint64_t check = 0;  // a trusted fingerprint's second half; 0: compare the graph instead
    ExecutablePtr exe;
    bool is_protected = false;
    uint64_t last_use = 0;  // tick_ when last looked up
  };
  using List = std::list<Entry>;
  uint64_t KeyOf(uint64_t fingerprint, const Backend& backend, const CompileOptions& options) const;
  StatusOr<ExecutablePtr> Lookup(const Graph& graph, uint64_t key, uint64_t check, Backend& backend,
                                 const CompileOptions& options);
  void InsertLocked(uint64_t key, uint64_t check, ExecutablePtr exe);
  void TouchLocked(List::iterator it);
  void EvictLocked();
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, List::iterator> map_;
  List probation_, protected_;  // most recently used first
  uint64_t tick_ = 0;           // shared-map lookups so far
  std::atomic<uint64_t> generation_{1};  // bumped by Clear()
};

}  // namespace tpu
