// What the host executor runs its kernels with on this CPU (for environment reports).
#pragma once

#include <string>

namespace tpu::host {

struct HostCpuInfo {
  std::string simd_target;     // Highway's dispatched target for the fused elementwise loops
  std::string onednn_version;  // the linked oneDNN (matmul, convolution)
  std::string onednn_isa;      // the instruction set oneDNN's kernels use
};

HostCpuInfo GetHostCpuInfo();

}  // namespace tpu::host
