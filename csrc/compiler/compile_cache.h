// The compile cache in front of every backend's Compile. Key = the program's fingerprint, its
// compile options, the backend and kCompilerVersion. Tiers: in-process (bounded, Note [Cache
// eviction]) and a persistent directory (compiler/persistent_cache.h). Every miss is recorded
// with its reason (compiler/recompile.h); in cache-only mode (option cache_only) a miss is an
// error naming the program and why it missed; option cache_dump_dir writes each missed program's
// StableHLO text there.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/hash.h"
#include "base/status.h"
#include "compiler/recompile.h"
#include "ir/graph.h"
#include "runtime/device.h"

namespace tpu {

// One program the in-process tier holds, as torch_tpu.compile_cache.stats() lists it.
struct CacheEntryInfo {
  std::string name;
  uint64_t key = 0;
  int64_t ops = 0;
  int64_t hits = 0;
  int64_t compile_ns = 0;  // 0 when it came from the persistent tier
  bool from_disk = false;
};

struct CompileRecord {
  std::string name;
  CompileReason reason;
  std::string what;
};

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
  // Empties the in-process tier (the persistent one stays: PersistentCache::Clear).
  void Clear();
  std::vector<CacheEntryInfo> Entries() const;
  // The most recent compiles (up to 256) with why each was needed.
  std::vector<CompileRecord> Compiles() const;

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
    std::shared_ptr<std::atomic<int64_t>> hits = std::make_shared<std::atomic<int64_t>>(0);
    int64_t compile_ns = 0;
    bool from_disk = false;
  };
  using List = std::list<Entry>;
  uint64_t KeyOf(uint64_t fingerprint, const Backend& backend, const CompileOptions& options) const;
  StatusOr<ExecutablePtr> Lookup(const Graph& graph, uint64_t key, uint64_t check, Backend& backend,
                                 const CompileOptions& options);
  StatusOr<ExecutablePtr> Miss(const Graph& graph, uint64_t key, uint64_t check, Backend& backend,
                               const CompileOptions& options);
  // Why `graph` (key) is not in the in-process tier; records the nearest program of its structure.
  CompileReason ReasonLocked(const Graph& graph, uint64_t key, std::string* what);
  List::iterator InsertLocked(uint64_t key, uint64_t check, ExecutablePtr exe);
  void TouchLocked(List::iterator it);
  void EvictLocked();
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, List::iterator> map_;
  List probation_, protected_;  // most recently used first
  uint64_t tick_ = 0;           // shared-map lookups so far
  std::atomic<uint64_t> generation_{1};  // bumped by Clear()
  std::unordered_map<uint64_t, ExecutablePtr> by_structure_;  // the latest program of each structure
  std::unordered_set<uint64_t> evicted_;                      // keys evicted (bounded)
  std::deque<CompileRecord> compiles_;
};

}  // namespace tpu
