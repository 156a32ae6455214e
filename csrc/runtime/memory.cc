#include "runtime/memory.h"

#include <pthread.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace tpu {
namespace {

// A number from a one-line cgroup file: -1 when missing, unreadable, or unlimited ("max", or
// cgroup v1's page-rounded 2^63 - 1).
int64_t ReadLimit(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  if (!(f >> s) || s == "max") return -1;
  try {
    unsigned long long v = std::stoull(s);
    return v >= (1ull << 60) ? -1 : static_cast<int64_t>(v);
  } catch (...) {
    return -1;
  }
}

bool IsDir(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The tightest limit - usage over `dir` and its ancestors up to `root` (-1: no limit).
int64_t TightestUnder(const std::string& root, std::string rel, const char* limit_file, const char* usage_file) {
  int64_t best = -1;
  for (;;) {
    std::string dir = root + rel;
    int64_t limit = ReadLimit(dir + "/" + limit_file);
    if (limit >= 0) {
      int64_t usage = std::max<int64_t>(0, ReadLimit(dir + "/" + usage_file));
      int64_t left = std::max<int64_t>(0, limit - usage);
      best = best < 0 ? left : std::min(best, left);
    }
    if (rel.empty() || rel == "/") break;
    size_t slash = rel.find_last_of('/');
    rel = slash == std::string::npos || slash == 0 ? "" : rel.substr(0, slash);
  }
  return best;
}

std::atomic<bool> g_forked_child{false};
// Note [Frees after fork]: registered when the library loads.
const bool g_fork_handler = [] {
  pthread_atfork(nullptr, nullptr, [] { g_forked_child.store(true, std::memory_order_relaxed); });
  return true;
}();

}  // namespace

int64_t CgroupAvailableBytes(const std::string& proc_self_cgroup, const std::string& sysfs_root) {
  int64_t best = -1;
  auto take = [&](int64_t v) {
    if (v >= 0) best = best < 0 ? v : std::min(best, v);
  };
  std::istringstream lines(proc_self_cgroup);
  std::string line;
  while (std::getline(lines, line)) {
    // hierarchy-id:controllers:path
    size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (path == "/") path.clear();
    bool v2 = line.compare(0, a, "0") == 0 && controllers.empty();
    bool v1_memory = false;
    std::istringstream names(controllers);
    for (std::string name; std::getline(names, name, ',');) v1_memory |= name == "memory";
    if (!v2 && !v1_memory) continue;
    std::string root = v2 ? sysfs_root : sysfs_root + "/memory";
    // In a container the process's cgroup is often the mounted root itself (the path names the
    // host's view of it): fall back to the root when the path is not there.
    if (!path.empty() && !IsDir(root + path)) path.clear();
    if (v2) take(TightestUnder(root, path, "memory.max", "memory.current"));
    else take(TightestUnder(root, path, "memory.limit_in_bytes", "memory.usage_in_bytes"));
  }
  return best;
}

namespace internal {
std::atomic<AllocationObserver*> g_allocation_observer{nullptr};
}

void SetAllocationObserver(AllocationObserver* observer) {
  internal::g_allocation_observer.store(observer, std::memory_order_release);
}

int64_t HostAvailableBytes() {
  FILE* f = std::fopen("/proc/meminfo", "r");
  int64_t kb = 0;
  if (f) {
    char line[256];
    while (std::fgets(line, sizeof(line), f)) {
      if (std::sscanf(line, "MemAvailable: %ld kB", &kb) == 1) break;
    }
    std::fclose(f);
  }
  int64_t host = kb > 0 ? kb * 1024 : (int64_t{4} << 30);
  std::ifstream cg("/proc/self/cgroup");
  std::stringstream text;
  text << cg.rdbuf();
  int64_t cgroup = CgroupAvailableBytes(text.str(), "/sys/fs/cgroup");
  return cgroup >= 0 ? std::min(host, cgroup) : host;
}

bool InForkedChild() { return g_forked_child.load(std::memory_order_relaxed); }

StatusOr<Buffer*> NewBuffer(Allocator* allocator, int device, int64_t nbytes, bool materialize) {
  auto* buffer = new Buffer(nbytes, allocator, device);
  if (materialize) {
    Status st = allocator->Materialize(buffer);
    if (!st.ok()) {
      delete buffer;
      return st;
    }
  }
  return buffer;
}

std::string FormatMib(int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f MiB", bytes / (1024.0 * 1024.0));
  return buf;
}

Status OutOfMemory(int device, int64_t nbytes, int64_t in_use, int64_t capacity, int64_t limit) {
  std::string msg = "tpu:" + std::to_string(device) + " out of memory: tried to allocate " + FormatMib(nbytes) +
                    "; " + FormatMib(in_use) + " in use of " + FormatMib(capacity) + " device capacity";
  if (limit > 0 && limit < capacity)
    msg += ", of which this process may use " + FormatMib(limit) + " (set_per_process_memory_fraction)";
  return ResourceExhausted(msg);
}

namespace {
void Notify(AllocationEvent::Kind kind, const Buffer& b, int64_t charged) {
  AllocationEvent e;
  e.kind = kind;
  e.device = b.device();
  e.address = reinterpret_cast<uint64_t>(b.device_address());
  e.size = charged;
  e.requested = b.nbytes();
  NotifyAllocation(e);
}
}  // namespace

void NotifyAlloc(const Buffer& buffer, int64_t charged) {
  if (internal::g_allocation_observer.load(std::memory_order_relaxed)) Notify(AllocationEvent::Kind::kAlloc, buffer, charged);
}

void NotifyFree(const Buffer& buffer, int64_t charged) {
  if (internal::g_allocation_observer.load(std::memory_order_relaxed)) Notify(AllocationEvent::Kind::kFree, buffer, charged);
}

void NotifyOom(int device, int64_t nbytes, int64_t free_bytes) {
  if (!internal::g_allocation_observer.load(std::memory_order_relaxed)) return;
  AllocationEvent e;
  e.kind = AllocationEvent::Kind::kOom;
  e.device = device;
  e.size = nbytes;
  e.requested = nbytes;
  e.free_bytes = free_bytes;
  NotifyAllocation(e);
}

}  // namespace tpu
