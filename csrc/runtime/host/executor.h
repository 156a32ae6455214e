#pragma once

#include <memory>
#include <vector>

#include "runtime/host/view.h"
#include "runtime/queue.h"

namespace tpu::host {

// Runs the host backend's queue items on the CPU: HostExecutables over their bindings, and copies
// (device memory is host memory, so a copy is a memcpy). One per device; used only from that
// device's queue (its worker, or a submitting thread running a small launch inline).
class HostAllocator;

class HostExecutor final : public Executor {
 public:
  // `allocator`: where launches take their scratch (null: from the heap, uncounted; for tests).
  explicit HostExecutor(HostAllocator* allocator = nullptr) : allocator_(allocator) {}
  // Runs on past a failed step, skipping only the steps that depend on it (RunReport).
  Status Run(const Launch& launch, RunReport* report) override;
  Status Write(Buffer* dst, int64_t offset, const void* src, int64_t nbytes) override;
  Status Read(Buffer* src, int64_t offset, int64_t nbytes, void* dst) override;
  Status Copy(Buffer* src, int64_t src_offset, Buffer* dst, int64_t dst_offset, int64_t nbytes) override;

 private:
  HostAllocator* allocator_;
  std::vector<View> views_;       // per value, reused across launches
  std::vector<uint8_t> tainted_;  // per value: not computed (a step it depends on failed)
};

}  // namespace tpu::host
