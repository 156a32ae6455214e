// Allocator: creates a device's buffers and keeps its memory budget. Each backend implements it
// (the host's caching allocator is runtime/host/host_allocator.h). Exceeding the budget is a
// ResourceExhausted status, never an overcommitted allocation.
#pragma once

#include <cstdint>
#include <string>

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
};

// Bytes of memory the host can really back now: MemAvailable, and no more than the process's
// memory cgroups leave (cgroup v2 memory.max - memory.current, v1 limit_in_bytes - usage_in_bytes,
// the tightest of the process's cgroup and its ancestors).
int64_t HostAvailableBytes();
// The same from the cgroup files alone: `proc_self_cgroup` is /proc/self/cgroup's text and the
// hierarchies are read under `sysfs_root` (/sys/fs/cgroup). -1 when no limit applies.
int64_t CgroupAvailableBytes(const std::string& proc_self_cgroup, const std::string& sysfs_root);

}  // namespace tpu
