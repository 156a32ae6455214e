#include "runtime/host/host_allocator.h"

#include <sys/mman.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <algorithm>
#include <string>

#include "base/metrics.h"

#include "runtime/memory.h"

namespace tpu::host {
namespace {

constexpr int64_t kGranule = 512;
constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kSmallRequest = kMiB;        // up to this: the small pool
constexpr int64_t kSmallSegment = 2 * kMiB;
constexpr int64_t kMidRequest = 10 * kMiB;     // up to this: 20 MiB segments
constexpr int64_t kMidSegment = 20 * kMiB;
constexpr int64_t kSegmentRound = 2 * kMiB;
constexpr int64_t kPage = 4096;

int64_t RoundUp(int64_t n, int64_t to) { return (n + to - 1) / to * to; }

// Whether the rest of a free block of `block` bytes, after `size` are taken, is kept as a block.
bool WorthSplitting(int64_t block, int64_t size, bool small) {
  int64_t rest = block - size;
  return small ? rest >= kGranule : rest > kSmallRequest;
}

}  // namespace

HostAllocator::HostAllocator(int device, int64_t capacity) : device_(device) { stats_.capacity = capacity; }

HostAllocator::~HostAllocator() {
  // Segments with live blocks stay mapped (buffers may outlive the device at process exit).
  std::lock_guard<std::mutex> lock(mu_);
  ReleaseFreeSegmentsLocked();
}

int64_t HostAllocator::RoundSize(int64_t nbytes) { return nbytes <= 0 ? kGranule : RoundUp(nbytes, kGranule); }

int64_t HostAllocator::SegmentSize(int64_t size) {
  if (size <= kSmallRequest) return kSmallSegment;
  if (size <= kMidRequest) return kMidSegment;
  return RoundUp(size, kSegmentRound);
}

StatusOr<HostAllocator::Block*> HostAllocator::MapSegmentLocked(int64_t size, bool small, bool scratch) {
  int64_t seg = SegmentSize(size);
  // No free block fits: the wholly free large segments are all smaller than the request, and
  // would only pile up as shapes grow. They go back before a larger one is mapped, so a loop
  // over changing shapes settles on one working set (sized by its largest step).
  if (!small) ReleaseFreeSegmentsLocked(/*pool=*/&PoolOf(false, scratch), /*smaller_than=*/size);
  const int64_t budget = MemoryBudget(stats_);  // the capacity, or the process's lower limit
  if (stats_.reserved + seg > budget) ReleaseFreeSegmentsLocked();
  // Near the budget, a segment of the request's own size may still fit.
  if (stats_.reserved + seg > budget) seg = RoundUp(size, kPage);
  if (stats_.reserved + seg > budget) {
    ++stats_.num_ooms;
    return OutOfMemory(device_, size, stats_.allocated, stats_.capacity, stats_.limit);
  }
  void* p = mmap(nullptr, static_cast<size_t>(seg), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    ++stats_.num_ooms;
    return ResourceExhausted("tpu:" + std::to_string(device_) + " out of memory: the host could not back " +
                             FormatMib(seg));
  }
  ++segments_;
  stats_.reserved += seg;
  if (stats_.reserved > stats_.peak_reserved) stats_.peak_reserved = stats_.reserved;
  return new Block{static_cast<char*>(p), seg, true, small, nullptr, nullptr, 0, scratch};
}

StatusOr<HostAllocator::Block*> HostAllocator::TakeBlockLocked(int64_t nbytes, bool scratch) {
  int64_t size = RoundSize(nbytes);
  bool small = size <= kSmallRequest;
  FreeSet& pool = PoolOf(small, scratch);
  Block key{nullptr, size, true, small, nullptr, nullptr};
  Block* b = nullptr;
  auto it = pool.lower_bound(&key);  // best fit: the smallest free block that is large enough
  if (it != pool.end()) {
    b = *it;
    pool.erase(it);
  } else {
    TPU_ASSIGN_OR_RETURN(b, MapSegmentLocked(size, small, scratch));
  }
  if (WorthSplitting(b->size, size, small)) {
    auto* rest = new Block{b->ptr + size, b->size - size, true, small, b, b->next, b->ready_after, scratch};
    if (b->next) b->next->prev = rest;
    b->next = rest;
    b->size = size;
    pool.insert(rest);
  }
  b->free = false;
  live_.emplace(b->ptr, b);
  stats_.allocated += b->size;
  stats_.allocated_bytes_total += b->size;
  if (stats_.allocated > stats_.peak_allocated) stats_.peak_allocated = stats_.allocated;
  ++stats_.num_allocs;
  return b;
}

void HostAllocator::ReturnBlockLocked(Block* b, uint64_t ready_after) {
  b->ready_after = ready_after;
  stats_.allocated -= b->size;
  stats_.freed_bytes_total += b->size;
  ++stats_.num_frees;
  FreeSet& pool = PoolOf(b->small, b->scratch);
  b->free = true;
  // Merge with free neighbours: one block per free run of a segment.
  if (Block* n = b->next; n && n->free) {
    pool.erase(n);
    b->size += n->size;
    b->ready_after = std::max(b->ready_after, n->ready_after);
    b->next = n->next;
    if (n->next) n->next->prev = b;
    delete n;
  }
  if (Block* p = b->prev; p && p->free) {
    pool.erase(p);
    p->size += b->size;
    p->ready_after = std::max(p->ready_after, b->ready_after);
    p->next = b->next;
    if (b->next) b->next->prev = p;
    delete b;
    b = p;
  }
  pool.insert(b);
}

void HostAllocator::ReleaseFreeSegmentsLocked(FreeSet* only, int64_t smaller_than) {
  for (FreeSet* pool : {&small_free_, &large_free_, &scratch_free_}) {
    if (only && pool != only) continue;
    for (auto it = pool->begin(); it != pool->end();) {
      Block* b = *it;
      if (b->size >= smaller_than) break;  // ordered by size
      if (b->prev || b->next || PendingLocked(b)) {  // part of a segment in use, or queued work's
        ++it;
        continue;
      }
      munmap(b->ptr, static_cast<size_t>(b->size));
      stats_.reserved -= b->size;
      --segments_;
      it = pool->erase(it);
      delete b;
    }
  }
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
  StatusOr<Block*> p = TakeBlockLocked(buffer->nbytes(), /*scratch=*/false);
  if (!p.ok()) {
    int64_t free_bytes = MemoryBudget(stats_) - stats_.allocated;
    lock.unlock();  // observers run outside the lock (Note [Allocation events])
    NotifyOom(device_, buffer->nbytes(), free_bytes);
    return p.status();
  }
  Block* b = p.value();
  // Note [Stream-ordered frees]: memory queued tasks may still use. Work on this buffer is queued
  // after them anyway; a host read of it (never written: torch.empty) waits for them too.
  if (b->ready_after) buffer->MarkUse(b->ready_after);
  buffer->set_contents(b->ptr);
  const int64_t charged = b->size;  // the block, which may exceed RoundSize
  lock.unlock();
  NotifyAlloc(*buffer, charged);
  return Status::Ok();
}

bool HostAllocator::ReleaseQueued(Buffer* buffer) {
  if (!queue_) return false;
  void* p = buffer->contents();
  if (!p) return true;  // no memory: nothing to keep
  int64_t charged;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(p);
    if (it == live_.end()) return false;
    Block* b = it->second;
    charged = b->size;
    live_.erase(it);
    uint64_t last = buffer->last_use();
    ReturnBlockLocked(b, last > completed() ? last : 0);
  }
  static Counter* early = GetCounter("stream_ordered_frees");
  early->Add();
  NotifyFree(*buffer, charged);
  return true;
}

void HostAllocator::Free(Buffer* buffer) {
  if (void* p = buffer->contents(); p && !buffer->memory_released()) {
    if (internal::g_allocation_observer.load(std::memory_order_relaxed)) {
      int64_t charged;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = live_.find(p);
        charged = it != live_.end() ? it->second->size : RoundSize(buffer->nbytes());
      }
      NotifyFree(*buffer, charged);
    }
    ReturnScratch(p, buffer->nbytes());
  }
  delete buffer;
}

StatusOr<void*> HostAllocator::TakeScratch(int64_t nbytes) {
  std::lock_guard<std::mutex> lock(mu_);
  TPU_ASSIGN_OR_RETURN(Block * b, TakeBlockLocked(nbytes, /*scratch=*/true));
  return static_cast<void*>(b->ptr);
}

void HostAllocator::ReturnScratch(void* block, int64_t) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(block);
  if (it == live_.end()) return;  // not ours (a bug elsewhere); never corrupt the free lists
  Block* b = it->second;
  live_.erase(it);
  ReturnBlockLocked(b);
}

Status HostAllocator::ChargeHostCopy(int64_t bytes) {
  if (bytes <= 0) return Status::Ok();
  Status oom;
  int64_t free_bytes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t budget = MemoryBudget(stats_);
    if (stats_.reserved + bytes > budget) ReleaseFreeSegmentsLocked();
    if (stats_.reserved + bytes <= budget) {
      stats_.reserved += bytes;
      stats_.allocated += bytes;
      stats_.host_copies += bytes;
      stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
      stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
      stats_.peak_host_copies = std::max(stats_.peak_host_copies, stats_.host_copies);
      return Status::Ok();
    }
    ++stats_.num_ooms;
    oom = OutOfMemory(device_, bytes, stats_.allocated, stats_.capacity, stats_.limit);
    free_bytes = budget - stats_.allocated;
  }
  NotifyOom(device_, bytes, free_bytes);
  return oom;
}

void HostAllocator::ReleaseHostCopy(int64_t bytes) {
  if (bytes <= 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  stats_.reserved -= bytes;
  stats_.allocated -= bytes;
  stats_.host_copies -= bytes;
}

MemoryStats HostAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

int64_t HostAllocator::num_segments() const {
  std::lock_guard<std::mutex> lock(mu_);
  return segments_;
}

int64_t HostAllocator::num_free_blocks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(small_free_.size() + large_free_.size() + scratch_free_.size());
}

void HostAllocator::ResetPeak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_allocated = stats_.allocated;
  stats_.peak_reserved = stats_.reserved;
  stats_.peak_host_copies = stats_.host_copies;
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
  if (stats_.reserved > MemoryBudget(stats_)) ReleaseFreeSegmentsLocked();
  return Status::Ok();
}

std::vector<int64_t> HostAllocator::CachedBlocks() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int64_t> sizes;
  for (const FreeSet* pool : {&small_free_, &large_free_, &scratch_free_})
    for (const Block* b : *pool) sizes.push_back(b->size);
  return sizes;
}

void HostAllocator::EmptyCache() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ReleaseFreeSegmentsLocked();
  }
  // Host memory the device's work freed through the C heap (kernels' temporaries, CPU-fallback
  // copies) goes back to the system too.
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

}  // namespace tpu::host
