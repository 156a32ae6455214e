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
    if (stats_.reserved + size > stats_.capacity) EmptyCacheLocked();
    if (stats_.reserved + size > stats_.capacity) {
      ++stats_.num_ooms;
      return OutOfMemory(device_, nbytes, stats_.allocated, stats_.capacity);
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
  if (stats_.allocated > stats_.peak_allocated) stats_.peak_allocated = stats_.allocated;
  ++stats_.num_allocs;
  return p;
}

StatusOr<Buffer*> HostAllocator::Allocate(int64_t nbytes, bool materialize) {
  if (!materialize && RoundSize(nbytes) > stats_.capacity) {
    // Memory comes later, but a buffer larger than the whole device can never get it: say so now.
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.num_ooms;
    return OutOfMemory(device_, nbytes, stats_.allocated, stats_.capacity);
  }
  return NewBuffer(this, device_, nbytes, materialize);
}

Status HostAllocator::Materialize(Buffer* buffer) {
  if (buffer->materialized()) return Status::Ok();
  std::lock_guard<std::mutex> lock(mu_);
  if (buffer->materialized()) return Status::Ok();  // another thread won
  TPU_ASSIGN_OR_RETURN(void* p, TakeBlockLocked(buffer->nbytes()));
  buffer->set_contents(p);
  return Status::Ok();
}

void HostAllocator::Free(Buffer* buffer) {
  if (void* p = buffer->contents()) ReturnScratch(p, buffer->nbytes());
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
