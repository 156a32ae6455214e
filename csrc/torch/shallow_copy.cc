// `param.data = other` between host and device tensors, which `Module.to("tpu")` relies on.
//
// Module._apply moves a parameter in place (`param.data = moved`) only when ATen says the two
// TensorImpls are shallow-copy compatible; otherwise it makes a *new* Parameter per module. c10
// lists CPU/CUDA/XPU/... as compatible dense backends but not PrivateUse1, which leaves the
// backend to answer: without this, `.to("tpu")` silently unties shared weights (a language
// model's tied input/output embeddings train as two separate matrices) and leaves optimizers
// built before the move holding the host tensors.
#include <torch/library.h>

namespace tpu::torch_bridge {
namespace {

bool IsDenseHostOrDevice(const at::Tensor& t) {
  return t.layout() == at::kStrided &&
         (t.device().is_cpu() || t.device().type() == c10::DeviceType::PrivateUse1);
}

bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  // A plain TensorImpl on either side (tpu tensors are not a TensorImpl subclass), so copying the
  // metadata and storage across is what CPU <-> CUDA does.
  return self.key_set() == from.key_set() ||
         (IsDenseHostOrDevice(self) && IsDenseHostOrDevice(from));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
}

}  // namespace tpu::torch_bridge
