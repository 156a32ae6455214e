// The CPU fallback for ops without a native lowering: correct (ATen's cpu_fallback copies the
// arguments to the CPU, runs the CPU kernel, and writes back every mutated argument, tensor
// lists included), counted per op, warned about once per op, and refusable with
// TORCH_TPU_FALLBACK=error.
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <mutex>
#include <set>

#include "base/metrics.h"
#include "base/options.h"
#include "torch/deferred/capture.h"
#include "torch/deferred/window.h"

namespace tpu::torch_bridge {
namespace {

void TpuCpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& name = op.schema().operator_name();
  std::string full = name.name + (name.overload_name.empty() ? "" : "." + name.overload_name);
  if (ActiveCapture()) CaptureBreak(full + " has no native tpu lowering (it would run on the CPU fallback)");
  GetCounter("fallback/" + full)->Add();
  GetCounter("fallback_ops")->Add();
  const std::string& policy = Flags().fallback;
  TORCH_CHECK(policy != "error", full,
              " has no native tpu lowering, and TORCH_TPU_FALLBACK=error forbids running it on the CPU");
  if (policy == "warn") {
    static std::mutex mu;
    static std::set<std::string> warned;
    std::lock_guard<std::mutex> lock(mu);
    if (warned.insert(full).second)
      TORCH_WARN(full, " has no native tpu lowering: it runs on the CPU (slow; counted in "
                       "torch_tpu.metrics as fallback/", full, "; TORCH_TPU_FALLBACK=error makes this an error)");
  }
  // The CPU reads the device's current values: what the fused windows hold runs first.
  CutAllWindows(CutReason::kFallback);
  at::native::cpu_fallback(op, stack, /*error_on_views=*/true);
}

}  // namespace

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&TpuCpuFallback>());
}

}  // namespace tpu::torch_bridge
