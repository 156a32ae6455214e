#include "runtime/buffer.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/memory.h"

namespace tpu {
namespace {

// Note [Device pointers]: live buffers by id. Ids are reused once freed; the table is reserved
// address space that the OS backs only as ids come into use.
constexpr uint32_t kMaxBuffers = 1u << 22;
std::atomic<Buffer*> g_buffers[kMaxBuffers];
std::mutex g_ids_mu;
std::vector<uint32_t>* g_free_ids = new std::vector<uint32_t>();
uint32_t g_next_id = 1;  // 0 stays unused: no buffer has address kAddressTag

uint32_t TakeId() {
  std::lock_guard<std::mutex> lock(g_ids_mu);
  if (!g_free_ids->empty()) {
    uint32_t id = g_free_ids->back();
    g_free_ids->pop_back();
    return id;
  }
  if (g_next_id >= kMaxBuffers) {
    std::fprintf(stderr, "torch_tpu: more than %u device buffers are alive at once\n", kMaxBuffers - 1);
    std::abort();
  }
  return g_next_id++;
}

}  // namespace

Buffer::Buffer(int64_t nbytes, Allocator* allocator, int device)
    : nbytes_(nbytes), allocator_(allocator), device_(device), id_(TakeId()) {
  g_buffers[id_].store(this, std::memory_order_release);
}

Buffer::~Buffer() {
  std::lock_guard<std::mutex> lock(g_ids_mu);  // first: ForEachLive never sees a buffer half gone
  g_buffers[id_].store(nullptr, std::memory_order_release);
  g_free_ids->push_back(id_);
}

void Buffer::ForEachLive(const std::function<void(const Buffer&)>& fn) {
  std::lock_guard<std::mutex> lock(g_ids_mu);
  for (uint32_t id = 1; id < g_next_id; ++id)
    if (const Buffer* b = g_buffers[id].load(std::memory_order_acquire)) fn(*b);
}

Buffer* Buffer::FromDeviceAddress(const void* address) {
  auto a = reinterpret_cast<uint64_t>(address);
  if ((a >> kAddressShift) >> (62 - kAddressShift) != 1) return nullptr;  // not tagged as ours
  uint64_t id = (a & ~kAddressTag) >> kAddressShift;
  if (id == 0 || id >= kMaxBuffers) return nullptr;
  Buffer* b = g_buffers[id].load(std::memory_order_acquire);
  if (!b) return nullptr;
  uint64_t offset = a & ((uint64_t{1} << kAddressShift) - 1);
  return static_cast<int64_t>(offset) <= b->nbytes() ? b : nullptr;
}

void Buffer::Release() {
  uint64_t left = refs_.fetch_sub(1, std::memory_order_acq_rel) - 1;
  if (InForkedChild()) return;  // Note [Frees after fork]
  if (left == 0) {
    Destroy();
  } else if ((left & kOwnerMask) == 0) {
    OwnersGone();
  }
}

void Buffer::AdoptQueued() {
  // One atomic step (owner - 1, queued + 1): the owner count never reads 0 while it happens.
  uint64_t now = refs_.fetch_add((uint64_t{1} << kQueuedShift) - 1, std::memory_order_acq_rel) +
                 ((uint64_t{1} << kQueuedShift) - 1);
  if ((now & kOwnerMask) == 0 && !InForkedChild()) OwnersGone();  // only the task holds it
}

void Buffer::ReleaseQueued() {
  if (refs_.fetch_sub(uint64_t{1} << kQueuedShift, std::memory_order_acq_rel) == (uint64_t{1} << kQueuedShift) &&
      !InForkedChild())
    Destroy();
}

// Note [Stream-ordered frees]. Once per buffer: an owner reference taken later (an error record's
// restore list, from a queued task's binding) and dropped again changes nothing.
void Buffer::OwnersGone() {
  uint8_t held = kHeld;
  if (!memory_state_.compare_exchange_strong(held, kReleased, std::memory_order_acq_rel)) return;
  if (allocator_->ReleaseQueued(this)) return;
  memory_state_.store(kCounted, std::memory_order_release);
  allocator_->held_by_queue_.fetch_add(nbytes_, std::memory_order_relaxed);
}

void Buffer::Destroy() {
  if (memory_state_.load(std::memory_order_acquire) == kCounted)
    allocator_->held_by_queue_.fetch_sub(nbytes_, std::memory_order_relaxed);
  allocator_->Free(this);
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

bool IsContiguous(const Dims& dims, const Dims& strides) {
  int64_t expected = 1;
  for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
    if (dims[i] != 1 && strides[i] != expected) return false;
    expected *= dims[i];
  }
  return true;
}

Binding::Binding(Buffer* buffer, int64_t byte_offset, DType dtype, Dims dims, Dims strides)
    : buffer_(buffer), offset_(byte_offset), dtype_(dtype), dims_(std::move(dims)), strides_(std::move(strides)) {
  if (strides_.empty() && !dims_.empty()) strides_ = ContiguousStrides(dims_);
  if (buffer_) buffer_->Retain();
}

Binding Binding::Scalar(DType dtype, const void* bytes, Dims dims) {
  Binding b;
  b.dtype_ = dtype;
  b.dims_ = std::move(dims);
  b.strides_ = ContiguousStrides(b.dims_);
  int64_t n = b.NumElements() * DTypeSize(dtype);
  std::memcpy(b.inline_, bytes, static_cast<size_t>(n < 16 ? n : 16));
  return b;
}

Binding Binding::External(void* data, DType dtype, Dims dims, Dims strides) {
  Binding b(nullptr, 0, dtype, std::move(dims), std::move(strides));
  b.external_ = data;
  return b;
}

int64_t Binding::NumElements() const {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

bool Binding::CoversBuffer() const {
  return buffer_ && offset_ == 0 && IsContiguous() && NumElements() * DTypeSize(dtype_) == buffer_->nbytes();
}

Binding& Binding::operator=(Binding&& o) noexcept {
  if (this == &o) return *this;
  Reset();
  buffer_ = o.buffer_;
  queued_ = o.queued_;
  o.buffer_ = nullptr;
  o.queued_ = false;
  external_ = o.external_;
  offset_ = o.offset_;
  dtype_ = o.dtype_;
  dims_ = std::move(o.dims_);
  strides_ = std::move(o.strides_);
  std::memcpy(inline_, o.inline_, sizeof(inline_));
  return *this;
}

}  // namespace tpu
