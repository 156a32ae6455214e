#pragma once

#include <memory>
#include <vector>

#include "runtime/host/view.h"
#include "runtime/queue.h"

namespace tpu::host {

// Runs the host backend's queue items on the CPU: HostExecutables over their bindings, and copies
// (device memory is host memory, so a copy is a memcpy). One per device; used only from that
// device's queue (its worker, or a submitting thread running a small launch inline).
class HostExecutor final : public Executor {
 public:
  Status Run(const Launch& launch, int* failed_op) override;
  Status Write(Buffer* dst, int64_t offset, const void* src, int64_t nbytes) override;
  Status Read(Buffer* src, int64_t offset, int64_t nbytes, void* dst) override;
  Status Copy(Buffer* src, int64_t src_offset, Buffer* dst, int64_t dst_offset, int64_t nbytes) override;

 private:
  std::unique_ptr<char[]> scratch_;  // reused across launches (up to 64 MiB)
  size_t scratch_capacity_ = 0;
  std::vector<View> views_;  // per value, reused across launches
};

}  // namespace tpu::host
