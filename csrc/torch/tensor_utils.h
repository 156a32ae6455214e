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
// What device tensors may hold: the IR's dtypes and complex64/complex128 (Note [Complex tensors]).
bool IsStorageDType(at::ScalarType t);

Device& DeviceFor(int index);
inline Device& DeviceOf(const at::Tensor& t) { return DeviceFor(t.device().index() < 0 ? 0 : t.device().index()); }
int CurrentDeviceIndex();
void SetCurrentDeviceIndex(int index);

// The runtime Buffer behind a tpu tensor's storage (null for memory we did not allocate).
Buffer* BufferOf(const at::Tensor& t);
// The tensor's elements as a launch argument: its buffer, byte offset, dims and strides.
Binding BindingOf(const at::Tensor& t);
// Whether `t` covers its whole storage densely (offset 0, contiguous, every byte).
bool CoversStorage(const at::Tensor& t);

// The device memory of a device tensor's storage, read to / written from the host through the
// device queue (never through a host pointer: device memory is opaque). `bytes` is the range the
// tensor's elements span in its storage.
struct StorageSpan {
  Buffer* buffer;
  int64_t offset;  // bytes
  int64_t nbytes;
};
StorageSpan SpanOf(const at::Tensor& t);
// `t`'s elements copied to a new CPU tensor of the same sizes and strides.
at::Tensor ReadToHost(const at::Tensor& t);
// Materializes `buffer`'s memory (reclaiming finished work and cached memory first if the
// device is full); raises torch.OutOfMemoryError when it cannot.
void MaterializeOrThrow(Buffer* buffer);

// Turns a non-OK Status into the matching PyTorch exception (OutOfMemoryError, IndexError,
// NotImplementedError, or RuntimeError).
[[noreturn]] void ThrowStatus(const Status& s);
inline void Check(const Status& s) {
  if (!s.ok()) ThrowStatus(s);
}

// A sync point for `t`: waits until every queued program touching it has run; raises the error
// of its data, or one the calling thread issued.
void SyncTensor(const at::Tensor& t);
// Waits for the whole device queue; raises a pending device error.
void SyncDevice(int index);

// Deferred execution (csrc/torch/deferred): whether new buffers take memory at once (not in fused
// mode, where values the window never writes take none); before the host touches `buffer`'s
// bytes (a resize), the open window is cut if it holds a pending value of it; before the host
// reads a value (Note [Host reads cut], window.cc) or a device-wide sync, the device's window is
// cut.
bool MaterializeEagerly();
void PrepareHostAccess(Buffer* buffer);
void PrepareHostRead(Buffer* buffer);
// Whether the open window reads or writes `buffer` (a host write must then be ordered inside it).
bool DeferredUses(Buffer* buffer);
void PrepareDeviceSync(int device);
// Capture (csrc/torch/deferred/capture.h): a buffer the allocator just made, so a capture knows
// which storages its graph created.
void NoteNewBuffer(const Buffer* buffer);

// dst <- src (same sizes and dtype, one tpu device) as queue copies of contiguous runs, with no
// program (Note [Run copies]); false, having copied nothing, where that does not apply.
bool CopyRuns(const at::Tensor& src, const at::Tensor& dst);

// The allocator PyTorch uses for tpu tensors.
c10::Allocator* GetTpuAllocator();

// Installs the allocator and hooks (once). Fails clearly if another backend owns PrivateUse1.
void RegisterDevice();

}  // namespace tpu::torch_bridge
