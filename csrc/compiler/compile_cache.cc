#include "compiler/compile_cache.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "base/metrics.h"
#include "base/options.h"
#include "compiler/compiler.h"
#include "compiler/persistent_cache.h"
#include "compiler/program_log.h"
#include "ir/printer.h"

namespace tpu {
namespace {

Counter* ReasonCounter(CompileReason r) {
  static Counter** counters = [] {
    auto** c = new Counter*[static_cast<int>(CompileReason::kCount)];
    for (int i = 0; i < static_cast<int>(CompileReason::kCount); ++i)
      c[i] = GetCounter(std::string("compile_reasons/") + CompileReasonName(static_cast<CompileReason>(i)));
    return c;
  }();
  return counters[static_cast<int>(r)];
}

std::string Hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// Option cache_dump_dir: the missed program's StableHLO text, one file per program.
void DumpMissed(const Graph& graph, const char* name, uint64_t key) {
  std::string dir = PathOption("cache_dump_dir");
  if (dir.empty()) return;
  std::string base;
  for (const char* p = name; *p; ++p) base += std::isalnum(static_cast<unsigned char>(*p)) ? *p : '_';
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::ofstream out(dir + "/" + base + "-" + Hex(key) + ".mlir");
  out << PrintStableHlo(graph);
}

}  // namespace

CompileCache& CompileCache::Get() {
  static CompileCache* cache = new CompileCache();
  return *cache;
}

uint64_t CompileCache::KeyOf(uint64_t fingerprint, const Backend& backend, const CompileOptions& options) const {
  uint64_t h = HashMix(fingerprint, options.Hash());
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
    std::shared_ptr<std::atomic<int64_t>> hits;
  };
  thread_local Recent recent[64];
  Recent& slot = recent[key & 63];
  uint64_t generation = generation_.load(std::memory_order_acquire);
  if (slot.exe && slot.key == key && slot.generation == generation && same(slot.exe, slot.check)) {
    hits->Add();
    slot.hits->fetch_add(1, std::memory_order_relaxed);
    return slot.exe;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++tick_;
    auto it = map_.find(key);
    if (it != map_.end() && same(it->second->exe, it->second->check)) {
      hits->Add();
      it->second->hits->fetch_add(1, std::memory_order_relaxed);
      TouchLocked(it->second);
      slot = Recent{key, check, generation, it->second->exe, it->second->hits};
      return slot.exe;
    }
  }
  return Miss(graph, key, check, backend, options);
}

StatusOr<ExecutablePtr> CompileCache::Miss(const Graph& graph, uint64_t key, uint64_t check, Backend& backend,
                                           const CompileOptions& options) {
  static Counter* misses = GetCounter("compile_cache_misses");
  static Counter* disk_hits = GetCounter("compile_cache_disk_hits");
  static Counter* compiles = GetCounter("compiles");
  static Counter* compile_ns = GetCounter("compile_time_ns");
  misses->Add();
  PersistentCache& disk = PersistentCache::Get();
  std::string disk_problem;
  if (disk.enabled()) {
    if (ExecutablePtr exe = disk.Load(key, check, graph, backend, options, &disk_problem)) {
      disk_hits->Add();
      std::lock_guard<std::mutex> lock(mu_);
      auto it = InsertLocked(key, check, exe);
      it->from_disk = true;
      by_structure_[StructureHash(graph)] = exe;
      return exe;
    }
  }
  std::string what;
  CompileReason reason;
  {
    std::lock_guard<std::mutex> lock(mu_);
    reason = ReasonLocked(graph, key, &what);
  }
  if (!disk_problem.empty()) what += what.empty() ? disk_problem : "; " + disk_problem;
  DumpMissed(graph, options.name, key);
  if (Flags().cache_only) {
    return FailedPrecondition(std::string("compile cache miss in cache-only mode (option cache_only): program '") +
                              options.name + "' of " + std::to_string(graph.ops.size()) +
                              " ops has not been compiled before (" + CompileReasonName(reason) +
                              (what.empty() ? "" : ": " + what) + ")");
  }
  auto start = std::chrono::steady_clock::now();
  LogProgram(options.name, graph);
  TPU_ASSIGN_OR_RETURN(ExecutablePtr exe, backend.Compile(graph, options));
  int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
  compiles->Add();
  compile_ns->Add(ns);
  ReasonCounter(reason)->Add();
  // A program that compiles faster than its entry is read back (the host executor plans a small
  // op's program in microseconds) is not worth a file: only slower compiles are persisted.
  if (disk.enabled() && ns >= Flags().cache_dir_min_compile_us * 1000) disk.Store(key, check, graph, *exe, backend);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = InsertLocked(key, check, exe);
  it->compile_ns = ns;
  uint64_t structure = StructureHash(graph);
  if (by_structure_.size() > 4096) by_structure_.clear();  // bounded; only reasons get coarser
  by_structure_[structure] = exe;
  compiles_.push_back(CompileRecord{options.name, reason, what});
  if (compiles_.size() > 256) compiles_.pop_front();
  return exe;
}

CompileReason CompileCache::ReasonLocked(const Graph& graph, uint64_t key, std::string* what) {
  if (evicted_.count(key)) {
    *what = "compiled before, then evicted from the in-process cache (option cache_size " +
            std::to_string(Flags().cache_size) + ")";
    return CompileReason::kEvicted;
  }
  auto it = by_structure_.find(StructureHash(graph));
  if (it == by_structure_.end() || !it->second) return CompileReason::kNew;
  const Graph& before = it->second->source();
  if (StructurallyEqual(before, graph)) {  // same program, another key: other compile options
    *what = "the same program with other compile options";
    return CompileReason::kOptions;
  }
  return Difference(before, graph, what);
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

CompileCache::List::iterator CompileCache::InsertLocked(uint64_t key, uint64_t check, ExecutablePtr exe) {
  auto it = map_.find(key);
  if (it != map_.end()) {  // a collision or a concurrent compile of the same program
    it->second->exe = std::move(exe);
    it->second->check = check;
    TouchLocked(it->second);
    return it->second;
  }
  EvictLocked();
  evicted_.erase(key);
  probation_.emplace_front();
  Entry& e = probation_.front();
  e.key = key;
  e.exe = std::move(exe);
  e.check = check;
  e.last_use = tick_;
  map_[key] = probation_.begin();
  return probation_.begin();
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
    if (evicted_.size() > 16384) evicted_.clear();
    evicted_.insert(victim->key);
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
  by_structure_.clear();
  evicted_.clear();
}

std::vector<CacheEntryInfo> CompileCache::Entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<CacheEntryInfo> out;
  for (const List* list : {&protected_, &probation_}) {
    for (const Entry& e : *list) {
      CacheEntryInfo info;
      info.name = e.exe->name();
      info.key = e.key;
      info.ops = static_cast<int64_t>(e.exe->source().ops.size());
      info.hits = e.hits->load(std::memory_order_relaxed);
      info.compile_ns = e.compile_ns;
      info.from_disk = e.from_disk;
      out.push_back(std::move(info));
    }
  }
  return out;
}

std::vector<CompileRecord> CompileCache::Compiles() const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::vector<CompileRecord>(compiles_.begin(), compiles_.end());
}

}  // namespace tpu
