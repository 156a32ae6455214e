// The host backend's allocator: device memory is host memory, kept within a capacity budget (the
// chip's HBM, capped by what the host and its cgroup can back: runtime/allocator.h
// HostAvailableBytes).
//
// Note [Host allocator]: a caching allocator in the manner of PyTorch's CUDA one. Memory comes
// from the system in segments (mmap): 2 MiB segments serve requests below 1 MiB (the small
// pool), 20 MiB segments requests up to 10 MiB, larger requests a segment of their own size
// (rounded to 2 MiB) -- the large pool. A request takes the best-fitting free block of its pool
// (the smallest that is large enough), split when the rest is worth keeping (512 bytes in the
// small pool, more than 1 MiB in the large one); a freed block merges with its free neighbours.
// When nothing fits a large request, the wholly free large segments (all too small for it) are
// unmapped before a new one is mapped.
// So freed memory serves requests of any size, not only of the size it had: a loop whose shapes
// change (sequence lengths, batch sizes) reuses one working set instead of caching a set per
// shape. EmptyCache() unmaps every segment that is wholly free (its pages go back to the system
// at once) and trims the C heap. A request that does not fit the budget first returns the free
// segments, then fails with an out-of-memory error; fragmentation can make that happen before the
// budget is reached, as on a GPU.
// A launch's scratch (TakeScratch) comes from segments of its own, which buffers never use: a
// buffer's freed memory may still be in use by queued tasks (Note [Stream-ordered frees] in
// runtime/buffer.h), and a running task's scratch could not wait for them.
#pragma once

#include <cstdint>
#include <mutex>
#include <set>
#include <unordered_map>

#include "runtime/allocator.h"
#include "runtime/queue.h"

namespace tpu::host {

class HostAllocator final : public Allocator {
 public:
  HostAllocator(int device, int64_t capacity);
  ~HostAllocator() override;
  StatusOr<Buffer*> Allocate(int64_t nbytes, bool materialize = true) override;
  Status Materialize(Buffer* buffer) override;
  void Free(Buffer* buffer) override;
  MemoryStats stats() const override;
  void ResetPeak() override;
  void ResetAccumulated() override;
  void EmptyCache() override;
  int64_t capacity() const override { return stats_.capacity; }
  Status SetMemoryLimit(int64_t bytes) override;
  std::vector<int64_t> CachedBlocks() const override;
  int64_t ChargedBytes(int64_t nbytes) const override { return RoundSize(nbytes); }
  bool ReleaseQueued(Buffer* buffer) override;
  Status ChargeHostCopy(int64_t bytes) override;
  void ReleaseHostCopy(int64_t bytes) override;
  // The device's queue, whose order makes stream-ordered frees safe (Note [Stream-ordered frees]);
  // without one the allocator keeps a freed buffer's memory until its last task lets go.
  void SetQueue(const Queue* queue) { queue_ = queue; }

  // The block size a request of `nbytes` takes: 512-byte granules (64-byte aligned blocks).
  static int64_t RoundSize(int64_t nbytes);
  // The segment a request of rounded `size` would map when nothing cached fits.
  static int64_t SegmentSize(int64_t size);
  // A launch's scratch memory: counted in the device's memory like any buffer while it is held
  // (so peak memory figures include it) and cached like one when it is returned.
  StatusOr<void*> TakeScratch(int64_t nbytes);
  void ReturnScratch(void* block, int64_t nbytes);
  // Segments mapped now, and free blocks (for tests of the cache's shape).
  int64_t num_segments() const;
  int64_t num_free_blocks() const;

 private:
  struct Block {
    char* ptr;
    int64_t size;
    bool free;
    bool small;       // its segment's pool
    Block* prev;      // neighbours within the segment (null at its ends)
    Block* next;
    // Free, but tasks queued up to this sequence number may still use it (Note [Stream-ordered
    // frees]): a buffer that takes it is ordered after them; its segment is not unmapped before
    // they have run.
    uint64_t ready_after = 0;
    bool scratch = false;  // its segment serves scratch only
  };
  struct BySize {
    bool operator()(const Block* a, const Block* b) const {
      return a->size != b->size ? a->size < b->size : a->ptr < b->ptr;
    }
  };
  using FreeSet = std::set<Block*, BySize>;

  // Scratch comes from segments of its own: a running task uses it at once, so it could not take
  // a block that queued work may still use (Note [Stream-ordered frees]), and buffers never
  // take (or leave pending) a scratch block.
  StatusOr<Block*> TakeBlockLocked(int64_t nbytes, bool scratch);
  bool PendingLocked(const Block* b) const { return b->ready_after > completed(); }
  // Without a queue (before one is attached, or once the device detached it at teardown) no
  // queued work can still use a block: none is pending, so the destructor unmaps them all.
  uint64_t completed() const { return queue_ ? queue_->completed() : UINT64_MAX; }
  StatusOr<Block*> MapSegmentLocked(int64_t size, bool small, bool scratch);
  void ReturnBlockLocked(Block* b, uint64_t ready_after = 0);
  // Unmaps the wholly free segments (of one pool, and below a size, when given).
  void ReleaseFreeSegmentsLocked(FreeSet* only = nullptr, int64_t smaller_than = INT64_MAX);
  FreeSet& PoolOf(bool small, bool scratch) { return scratch ? scratch_free_ : small ? small_free_ : large_free_; }

  int device_;
  mutable std::mutex mu_;
  MemoryStats stats_;
  FreeSet small_free_, large_free_, scratch_free_;
  std::unordered_map<const void*, Block*> live_;  // allocated blocks by address
  int64_t segments_ = 0;
  const Queue* queue_ = nullptr;
};

}  // namespace tpu::host
