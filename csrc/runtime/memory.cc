#include "runtime/memory.h"

#include <cstdio>

namespace tpu {

namespace internal {
std::atomic<AllocationObserver*> g_allocation_observer{nullptr};
}

void SetAllocationObserver(AllocationObserver* observer) {
  internal::g_allocation_observer.store(observer, std::memory_order_release);
}

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

StatusOr<Buffer*> NewBuffer(Allocator* allocator, int device, int64_t nbytes, bool materialize) {
  auto* buffer = new Buffer(nbytes, allocator, device);
  if (materialize) {
    Status st = allocator->Materialize(buffer);
    if (!st.ok()) {
      delete buffer;
      return st;
    }
  }
  return buffer;
}

std::string FormatMib(int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f MiB", bytes / (1024.0 * 1024.0));
  return buf;
}

Status OutOfMemory(int device, int64_t nbytes, int64_t in_use, int64_t capacity, int64_t limit) {
  std::string msg = "tpu:" + std::to_string(device) + " out of memory: tried to allocate " + FormatMib(nbytes) +
                    "; " + FormatMib(in_use) + " in use of " + FormatMib(capacity) + " device capacity";
  if (limit > 0 && limit < capacity)
    msg += ", of which this process may use " + FormatMib(limit) + " (set_per_process_memory_fraction)";
  return ResourceExhausted(msg);
}

namespace {
void Notify(AllocationEvent::Kind kind, const Buffer& b, int64_t charged) {
  AllocationEvent e;
  e.kind = kind;
  e.device = b.device();
  e.address = reinterpret_cast<uint64_t>(b.device_address());
  e.size = charged;
  e.requested = b.nbytes();
  NotifyAllocation(e);
}
}  // namespace

void NotifyAlloc(const Buffer& buffer, int64_t charged) {
  if (internal::g_allocation_observer.load(std::memory_order_relaxed)) Notify(AllocationEvent::Kind::kAlloc, buffer, charged);
}

void NotifyFree(const Buffer& buffer, int64_t charged) {
  if (internal::g_allocation_observer.load(std::memory_order_relaxed)) Notify(AllocationEvent::Kind::kFree, buffer, charged);
}

void NotifyOom(int device, int64_t nbytes, int64_t free_bytes) {
  if (!internal::g_allocation_observer.load(std::memory_order_relaxed)) return;
  AllocationEvent e;
  e.kind = AllocationEvent::Kind::kOom;
  e.device = device;
  e.size = nbytes;
  e.requested = nbytes;
  e.free_bytes = free_bytes;
  NotifyAllocation(e);
}

}  // namespace tpu
