#include "runtime/memory.h"

#include <cstdio>

namespace tpu {

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

Status OutOfMemory(int device, int64_t nbytes, int64_t in_use, int64_t capacity) {
  return ResourceExhausted("tpu:" + std::to_string(device) + " out of memory: tried to allocate " + FormatMib(nbytes) +
                           "; " + FormatMib(in_use) + " in use of " + FormatMib(capacity) + " device capacity");
}

}  // namespace tpu
