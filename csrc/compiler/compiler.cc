#include "compiler/compiler.h"

#include <chrono>
#include <memory>

#include "base/hash.h"
#include "base/metrics.h"
#include "base/options.h"
#include "compiler/passes/dce.h"
#include "compiler/program_log.h"
#include "ir/verifier.h"

namespace tpu {

Status Optimize(Graph& graph) {
  TPU_RETURN_IF_ERROR(Verify(graph));
  for (size_t i = 0; i < graph.ops.size(); ++i) graph.ops[i].src = static_cast<int32_t>(i);
  DcePass dce;
  TPU_ASSIGN_OR_RETURN(bool changed, dce.Run(graph));
  (void)changed;
  return Status::Ok();
}

int64_t EstimateWork(const Graph& g) {
  int64_t work = 0;
  for (const Op& op : g.ops) {
    int64_t n = op.type.NumElements();
    switch (op.code) {
      case OpCode::kDotGeneral:
        for (int64_t d : op.attrs.c) n *= g.TypeOf(op.operands[0]).dims[d];
        break;
      case OpCode::kConvolution:
        // An upper bound (each output element reads a window of the kernel, not all of it).
        n *= g.TypeOf(op.operands[1]).NumElements();
        break;
      default:
        if (!op.operands.empty()) n = std::max(n, g.TypeOf(op.operands[0]).NumElements());
        break;
    }
    work += n;
  }
  return work;
}

CompileCache& CompileCache::Get() {
  static CompileCache* cache = new CompileCache();
  return *cache;
}

uint64_t CompileCache::KeyOf(uint64_t fingerprint, const Backend& backend, const CompileOptions& options) const {
  uint64_t h = fingerprint;
  h = HashMix(h, options.Hash());
  // The backend's identity changes only when the process switches backends (tests); hashing its
  // name per lookup costs a few ns.
  const std::string id = backend.name();
  h = HashBytes(h, id.data(), id.size());
  return HashMix(h, kCompilerVersion);
}

StatusOr<ExecutablePtr> CompileCache::GetOrCompile(const Graph& graph, Backend& backend,
                                                   const CompileOptions& options) {
  return Lookup(graph, KeyOf(Fingerprint(graph), backend, options), 0, backend, options);
}

StatusOr<ExecutablePtr> CompileCache::GetOrCompile(const Graph& graph, const Fingerprint128& fingerprint,
                                                   Backend& backend, const CompileOptions& options) {
  return Lookup(graph, KeyOf(fingerprint.Lo(), backend, options), fingerprint.Hi() | 1, backend, options);
}

StatusOr<ExecutablePtr> CompileCache::Lookup(const Graph& graph, uint64_t key, uint64_t check, Backend& backend,
                                             const CompileOptions& options) {
  static Counter* hits = GetCounter("compile_cache_hits");
  static Counter* misses = GetCounter("compile_cache_misses");
  static Counter* compiles = GetCounter("compiles");
  static Counter* compile_ns = GetCounter("compile_time_ns");
  // The structural comparison guards against fingerprint collisions of 64-bit keys; a trusted
  // 128-bit key compares its other half.
  auto same = [&](const ExecutablePtr& exe, uint64_t exe_check) {
    return check ? exe_check == check : StructurallyEqual(exe->source(), graph);
  };
  // A small per-thread cache in front of the shared map: the eager path repeats the same few
  // programs, and this skips the lock for them. Entries keep their Executable alive.
  struct Recent {
    uint64_t key = 0;
    uint64_t check = 0;
    uint64_t generation = 0;
    ExecutablePtr exe;
  };
  thread_local Recent recent[64];
  Recent& slot = recent[key & 63];
  uint64_t generation = generation_.load(std::memory_order_acquire);
  if (slot.exe && slot.key == key && slot.generation == generation && same(slot.exe, slot.check)) {
    hits->Add();
    return slot.exe;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++tick_;
    auto it = map_.find(key);
    if (it != map_.end() && same(it->second->exe, it->second->check)) {
      hits->Add();
      TouchLocked(it->second);
      slot = Recent{key, check, generation, it->second->exe};
      return slot.exe;
    }
  }
  misses->Add();
  auto start = std::chrono::steady_clock::now();
  LogProgram(options.name, graph);
  TPU_ASSIGN_OR_RETURN(ExecutablePtr exe, backend.Compile(graph, options));
  compiles->Add();
  compile_ns->Add(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now() - start).count());
  std::lock_guard<std::mutex> lock(mu_);
  InsertLocked(key, check, exe);
  return exe;
}

void CompileCache::TouchLocked(List::iterator it) {
  it->last_use = tick_;
  if (it->is_protected) {
    protected_.splice(protected_.begin(), protected_, it);
    return;
  }
  it->is_protected = true;
  protected_.splice(protected_.begin(), probation_, it);
  int64_t limit = std::max<int64_t>(Flags().cache_size * 4 / 5, 1);
  while (static_cast<int64_t>(protected_.size()) > limit) {
    Entry& demoted = protected_.back();
    demoted.is_protected = false;
    demoted.last_use = tick_;
    probation_.splice(probation_.end(), protected_, std::prev(protected_.end()));  // its oldest end
  }
}

void CompileCache::InsertLocked(uint64_t key, uint64_t check, ExecutablePtr exe) {
  auto it = map_.find(key);
  if (it != map_.end()) {  // a collision or a concurrent compile of the same program
    it->second->exe = std::move(exe);
    it->second->check = check;
    TouchLocked(it->second);
    return;
  }
  EvictLocked();
  probation_.emplace_front();
  probation_.front().key = key;
  probation_.front().exe = std::move(exe);
  probation_.front().check = check;
  probation_.front().last_use = tick_;
  map_[key] = probation_.begin();
}

void CompileCache::EvictLocked() {
  static Counter* evictions = GetCounter("compile_cache_evictions");
  const int64_t capacity = std::max<int64_t>(Flags().cache_size, 1);
  const uint64_t stale = 2 * static_cast<uint64_t>(capacity);
  while (static_cast<int64_t>(map_.size()) >= capacity) {  // room for one more
    List* from;
    List::iterator victim;
    if (!protected_.empty() && tick_ - protected_.back().last_use > stale) {
      from = &protected_;
      victim = std::prev(protected_.end());
    } else if (!probation_.empty() && tick_ - probation_.back().last_use > stale) {
      from = &probation_;
      victim = std::prev(probation_.end());
    } else if (!probation_.empty()) {
      from = &probation_;
      victim = probation_.begin();  // the newest: keeps a stable part of a loop
    } else {
      from = &protected_;
      victim = std::prev(protected_.end());
    }
    map_.erase(victim->key);
    from->erase(victim);
    evictions->Add();
  }
}

size_t CompileCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return map_.size();
}

void CompileCache::Clear() {
  generation_.fetch_add(1, std::memory_order_acq_rel);  // invalidates the per-thread caches
  std::lock_guard<std::mutex> lock(mu_);
  map_.clear();
  probation_.clear();
  protected_.clear();
}

}  // namespace tpu
