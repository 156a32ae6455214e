// Buffer: one allocation of device memory, reference counted and opaque to everything above the
// backend. Its contents belong to the backend that made it (host memory on the host executor, a
// PJRT_Buffer on PJRT); the host reads or writes them only through queue copies (runtime/queue.h).
//
// Binding: an argument of a launched program -- elements of a buffer described by a byte offset,
// dims and strides (in elements), or a host scalar whose bytes live inline. Strided bindings are
// the host executor's optimization (Backend::strided_bindings()); other backends take dense,
// whole-buffer bindings only.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <utility>

#include "ir/types.h"

namespace tpu {

class Allocator;

class Buffer {
 public:
  Buffer(int64_t nbytes, Allocator* allocator, int device);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // Note [Device pointers]: the address a framework may use for this buffer's memory -- unique
  // among live buffers, with room for 64 GiB of offsets, and never memory: it is non-canonical,
  // so a stray host access faults at once instead of reading something. FromDeviceAddress maps
  // any address inside [device_address(), device_address() + nbytes()) back to the buffer.
  void* device_address() const { return reinterpret_cast<void*>(kAddressTag | (uint64_t{id_} << kAddressShift)); }
  static Buffer* FromDeviceAddress(const void* address);
  // Calls `fn` for every live buffer (of every device and backend), with buffer creation and
  // destruction held off meanwhile: `fn` must not make or free buffers. For memory snapshots.
  static void ForEachLive(const std::function<void(const Buffer&)>& fn);
  static constexpr uint64_t kAddressTag = uint64_t{1} << 62;
  static constexpr int kAddressShift = 36;

  int64_t nbytes() const { return nbytes_; }
  int device() const { return device_; }
  Allocator* allocator() const { return allocator_; }

  // Note [Stream-ordered frees]: a buffer's references are its owners' (tensors, the deferred
  // engine, error records: Retain/Release) and its queued tasks' (a task's bindings, adopted by
  // the queue when it is enqueued: AdoptQueued/ReleaseQueued). When the last owner lets go while
  // queued tasks still use the buffer, its memory goes back to the allocator at once
  // (Allocator::ReleaseQueued) for work issued later on the same in-order queue, which runs after
  // them -- as PyTorch's CUDA allocator reuses a block freed on a stream. An allocator that cannot
  // (PJRT, whose memory stays with the array until the task that uses it ends) counts the bytes
  // instead (Allocator::held_by_queue), and the queue bounds them. The object lives on until the
  // last reference of either kind goes.
  void Retain() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Release();  // an owner's; frees through the allocator on the last release of any kind
  // Turns one owner reference (a binding's) into a queued task's, and back when it is released.
  void AdoptQueued();
  void ReleaseQueued();
  int refs() const {  // all of them
    uint64_t r = refs_.load(std::memory_order_acquire);
    return static_cast<int>((r & kOwnerMask) + (r >> kQueuedShift));
  }
  int owners() const { return static_cast<int>(refs_.load(std::memory_order_acquire) & kOwnerMask); }
  // Whether its memory went back to the allocator while queued tasks still held it (its contents
  // belong to those tasks only: nothing may materialize, read or snapshot it).
  bool memory_released() const { return memory_state_.load(std::memory_order_acquire) == kReleased; }

  // Sequence number of the last queued task that reads or writes this buffer.
  uint64_t last_use() const { return last_use_.load(std::memory_order_acquire); }
  // Monotonic: producers on several threads may mark out of order.
  void MarkUse(uint64_t seq) {
    uint64_t cur = last_use_.load(std::memory_order_relaxed);
    while (cur < seq && !last_use_.compare_exchange_weak(cur, seq, std::memory_order_release)) {
    }
  }

  // The backend's contents: null until the allocator materializes them (memory is attached when
  // a queue operation first needs it, so values the deferred engine never writes take none).
  // Only the owning backend interprets the pointer; a backend may replace it when a task writes
  // the buffer (PJRT's outputs are new buffers).
  void* contents() const { return contents_.load(std::memory_order_acquire); }
  void set_contents(void* p) { contents_.store(p, std::memory_order_release); }
  bool materialized() const { return contents() != nullptr; }

  // Note [Failed buffers]: nonzero while the buffer holds no valid value because the task that
  // was to write it failed, or was skipped because one of its inputs had failed: the sequence
  // number of the task whose error explains it. The queue sets and clears it; tasks that read a
  // failed buffer do not run (their results fail with the same origin), and a sync point that
  // reads it raises the origin's error.
  uint64_t failed() const { return failed_.load(std::memory_order_acquire); }
  void set_failed(uint64_t origin) { failed_.store(origin, std::memory_order_release); }

  // The deferred engine's record of this buffer in its device's open window (csrc/torch/deferred):
  // an index into the window's table, valid while `window_epoch` equals the window's epoch.
  // Touched only under that window's lock.
  int32_t window_slot = -1;
  uint32_t window_epoch = 0;

 private:
  int64_t nbytes_;
  Allocator* allocator_;
  int device_;
  void OwnersGone();
  void Destroy();
  static constexpr int kQueuedShift = 32;
  static constexpr uint64_t kOwnerMask = (uint64_t{1} << kQueuedShift) - 1;
  enum : uint8_t { kHeld, kReleased, kCounted };  // memory_state_ (Note [Stream-ordered frees])
  std::atomic<uint64_t> refs_{1};  // owners in the low half, queued tasks' in the high half
  std::atomic<uint8_t> memory_state_{kHeld};
  std::atomic<uint64_t> last_use_{0};
  std::atomic<void*> contents_{nullptr};
  std::atomic<uint64_t> failed_{0};
  uint32_t id_;  // index in the live-buffer table (Note [Device pointers])
};

Dims ContiguousStrides(const Dims& dims);
bool IsContiguous(const Dims& dims, const Dims& strides);

class Binding {
 public:
  Binding() = default;
  // Elements of `buffer` starting `byte_offset` bytes in (strides in elements; empty: contiguous).
  Binding(Buffer* buffer, int64_t byte_offset, DType dtype, Dims dims, Dims strides = {});
  // A host scalar (up to 16 bytes: rank 0, or a short vector such as an RNG state).
  static Binding Scalar(DType dtype, const void* bytes, Dims dims = {});
  // Host memory the caller owns and keeps alive (the host executor's own tests and kernels).
  static Binding External(void* data, DType dtype, Dims dims, Dims strides = {});

  Binding(const Binding&) = delete;
  Binding& operator=(const Binding&) = delete;
  Binding(Binding&& o) noexcept { *this = std::move(o); }
  Binding& operator=(Binding&& o) noexcept;
  ~Binding() { Reset(); }

  // Hands the binding's reference to the queue (Note [Stream-ordered frees]): from now on it is a
  // queued task's, released as one. The queue calls it as it enqueues the task.
  void AdoptIntoQueue() {
    if (buffer_ && !queued_) {
      buffer_->AdoptQueued();
      queued_ = true;
    }
  }

  Buffer* buffer() const { return buffer_; }
  int64_t byte_offset() const { return offset_; }
  DType dtype() const { return dtype_; }
  const Dims& dims() const { return dims_; }
  const Dims& strides() const { return strides_; }
  TensorType type() const { return TensorType{dtype_, dims_}; }
  bool is_inline() const { return !buffer_ && !external_; }
  const void* inline_bytes() const { return inline_; }
  void* external() const { return external_; }
  int64_t NumElements() const;
  // Contiguous from the start of its buffer and covering all of it.
  bool CoversBuffer() const;
  bool IsContiguous() const { return ::tpu::IsContiguous(dims_, strides_); }

 private:
  void Reset() {
    if (!buffer_) return;
    if (queued_) buffer_->ReleaseQueued();
    else buffer_->Release();
    buffer_ = nullptr;
    queued_ = false;
  }
  Buffer* buffer_ = nullptr;
  bool queued_ = false;
  void* external_ = nullptr;
  int64_t offset_ = 0;
  DType dtype_ = DType::kF32;
  Dims dims_;
  Dims strides_;
  alignas(16) unsigned char inline_[16] = {};
};

}  // namespace tpu
