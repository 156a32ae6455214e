// Pinned host memory for the tpu device (tensor.pin_memory(), DataLoader(pin_memory=True)):
// PyTorch's caching host allocator (at::CachingHostAllocatorImpl) over page-locked memory,
// registered with REGISTER_HOST_ALLOCATOR(PrivateUse1) and reached through the hooks.
#pragma once

#include <ATen/ATen.h>

namespace tpu::torch_bridge {

// Whether `ptr` lies in a block of the pinned host allocator.
bool IsPinnedPtr(const void* ptr);
c10::Allocator* PinnedAllocator();

// A copy of `src` (a CPU tensor) into the device buffer range of `dst` that reads `src`'s memory
// when the queue runs it, not now (no snapshot copy): done when `src` is a contiguous pinned
// tensor of dst's dtype and shape and `dst` a contiguous tensor the open fused window does not
// use. Returns false (and does nothing) otherwise. The pinned block is kept from reuse until the
// device has run the copy (Note [Pinned copies]).
bool CopyFromPinned(const at::Tensor& src, const at::Tensor& dst);

}  // namespace tpu::torch_bridge
