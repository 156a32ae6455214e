// The CPU fallback for ops without a native lowering: correct (ATen's cpu_fallback copies the
// arguments to the CPU, runs the CPU kernel, and writes back every mutated argument, tensor
// lists included), counted per op, warned about once per op, and refusable with
// TORCH_TPU_FALLBACK=error. On the host executor device memory is the host's, so the copies it
// makes of device tensors are charged to their devices while it runs (Allocator::ChargeHostCopy).
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "base/metrics.h"
#include "base/options.h"
#include "torch/deferred/capture.h"
#include "torch/deferred/window.h"
#include "torch/tensor_utils.h"

namespace tpu::torch_bridge {
namespace {

// The bytes of the CPU copies cpu_fallback makes of the op's device arguments, charged to their
// devices for the call: the device's memory is host RAM, and a copy may take as much of it as
// the tensor. (The CPU kernel's own results are CPU tensors, copied to the device on return,
// where they are charged as buffers.)
class HostCopyCharge {
 public:
  explicit HostCopyCharge(const torch::jit::Stack& stack, size_t num_args) {
    std::vector<int64_t> bytes;
    auto add = [&](const at::Tensor& t) {
      if (!t.defined() || t.device().type() != c10::DeviceType::PrivateUse1) return;
      size_t d = static_cast<size_t>(t.device().index());
      if (bytes.size() <= d) bytes.resize(d + 1, 0);
      bytes[d] += static_cast<int64_t>(t.numel()) * static_cast<int64_t>(t.element_size());
    };
    for (size_t i = stack.size() - num_args; i < stack.size(); ++i) {
      const c10::IValue& v = stack[i];
      if (v.isTensor()) add(v.toTensor());
      else if (v.isTensorList())
        for (const at::Tensor& t : v.toTensorVector()) add(t);
      else if (v.isOptionalTensorList())
        for (const std::optional<at::Tensor>& t : v.toOptionalTensorList().vec())
          if (t) add(*t);
    }
    for (size_t d = 0; d < bytes.size(); ++d) {
      if (!bytes[d]) continue;
      Allocator& a = DeviceFor(static_cast<int>(d)).allocator();
      Status st = a.ChargeHostCopy(bytes[d]);
      if (!st.ok() && st.code() == Code::kResourceExhausted) {
        // Queued work may still hold memory Python has released (as MaterializeOrThrow does).
        DeviceFor(static_cast<int>(d)).queue().Drain();
        a.EmptyCache();
        st = a.ChargeHostCopy(bytes[d]);
      }
      if (!st.ok()) {
        Release();
        ThrowStatus(st);
      }
      charged_.emplace_back(&a, bytes[d]);
    }
  }
  ~HostCopyCharge() { Release(); }
  HostCopyCharge(const HostCopyCharge&) = delete;
  HostCopyCharge& operator=(const HostCopyCharge&) = delete;

 private:
  void Release() {
    for (auto& [a, n] : charged_) a->ReleaseHostCopy(n);
    charged_.clear();
  }
  std::vector<std::pair<Allocator*, int64_t>> charged_;
};

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
  HostCopyCharge charge(*stack, op.schema().arguments().size());
  at::native::cpu_fallback(op, stack, /*error_on_views=*/true);
}

}  // namespace

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&TpuCpuFallback>());
}

}  // namespace tpu::torch_bridge
