// Bridges between ATen tensors and the runtime: dtypes, buffers, views, devices, errors.
#pragma once

#include <ATen/ATen.h>

#include "base/status.h"
#include "runtime/buffer.h"
#include "runtime/device.h"

namespace tpu::torch_bridge {

// ATen dtype -> IR dtype; throws a clear error for dtypes the device does not hold.
DType ToDType(at::ScalarType t);
at::ScalarType ToScalarType(DType t);
bool IsSupported(at::ScalarType t);

Device& DeviceFor(int index);
inline Device& DeviceOf(const at::Tensor& t) { return DeviceFor(t.device().index() < 0 ? 0 : t.device().index()); }
int CurrentDeviceIndex();
void SetCurrentDeviceIndex(int index);

// The runtime Buffer behind a tpu tensor's storage.
Buffer* BufferOf(const at::Tensor& t);
// A strided view of the tensor's elements.
View ViewOf(const at::Tensor& t);

// Turns a non-OK Status into the matching PyTorch exception (OutOfMemoryError, IndexError,
// NotImplementedError, or RuntimeError).
[[noreturn]] void ThrowStatus(const Status& s);
inline void Check(const Status& s) {
  if (!s.ok()) ThrowStatus(s);
}

// Waits until every queued program touching `t` has run; raises a pending device error.
void SyncTensor(const at::Tensor& t);
// Waits for the whole device queue; raises a pending device error.
void SyncDevice(int index);

// The allocator PyTorch uses for tpu tensors.
c10::Allocator* GetTpuAllocator();

// Installs the allocator and hooks (once). Fails clearly if another backend owns PrivateUse1.
void RegisterDevice();

}  // namespace tpu::torch_bridge
