// Fork safety, as PyTorch's CUDA does it: a child forked after the device was initialised (the
// queue workers and the kernels' thread pool do not exist there, and their locks may be held)
// is "in a bad fork", and any device use in it raises instead of hanging.
#pragma once

namespace tpu::torch_bridge {

// Installs the pthread_atfork child handler (once; done when the device registers).
void RegisterForkHandler();
// True in a process forked from one where torch_tpu had registered the device.
bool InBadFork();
// Raises RuntimeError in a bad fork; called where device work starts (DeviceFor).
void CheckNotInBadFork();

}  // namespace tpu::torch_bridge
