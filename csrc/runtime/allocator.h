// Device-memory allocator with a capacity budget (the chip's HBM, capped by what the host can
// back) and a size-bucketed cache of freed blocks. Exceeding the budget is a ResourceExhausted
// status, never an overcommitted allocation.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "base/status.h"
#include "runtime/buffer.h"

namespace tpu {

struct MemoryStats {
  int64_t allocated = 0, peak_allocated = 0;
  int64_t reserved = 0, peak_reserved = 0;
  int64_t num_allocs = 0, num_frees = 0, num_ooms = 0;
  int64_t capacity = 0;
};

class Allocator {
 public:
  Allocator(int device, int64_t capacity) : device_(device) { stats_.capacity = capacity; }
  ~Allocator();
  // A buffer of at least nbytes (64-byte aligned), with one reference owned by the caller.
  StatusOr<Buffer*> Allocate(int64_t nbytes);
  void Free(Buffer* buffer);
  MemoryStats stats() const;
  void ResetPeak();
  void ResetAccumulated();
  void EmptyCache();
  int64_t capacity() const { return stats_.capacity; }

 private:
  static int64_t RoundSize(int64_t nbytes);
  void EmptyCacheLocked();
  int device_;
  mutable std::mutex mu_;
  MemoryStats stats_;
  std::map<int64_t, std::vector<void*>> cache_;  // rounded size -> free blocks
};

// Bytes of memory the host can really back (MemAvailable at startup).
int64_t HostAvailableBytes();

}  // namespace tpu
