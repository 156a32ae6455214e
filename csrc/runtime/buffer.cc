#include "runtime/buffer.h"

#include <cstring>

#include "runtime/allocator.h"

namespace tpu {

void Buffer::Release() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) allocator_->Free(this);
}

Dims ContiguousStrides(const Dims& dims) {
  Dims s(dims.size());
  int64_t acc = 1;
  for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
    s[i] = acc;
    acc *= dims[i];
  }
  return s;
}

Binding Binding::Scalar(DType dtype, const void* bytes) {
  Binding b;
  std::memcpy(b.inline_, bytes, DTypeSize(dtype));
  b.view_.data = b.inline_;
  b.view_.dtype = dtype;
  return b;
}

Binding& Binding::operator=(Binding&& o) noexcept {
  if (this == &o) return *this;
  if (buffer_) buffer_->Release();
  buffer_ = o.buffer_;
  o.buffer_ = nullptr;
  view_ = std::move(o.view_);
  std::memcpy(inline_, o.inline_, sizeof(inline_));
  if (view_.data == o.inline_) view_.data = inline_;
  return *this;
}

}  // namespace tpu
