// The host backend's allocator: device memory is host memory, from a size-bucketed cache of
// freed blocks, within a capacity budget (the chip's HBM, capped by what the host can back).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "runtime/allocator.h"

namespace tpu::host {

class HostAllocator final : public Allocator {
 public:
  HostAllocator(int device, int64_t capacity) : device_(device) { stats_.capacity = capacity; }
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

  // The size class a request of `nbytes` takes (64-byte aligned blocks).
  static int64_t RoundSize(int64_t nbytes);
  // A launch's scratch memory: counted in the device's memory like any buffer while it is held
  // (so peak memory figures include it) and cached like one when it is returned.
  StatusOr<void*> TakeScratch(int64_t nbytes);
  void ReturnScratch(void* block, int64_t nbytes);

 private:
  StatusOr<void*> TakeBlockLocked(int64_t nbytes);
  void EmptyCacheLocked();
  int device_;
  mutable std::mutex mu_;
  MemoryStats stats_;
  std::map<int64_t, std::vector<void*>> cache_;  // rounded size -> free blocks
};

}  // namespace tpu::host
