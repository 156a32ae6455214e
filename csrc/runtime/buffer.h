// Buffer: bytes on one device, reference counted. Views (Binding) address part of a buffer with
// an element offset and strides, so PyTorch views and in-place ops on views need no copies.
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>
#include <vector>

#include "ir/types.h"

namespace tpu {

class Allocator;

class Buffer {
 public:
  Buffer(void* data, int64_t nbytes, Allocator* allocator, int device)
      : data_(data), nbytes_(nbytes), allocator_(allocator), device_(device) {}
  void* data() const { return data_; }
  int64_t nbytes() const { return nbytes_; }
  int device() const { return device_; }
  void Retain() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Release();  // frees through the allocator on the last release
  // Sequence number of the last queued program that reads or writes this buffer.
  uint64_t last_use() const { return last_use_.load(std::memory_order_acquire); }
  // Monotonic: producers on several threads may mark out of order.
  void MarkUse(uint64_t seq) {
    uint64_t cur = last_use_.load(std::memory_order_relaxed);
    while (cur < seq && !last_use_.compare_exchange_weak(cur, seq, std::memory_order_release)) {
    }
  }

 private:
  void* data_;
  int64_t nbytes_;
  Allocator* allocator_;
  int device_;
  std::atomic<int> refs_{1};
  std::atomic<uint64_t> last_use_{0};
};

// A typed strided view: element offset/strides in elements, like a PyTorch tensor.
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
  bool IsContiguous() const {
    int64_t expected = 1;
    for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
      if (dims[i] != 1 && strides[i] != expected) return false;
      expected *= dims[i];
    }
    return true;
  }
};

Dims ContiguousStrides(const Dims& dims);

// An argument of a launched program: a view plus the buffer it keeps alive (null for host
// scalars, whose bytes live inline so a Python number never needs a device allocation).
class Binding {
 public:
  Binding() = default;
  Binding(Buffer* buffer, View view) : buffer_(buffer), view_(std::move(view)) {
    if (buffer_) buffer_->Retain();
  }
  static Binding Scalar(DType dtype, const void* bytes);
  Binding(const Binding&) = delete;
  Binding& operator=(const Binding&) = delete;
  Binding(Binding&& o) noexcept { *this = std::move(o); }
  Binding& operator=(Binding&& o) noexcept;
  ~Binding() {
    if (buffer_) buffer_->Release();
  }
  Buffer* buffer() const { return buffer_; }
  const View& view() const { return view_; }

 private:
  Buffer* buffer_ = nullptr;
  View view_;
  alignas(8) unsigned char inline_[8] = {};
};

}  // namespace tpu
