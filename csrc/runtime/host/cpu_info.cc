#include "runtime/host/cpu_info.h"

#include <hwy/targets.h>

#include "oneapi/dnnl/dnnl.h"

namespace tpu::host {
namespace {

const char* OnednnIsaName(dnnl_cpu_isa_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    case dnnl_cpu_isa_all: return "all";
    default: return "other";
  }
}

}  // namespace

HostCpuInfo GetHostCpuInfo() {
  HostCpuInfo info;
  // Highway's dynamic dispatch takes the best of the compiled targets the CPU supports; a lower
  // bit is a better target.
  int64_t targets = hwy::SupportedTargets() & HWY_TARGETS;
  info.simd_target = targets ? hwy::TargetName(targets & -targets) : "none";
  const dnnl_version_t* v = dnnl_version();
  info.onednn_version = std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
  info.onednn_isa = OnednnIsaName(dnnl_get_effective_cpu_isa());
  return info;
}

}  // namespace tpu::host
