// The deferred engine's hooks for the rest of the torch layer. (Until fused mode lands no window
// is ever open: every buffer takes memory at once and nothing is pending.)
#include "torch/tensor_utils.h"

namespace tpu::torch_bridge {

bool MaterializeEagerly() { return true; }
void PrepareHostAccess(Buffer*) {}
void PrepareDeviceSync(int) {}
bool DeferredUses(Buffer*) { return false; }

}  // namespace tpu::torch_bridge
