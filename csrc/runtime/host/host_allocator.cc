#include "runtime/host/host_allocator.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "runtime/memory.h"

namespace tpu::host {

HostAllocator::~HostAllocator() { EmptyCacheLocked(); }

int64_t HostAllocator::RoundSize(int64_t nbytes) {
  if (nbytes <= 0) return 64;
  if (nbytes < (1 << 20)) return (nbytes + 511) & ~int64_t{511};
  return (nbytes + (1 << 20) - 1) & ~((int64_t{1} << 20) - 1);
}

StatusOr<void*> HostAllocator::TakeBlockLocked(int64_t nbytes) {
  int64_t size = RoundSize(nbytes);
  void* p = nullptr;
  auto it = cache_.find(size);
  if (it != cache_.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
  } else {
    int64_t budget = MemoryBudget(stats_);
    if (stats_.reserved + size > budget) EmptyCacheLocked();
    if (stats_.reserved + size > budget) {
      ++stats_.num_ooms;
      return OutOfMemory(device_, nbytes, stats_.allocated, stats_.capacity, stats_.limit);
    }
    p = std::aligned_alloc(64, size);
    if (!p) {
      ++stats_.num_ooms;
      return ResourceExhausted("tpu:" + std::to_string(device_) + " out of memory: the host could not back " +
                               FormatMib(nbytes));
    }
    stats_.reserved += size;
    if (stats_.reserved > stats_.peak_reserved) stats_.peak_reserved = stats_.reserved;
  }
  stats_.allocated += size;
  stats_.allocated_bytes_total += size;
  if (stats_.allocated > stats_.peak_allocated) stats_.peak_allocated = stats_.allocated;
  ++stats_.num_allocs;
  return p;
}

StatusOr<Buffer*> HostAllocator::Allocate(int64_t nbytes, bool materialize) {
  if (!materialize && RoundSize(nbytes) > stats_.capacity) {
    // Memory comes later, but a buffer larger than the whole device can never get it: say so now.
    Status oom;
    int64_t free_bytes;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.num_ooms;
      oom = OutOfMemory(device_, nbytes, stats_.allocated, stats_.capacity, stats_.limit);
      free_bytes = MemoryBudget(stats_) - stats_.allocated;
    }
    NotifyOom(device_, nbytes, free_bytes);
    return oom;
  }
  return NewBuffer(this, device_, nbytes, materialize);
}

Status HostAllocator::Materialize(Buffer* buffer) {
  if (buffer->materialized()) return Status::Ok();
  std::unique_lock<std::mutex> lock(mu_);
  if (buffer->materialized()) return Status::Ok();  // another thread won
  StatusOr<void*> p = TakeBlockLocked(buffer->nbytes());
  if (!p.ok()) {
    int64_t free_bytes = MemoryBudget(stats_) - stats_.allocated;
    lock.unlock();  // observers run outside the lock (Note [Allocation events])
    NotifyOom(device_, buffer->nbytes(), free_bytes);
    return p.status();
  }
  buffer->set_contents(p.value());
  lock.unlock();
  NotifyAlloc(*buffer, RoundSize(buffer->nbytes()));
  return Status::Ok();
}

void HostAllocator::Free(Buffer* buffer) {
  if (void* p = buffer->contents()) {
    NotifyFree(*buffer, RoundSize(buffer->nbytes()));
    ReturnScratch(p, buffer->nbytes());
  }
  delete buffer;
}

StatusOr<void*> HostAllocator::TakeScratch(int64_t nbytes) {
  std::lock_guard<std::mutex> lock(mu_);
  return TakeBlockLocked(nbytes);
}

void HostAllocator::ReturnScratch(void* block, int64_t nbytes) {
  int64_t size = RoundSize(nbytes);
  std::lock_guard<std::mutex> lock(mu_);
  stats_.allocated -= size;
  stats_.freed_bytes_total += size;
  ++stats_.num_frees;
  cache_[size].push_back(block);
}

MemoryStats HostAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void HostAllocator::ResetPeak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_allocated = stats_.allocated;
  stats_.peak_reserved = stats_.reserved;
}

void HostAllocator::ResetAccumulated() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.num_allocs = stats_.num_frees = stats_.num_ooms = 0;
  stats_.allocated_bytes_total = stats_.freed_bytes_total = 0;
}

Status HostAllocator::SetMemoryLimit(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.limit = bytes > 0 ? bytes : 0;
  // Cached blocks past the new budget go back to the system now.
  if (stats_.reserved > MemoryBudget(stats_)) EmptyCacheLocked();
  return Status::Ok();
}

std::vector<int64_t> HostAllocator::CachedBlocks() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int64_t> sizes;
  for (const auto& [size, blocks] : cache_) sizes.insert(sizes.end(), blocks.size(), size);
  return sizes;
}

void HostAllocator::EmptyCache() {
  std::lock_guard<std::mutex> lock(mu_);
  EmptyCacheLocked();
}

void HostAllocator::EmptyCacheLocked() {
  for (auto& [size, blocks] : cache_) {
    for (void* p : blocks) std::free(p);
    stats_.reserved -= size * static_cast<int64_t>(blocks.size());
  }
  cache_.clear();
}

}  // namespace tpu::host
