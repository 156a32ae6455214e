// View: the host executor's strided view of elements in host memory -- what its kernels read and
// write. A launch's Bindings become Views only here, on the backend that owns the memory.
#pragma once

#include <cstdint>

#include "runtime/buffer.h"

namespace tpu::host {

struct View {
  void* data = nullptr;  // already offset to the first element
  DType dtype = DType::kF32;
  Dims dims;
  Dims strides;

  int64_t NumElements() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
  bool IsContiguous() const { return ::tpu::IsContiguous(dims, strides); }
};

// The host memory a binding addresses (its buffer must be materialized: the queue does that
// before a launch or copy runs).
inline View HostView(const Binding& b) {
  void* data;
  if (b.buffer()) data = static_cast<char*>(b.buffer()->contents()) + b.byte_offset();
  else if (b.external()) data = b.external();
  else data = const_cast<void*>(b.inline_bytes());
  return View{data, b.dtype(), b.dims(), b.strides()};
}

}  // namespace tpu::host
