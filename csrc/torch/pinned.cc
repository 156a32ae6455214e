// Note [Pinned memory]: what "pinned" means for the tpu device. A pinned block is host memory
// mapped for the purpose (mmap, pre-faulted) and page-locked with mlock, so the OS neither swaps
// it out nor moves it while the device queue reads it; where the process may not lock that much
// memory (RLIMIT_MEMLOCK), the block is still mapped and pre-faulted but not locked, and the
// metric pinned_unlocked_bytes counts it (a warning says so once). The blocks come from PyTorch's
// caching host allocator (at::CachingHostAllocatorImpl: power-of-two size classes, reuse after
// the device is done with a block), so pinning a DataLoader's batches every step maps nothing
// new in steady state.
//
// Note [Pinned copies]: a non-blocking copy from a pinned tensor to the device is queued as a
// WriteFrom (runtime/queue.h): the queue reads the pinned memory when the copy runs, in order
// with the device's other work, instead of snapshotting it when the copy is issued. The
// allocator's stream events keep the block from reuse until then: the copy records the device's
// stream on the block (record_event), and when the tensor is freed the block waits for an event
// at the queue's last submitted task. As with CUDA, writing to the pinned tensor before the copy
// has run changes what is copied: synchronize first (torch.tpu.synchronize() or an Event).
#include "torch/pinned.h"

#include <ATen/core/CachingHostAllocator.h>
#include <sys/mman.h>

#include <map>
#include <shared_mutex>

#include "base/metrics.h"
#include "torch/profiler.h"
#include "torch/tensor_utils.h"

namespace tpu::torch_bridge {
namespace {

// A point on a device queue: done when the queue has run task `seq`.
struct QueueEvent {
  int device = 0;
  uint64_t seq = 0;
};

// The pinned blocks' address ranges (start -> size), for IsPinnedPtr of any address inside one.
std::shared_mutex g_ranges_mu;
std::map<uintptr_t, size_t>& Ranges() {
  static auto* ranges = new std::map<uintptr_t, size_t>();
  return *ranges;
}

using Block = at::HostBlock<c10::Stream>;

struct TpuHostAllocatorImpl final : public at::CachingHostAllocatorImpl<c10::Stream, QueueEvent, Block> {
 private:
  void allocate_host_memory(size_t size, void** ptr) override {
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) {
      TORCH_CHECK_WITH(OutOfMemoryError, false, "pin_memory: the host could not map ", size,
                       " bytes of memory to pin");
    }
    if (mlock(p, size) != 0) {
      static Counter* unlocked = GetCounter("pinned_unlocked_bytes");
      unlocked->Add(static_cast<int64_t>(size));
      TORCH_WARN_ONCE("pin_memory: this process may not lock more memory (RLIMIT_MEMLOCK; `ulimit -l`), so "
                      "pinned blocks are mapped and pre-faulted but not page-locked");
    }
    std::unique_lock<std::shared_mutex> lock(g_ranges_mu);
    Ranges()[reinterpret_cast<uintptr_t>(p)] = size;
    *ptr = p;
  }

  void free_block(Block* block) override {
    {
      std::unique_lock<std::shared_mutex> lock(g_ranges_mu);
      Ranges().erase(reinterpret_cast<uintptr_t>(block->ptr_));
    }
    munmap(block->ptr_, block->size_);  // also unlocks it
  }

  void record_stream(std::optional<std::vector<QueueEvent>>& events, c10::Stream stream) override {
    int device = stream.device_index() < 0 ? 0 : stream.device_index();
    events->push_back(QueueEvent{device, DeviceFor(device).queue().submitted()});
  }

  bool query_event(QueueEvent& event) override { return DeviceFor(event.device).queue().Done(event.seq); }

  c10::Stream get_current_stream() const override {
    return c10::Stream(c10::Stream::DEFAULT, c10::Device(c10::DeviceType::PrivateUse1,
                                                         static_cast<c10::DeviceIndex>(CurrentDeviceIndex())));
  }

  bool stream_is_capturing(c10::Stream) const override { return false; }  // no graph capture
};

DECLARE_HOST_ALLOCATOR(TpuHostAllocator, TpuHostAllocatorImpl, TpuHostAllocatorDeleter, g_host_allocator)

}  // namespace

REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &g_host_allocator)

bool IsPinnedPtr(const void* ptr) {
  auto a = reinterpret_cast<uintptr_t>(ptr);
  std::shared_lock<std::shared_mutex> lock(g_ranges_mu);
  const auto& ranges = Ranges();
  auto it = ranges.upper_bound(a);
  if (it == ranges.begin()) return false;
  --it;
  return a < it->first + it->second;
}

c10::Allocator* PinnedAllocator() { return &g_host_allocator; }

bool CopyFromPinned(const at::Tensor& src, const at::Tensor& dst) {
  if (!src.device().is_cpu() || src.scalar_type() != dst.scalar_type() || !src.sizes().equals(dst.sizes()) ||
      !src.is_contiguous() || !dst.is_contiguous() || src.is_conj() || src.is_neg() || dst.is_conj() ||
      dst.is_neg() || !IsPinnedPtr(src.data_ptr()))
    return false;
  Binding target = BindingOf(dst);
  Buffer* buffer = target.buffer();
  if (DeferredUses(buffer)) return false;  // the window orders it (the staged path does)
  int64_t bytes = src.numel() * static_cast<int64_t>(src.element_size());
  c10::Stream stream(c10::Stream::DEFAULT, dst.device());
  // Kept from reuse until the queue has passed this copy; false: not one of our blocks after all.
  if (!g_host_allocator.record_event(src.data_ptr(), src.storage().data_ptr().get_context(), stream)) return false;
  MaterializeOrThrow(buffer);
  static Counter* pinned = GetCounter("transfers_from_pinned");
  pinned->Add();
  DeviceOf(dst).queue().WriteFrom(buffer, target.byte_offset(), src.data_ptr(), bytes, nullptr,
                                  ProfiledContext("copy to tpu (pinned)"));
  return true;
}

}  // namespace tpu::torch_bridge
