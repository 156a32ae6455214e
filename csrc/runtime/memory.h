// What every backend's allocator shares: making a buffer, its out-of-memory error, and the
// allocation events (Note [Allocation events] in allocator.h).
#pragma once

#include <cstdint>
#include <string>

#include "runtime/allocator.h"

namespace tpu {

// Allocator::Allocate for any backend: a new buffer of `allocator` on `device`, materialized at
// once with `materialize` (and deleted again when that fails).
StatusOr<Buffer*> NewBuffer(Allocator* allocator, int device, int64_t nbytes, bool materialize);

// "1.50 MiB"
std::string FormatMib(int64_t bytes);

// The ResourceExhausted error of a request that does not fit a device's capacity, or the
// process's own limit (MemoryStats::limit, when set and below the capacity).
Status OutOfMemory(int device, int64_t nbytes, int64_t in_use, int64_t capacity, int64_t limit = 0);

// What the budget is: the capacity, or the process's limit when that is lower.
inline int64_t MemoryBudget(const MemoryStats& s) {
  return s.limit > 0 && s.limit < s.capacity ? s.limit : s.capacity;
}

// The allocation events of one buffer (kAlloc after its memory was attached, kFree before it
// is returned) and of a refused request.
void NotifyAlloc(const Buffer& buffer, int64_t charged);
void NotifyFree(const Buffer& buffer, int64_t charged);
void NotifyOom(int device, int64_t nbytes, int64_t free_bytes);

// Note [Frees after fork]: true in a process forked from this one. A forked child holds copies
// of the parent's buffers whose memory and locks (an allocator's mutex, the buffer-id table's)
// may have been held by a parent thread at the fork: Buffer::Release frees nothing there (the
// child's copy of the memory goes away when it exits).
bool InForkedChild();

}  // namespace tpu
