#pragma once

#include <memory>
#include <vector>

#include "runtime/device.h"

namespace tpu::host {

// Runs Executables on the CPU. One per device; used only from that device's queue worker.
class HostExecutor : public Executor {
 public:
  Status Run(const Launch& launch) override;

 private:
  std::unique_ptr<char[]> scratch_;  // reused across launches (up to 64 MiB)
  size_t scratch_capacity_ = 0;
  std::vector<View> views_;    // per value, reused across launches
};

}  // namespace tpu::host
