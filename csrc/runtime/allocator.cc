#include "runtime/allocator.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/metrics.h"

namespace tpu {
namespace {
std::string Mib(int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f MiB", bytes / (1024.0 * 1024.0));
  return buf;
}
}  // namespace

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
  return kb > 0 ? kb * 1024 : (int64_t{4} << 30);
}

Allocator::~Allocator() { EmptyCacheLocked(); }

int64_t Allocator::RoundSize(int64_t nbytes) {
  if (nbytes <= 0) return 64;
  if (nbytes < (1 << 20)) return (nbytes + 511) & ~int64_t{511};
  return (nbytes + (1 << 20) - 1) & ~((int64_t{1} << 20) - 1);
}

StatusOr<Buffer*> Allocator::Allocate(int64_t nbytes) {
  int64_t size = RoundSize(nbytes);
  void* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(size);
    if (it != cache_.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
    } else {
      if (stats_.reserved + size > stats_.capacity) EmptyCacheLocked();
      if (stats_.reserved + size > stats_.capacity) {
        ++stats_.num_ooms;
        return ResourceExhausted("tpu:" + std::to_string(device_) + " out of memory: tried to allocate " +
                                 Mib(nbytes) + "; " + Mib(stats_.allocated) + " in use of " +
                                 Mib(stats_.capacity) + " device capacity");
      }
      p = std::aligned_alloc(64, size);
      if (!p) {
        ++stats_.num_ooms;
        return ResourceExhausted("tpu:" + std::to_string(device_) +
                                 " out of memory: the host could not back " + Mib(nbytes));
      }
      stats_.reserved += size;
      if (stats_.reserved > stats_.peak_reserved) stats_.peak_reserved = stats_.reserved;
    }
    stats_.allocated += size;
    if (stats_.allocated > stats_.peak_allocated) stats_.peak_allocated = stats_.allocated;
    ++stats_.num_allocs;
  }
  return new Buffer(p, size, this, device_);
}

void Allocator::Free(Buffer* buffer) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.allocated -= buffer->nbytes();
    ++stats_.num_frees;
    cache_[buffer->nbytes()].push_back(buffer->data());
  }
  delete buffer;
}

MemoryStats Allocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void Allocator::ResetPeak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_allocated = stats_.allocated;
  stats_.peak_reserved = stats_.reserved;
}

void Allocator::ResetAccumulated() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.num_allocs = stats_.num_frees = stats_.num_ooms = 0;
}

void Allocator::EmptyCache() {
  std::lock_guard<std::mutex> lock(mu_);
  EmptyCacheLocked();
}

void Allocator::EmptyCacheLocked() {
  for (auto& [size, blocks] : cache_) {
    for (void* p : blocks) std::free(p);
    stats_.reserved -= size * static_cast<int64_t>(blocks.size());
  }
  cache_.clear();
}

}  // namespace tpu
