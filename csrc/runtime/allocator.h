// Allocator: creates a device's buffers and keeps its memory budget. Each backend implements it
// (the host's caching allocator is runtime/host/host_allocator.h). Exceeding the budget is a
// ResourceExhausted status, never an overcommitted allocation.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "runtime/buffer.h"

namespace tpu {

struct MemoryStats {
  int64_t allocated = 0, peak_allocated = 0;
  int64_t reserved = 0, peak_reserved = 0;
  int64_t num_allocs = 0, num_frees = 0, num_ooms = 0;
  int64_t allocated_bytes_total = 0, freed_bytes_total = 0;  // accumulated, like num_allocs
  int64_t capacity = 0;
  int64_t limit = 0;  // the process's own cap on reserved memory (SetMemoryLimit); 0: none
  // Host copies of device tensors charged to the device (ChargeHostCopy), part of the above.
  int64_t host_copies = 0, peak_host_copies = 0;
};

// Note [Allocation events]: every backend's allocator reports when memory is attached to a buffer
// (kAlloc, at Materialize: in fused mode that is when a value first needs memory, not when the
// tensor was made), returned (kFree), and refused (kOom), to at most one process-wide observer
// (the torch layer's memory history). The address is the buffer's device address (Note [Device
// pointers]); the size is what the device's memory was charged (the block), `requested` the
// buffer's own size. Observers run on the allocating or freeing thread, outside the allocator's
// lock, and must not block. With no observer the cost is one atomic load per event.
struct AllocationEvent {
  enum class Kind : uint8_t { kAlloc, kFree, kOom };
  Kind kind = Kind::kAlloc;
  int device = 0;
  uint64_t address = 0;  // kOom: 0
  int64_t size = 0;
  int64_t requested = 0;
  int64_t free_bytes = 0;  // kOom: what the device's budget still had
};

class AllocationObserver {
 public:
  virtual ~AllocationObserver() = default;
  virtual void OnAllocationEvent(const AllocationEvent& event) = 0;
};

// Installs (or, with null, removes) the observer. The caller keeps it alive for the process.
void SetAllocationObserver(AllocationObserver* observer);
namespace internal {
extern std::atomic<AllocationObserver*> g_allocation_observer;
}
inline void NotifyAllocation(const AllocationEvent& event) {
  if (AllocationObserver* o = internal::g_allocation_observer.load(std::memory_order_acquire))
    o->OnAllocationEvent(event);
}

class Allocator {
 public:
  virtual ~Allocator() = default;
  // A buffer of `nbytes` with one reference owned by the caller. With `materialize` its memory is
  // attached (and counted) now, so running out of memory is reported here; otherwise when a queue
  // operation first needs it (Materialize).
  virtual StatusOr<Buffer*> Allocate(int64_t nbytes, bool materialize = true) = 0;
  // Attaches memory to a buffer that has none yet (no-op when it has). Thread-safe.
  virtual Status Materialize(Buffer* buffer) = 0;
  // Called by Buffer::Release on the last reference: returns its memory and deletes it.
  virtual void Free(Buffer* buffer) = 0;
  virtual MemoryStats stats() const = 0;
  virtual void ResetPeak() = 0;
  virtual void ResetAccumulated() = 0;
  // Returns cached (freed but kept) memory to the system.
  virtual void EmptyCache() = 0;
  virtual int64_t capacity() const = 0;
  // Caps the memory this process may reserve on the device at `bytes` (0: the capacity again);
  // a request past it is out of memory, as past the capacity. Unimplemented where a backend's
  // allocator keeps no budget of its own.
  virtual Status SetMemoryLimit(int64_t bytes) {
    (void)bytes;
    return Unimplemented("this device's allocator cannot limit the memory a process uses");
  }
  // Host memory that holds a copy of the device's tensors for a while (the CPU fallback's), charged
  // to the device where its memory is the host's: counted as allocated and reserved until
  // ReleaseHostCopy, and refused with an out-of-memory error past the budget, like a buffer. A
  // no-op where device memory is the chip's own (PJRT): a host copy takes none of it.
  virtual Status ChargeHostCopy(int64_t bytes) {
    (void)bytes;
    return Status::Ok();
  }
  virtual void ReleaseHostCopy(int64_t bytes) { (void)bytes; }
  // What a buffer of `nbytes` is charged in the device's memory (its block, rounded up).
  virtual int64_t ChargedBytes(int64_t nbytes) const { return nbytes; }
  // The sizes of the blocks held in the cache (freed, kept for reuse; not attached to a buffer).
  virtual std::vector<int64_t> CachedBlocks() const { return {}; }

  // Note [Stream-ordered frees] (buffer.h): `buffer`'s owners are gone but tasks queued on its
  // device still use it. Returns its memory for work issued from now on -- which the device's
  // in-order queue runs after those tasks -- and true; false where the memory must stay until the
  // last task lets go (then Free returns it and, meanwhile, held_by_queue() counts it).
  virtual bool ReleaseQueued(Buffer* buffer) {
    (void)buffer;
    return false;
  }
  // Bytes of buffers no owner holds whose memory only queued tasks keep (ReleaseQueued false).
  int64_t held_by_queue() const { return held_by_queue_.load(std::memory_order_relaxed); }

 private:
  friend class Buffer;
  std::atomic<int64_t> held_by_queue_{0};
};

// Bytes of memory the host can really back now: MemAvailable, and no more than the process's
// memory cgroups leave (cgroup v2 memory.max - memory.current, v1 limit_in_bytes - usage_in_bytes,
// the tightest of the process's cgroup and its ancestors).
int64_t HostAvailableBytes();
// The same from the cgroup files alone: `proc_self_cgroup` is /proc/self/cgroup's text and the
// hierarchies are read under `sysfs_root` (/sys/fs/cgroup). -1 when no limit applies.
int64_t CgroupAvailableBytes(const std::string& proc_self_cgroup, const std::string& sysfs_root);

}  // namespace tpu
