// Registration of the `tpu` device with PyTorch: allocator, device guard, hooks, generator.
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <memory>
#include <mutex>

#include "backends/backends.h"
#include "base/clock.h"
#include "base/metrics.h"
#include "torch/deferred/capture.h"
#include "torch/fork.h"
#include "torch/generator.h"
#include "torch/sync_wait.h"
#include "torch/pinned.h"
#include "torch/profiler.h"
#include "torch/tensor_utils.h"

namespace tpu::torch_bridge {
namespace {

thread_local int current_device = 0;

// ---------------------------------------------------------------------------------------------
// Allocator
// Device memory is opaque (runtime/buffer.h): the pointer a tpu DataPtr carries is the Buffer's
// device address (Note [Device pointers]) -- unique among live storages, so tensor.data_ptr()
// identifies storages and offsets within them as PyTorch expects, and never dereferenced as
// memory. The Buffer is also the DataPtr's context.
class TpuAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    int index = CurrentDeviceIndex();
    Device& device = DeviceFor(index);
    auto result = device.allocator().Allocate(static_cast<int64_t>(nbytes), /*materialize=*/false);
    if (!result.ok()) ThrowStatus(result.status());
    Buffer* buffer = result.value();
    c10::DataPtr ptr(buffer->device_address(), buffer, &ReleaseFn,
                     c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(index)));
    NoteNewBuffer(buffer);
    // Memory is attached now, so running out of it is reported at the user's line.
    if (MaterializeEagerly()) MaterializeOrThrow(buffer);
    return ptr;
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    // Both are device addresses of this allocator's buffers (Note [Device pointers]).
    if (count == 0) return;
    // Storage copies go to the queue directly, past any window: a capture cannot record them.
    if (ActiveCapture()) CaptureBreak("it copies a storage (Storage.copy_ / clone of a storage)");
    Buffer* d = Buffer::FromDeviceAddress(dest);
    Buffer* s = Buffer::FromDeviceAddress(src);
    TORCH_CHECK(d && s && dest == d->device_address() && src == s->device_address(),
                "tpu allocator: copy_data of memory it did not allocate");
    MaterializeOrThrow(d);
    MaterializeOrThrow(s);
    DeviceFor(d->device()).queue().Copy(s, 0, d, 0, static_cast<int64_t>(count), ProfiledContext("storage copy"));
  }
  bool initialized() override { return true; }
  void emptyCache(c10::MempoolId_t) override {
    for (int i = 0; i < GetBackend().device_count(); ++i) {
      GetBackend().device(i).queue().CollectGarbage();
      GetBackend().device(i).allocator().EmptyCache();
    }
  }
  // tensor.record_stream(s): every stream of a device feeds its one in-order queue, and a queued
  // task holds a reference to each buffer it uses, so freed memory is never reused while work
  // queued on any stream still reads it. Nothing to record beyond checking the arguments.
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override {
    TORCH_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1,
                "record_stream: expected a tpu stream, got a stream of device ", stream.device());
    TORCH_CHECK(ptr.device() == stream.device() || ptr.get() == nullptr, "record_stream: the tensor is on ",
                ptr.device(), " but the stream is on ", stream.device());
  }
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    DeviceFor(device < 0 ? 0 : device).queue().CollectGarbage();
    MemoryStats s = DeviceFor(device < 0 ? 0 : device).allocator().stats();
    c10::CachingDeviceAllocator::DeviceStats out;
    auto set = [](c10::CachingDeviceAllocator::StatArray& a, int64_t cur, int64_t peak, int64_t alloc, int64_t freed) {
      auto& st = a[static_cast<size_t>(c10::CachingDeviceAllocator::StatType::AGGREGATE)];
      st.current = cur;
      st.peak = peak;
      st.allocated = alloc;
      st.freed = freed;
    };
    set(out.allocated_bytes, s.allocated, s.peak_allocated, s.allocated_bytes_total, s.freed_bytes_total);
    set(out.reserved_bytes, s.reserved, s.peak_reserved, 0, 0);
    set(out.active_bytes, s.allocated, s.peak_allocated, 0, 0);
    set(out.requested_bytes, s.allocated, s.peak_allocated, 0, 0);
    set(out.allocation, s.num_allocs - s.num_frees, s.num_allocs, s.num_allocs, s.num_frees);
    out.num_ooms = s.num_ooms;
    return out;
  }
  void resetAccumulatedStats(c10::DeviceIndex device) override {
    DeviceFor(device < 0 ? 0 : device).allocator().ResetAccumulated();
  }
  void resetPeakStats(c10::DeviceIndex device) override {
    DeviceFor(device < 0 ? 0 : device).allocator().ResetPeak();
  }
  static void ReleaseFn(void* ctx) { static_cast<Buffer*>(ctx)->Release(); }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    DeviceFor(device < 0 ? 0 : device).queue().CollectGarbage();
    MemoryStats s = DeviceFor(device < 0 ? 0 : device).allocator().stats();
    return {static_cast<size_t>(s.capacity - s.reserved), static_cast<size_t>(s.capacity)};
  }

};

TpuAllocator g_allocator;

// ---------------------------------------------------------------------------------------------
// Device guard, streams and events. Every stream of a device maps onto its one in-order queue,
// which is a valid (stronger) ordering; events are markers on that queue.
struct TpuEvent {
  uint64_t seq = 0;
  int device = 0;
  std::shared_ptr<std::atomic<int64_t>> done_ns = std::make_shared<std::atomic<int64_t>>(0);
};

struct TpuGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;
  c10::DeviceType type() const override { return kType; }
  c10::Device exchangeDevice(c10::Device d) const override {
    c10::Device old(kType, static_cast<c10::DeviceIndex>(current_device));
    if (d.index() >= 0) SetCurrentDeviceIndex(d.index());
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(kType, static_cast<c10::DeviceIndex>(current_device)); }
  void setDevice(c10::Device d) const override {
    if (d.index() >= 0) SetCurrentDeviceIndex(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0 && d.index() < GetBackend().device_count()) current_device = d.index();
  }
  c10::Stream getStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, d.index() < 0 ? getDevice() : d);
  }
  c10::Stream getDefaultStream(c10::Device d) const override { return getStream(d); }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override { return getStream(d); }
  c10::Stream getNewStream(c10::Device d, int) const override { return getStream(d); }
  c10::Stream exchangeStream(c10::Stream s) const override { return getStream(s.device()); }
  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(GetBackend().device_count());
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    delete static_cast<TpuEvent*>(event);
  }
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag) const override {
    auto* ev = static_cast<TpuEvent*>(*event);
    if (!ev) {
      ev = new TpuEvent();
      *event = ev;
    }
    int dev = stream.device_index() < 0 ? current_device : stream.device_index();
    PrepareDeviceSync(dev);  // the event marks the point after everything issued so far
    ev->device = dev;
    ev->done_ns = std::make_shared<std::atomic<int64_t>>(0);
    auto done = ev->done_ns;
    ev->seq = DeviceFor(dev).queue().Enqueue(
        [done] {
          done->store(SteadyNowNs());
          return Status::Ok();
        },
        ProfiledContext("event.record"));
  }
  void block(void* event, const c10::Stream&) const override {}  // one queue: already ordered
  bool queryEvent(void* event) const override {
    auto* ev = static_cast<TpuEvent*>(event);
    return !ev || DeviceFor(ev->device).queue().Done(ev->seq);
  }
  bool queryStream(const c10::Stream& s) const override {
    Queue& q = DeviceFor(s.device_index() < 0 ? current_device : s.device_index()).queue();
    return q.Done(q.submitted());
  }
  void synchronizeStream(const c10::Stream& s) const override {
    SyncDevice(s.device_index() < 0 ? current_device : s.device_index());
  }
  void synchronizeEvent(void* event) const override {
    auto* ev = static_cast<TpuEvent*>(event);
    if (!ev) return;
    Queue& q = DeviceFor(ev->device).queue();
    WaitInterruptibly(q, ev->seq);
    Check(q.WaitFor(ev->seq));
  }
  void synchronizeDevice(const c10::DeviceIndex index) const override {
    SyncDevice(index < 0 ? current_device : index);
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    auto* a = static_cast<TpuEvent*>(start);
    auto* b = static_cast<TpuEvent*>(end);
    TORCH_CHECK(a && b, "elapsed_time needs two recorded events");
    synchronizeEvent(a);
    synchronizeEvent(b);
    return static_cast<double>(b->done_ns->load() - a->done_ns->load()) / 1e6;
  }
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, TpuGuardImpl);

// ---------------------------------------------------------------------------------------------
// Hooks
struct TpuHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex index) const override {
    return DefaultGenerator(index < 0 ? static_cast<c10::DeviceIndex>(current_device) : index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex index) const override {
    return at::make_generator<TpuGenerator>(index < 0 ? static_cast<c10::DeviceIndex>(current_device) : index);
  }
  at::Device getDeviceFromPtr(void*) const override {
    return at::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(current_device));
  }
  // Note [Pinned memory] (torch/pinned.cc).
  bool isPinnedPtr(const void* data) const override { return IsPinnedPtr(data); }
  c10::Allocator* getPinnedMemoryAllocator() const override { return PinnedAllocator(); }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override {
    return static_cast<c10::DeviceIndex>(GetBackend().device_count());
  }
  void setCurrentDevice(c10::DeviceIndex d) const override { SetCurrentDeviceIndex(d); }
  c10::DeviceIndex getCurrentDevice() const override { return static_cast<c10::DeviceIndex>(current_device); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    auto old = static_cast<c10::DeviceIndex>(current_device);
    SetCurrentDeviceIndex(d);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override { return exchangeDevice(d); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    // A new buffer, the old bytes copied into it on the device queue, the data pointer swapped.
    auto* impl = storage.unsafeGetStorageImpl();
    size_t old = impl->nbytes();
    // Allocate on the storage's own device, not the current one.
    c10::DeviceGuard guard(storage.device());
    c10::DataPtr fresh = g_allocator.allocate(newsize);
    auto* buffer = static_cast<Buffer*>(impl->data_ptr().get_context());
    size_t keep = std::min(old, newsize);
    if (keep > 0 && buffer) {
      PrepareHostAccess(buffer);  // the old bytes may still be pending in a fused window
      auto* dst = static_cast<Buffer*>(fresh.get_context());
      MaterializeOrThrow(dst);
      MaterializeOrThrow(buffer);
      DeviceFor(buffer->device()).queue().Copy(buffer, 0, dst, 0, static_cast<int64_t>(keep), ProfiledContext("resize_"));
    }
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(newsize);
  }
};

TpuHooks* g_hooks = nullptr;

}  // namespace

// ---------------------------------------------------------------------------------------------
// Generator
TpuGenerator::TpuGenerator(c10::DeviceIndex index)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, index),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)) {}

void TpuGenerator::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}

uint64_t TpuGenerator::seed() {
  uint64_t s = c10::detail::getNonDeterministicRandom();
  set_current_seed(s);
  return s;
}

void TpuGenerator::set_state(const c10::TensorImpl& new_state) {
  TORCH_CHECK(new_state.numel() == 16 && new_state.dtype() == caffe2::TypeMeta::Make<uint8_t>(),
              "tpu generator state must be a uint8 tensor of 16 bytes, got ", new_state.numel(), " elements");
  const auto* p = static_cast<const uint64_t*>(new_state.data());
  seed_ = p[0];
  offset_ = p[1];
}

c10::intrusive_ptr<c10::TensorImpl> TpuGenerator::get_state() const {
  auto t = at::empty({16}, at::TensorOptions().dtype(at::kByte));
  auto* p = static_cast<uint64_t*>(t.data_ptr());
  p[0] = seed_;
  p[1] = offset_;
  return t.getIntrusivePtr();
}

TpuGenerator* TpuGenerator::clone_impl() const {
  auto* g = new TpuGenerator(device().index());
  g->seed_ = seed_;
  g->offset_ = offset_;
  return g;
}

std::pair<uint64_t, uint64_t> TpuGenerator::Reserve(int64_t numel) {
  uint64_t off = offset_;
  // Each offset step covers 2^32 Philox blocks of 4 values; one step per draw keeps draws disjoint.
  offset_ += 1 + static_cast<uint64_t>(numel) / (uint64_t{4} << 32);
  return {seed_, off};
}

const at::Generator& DefaultGenerator(c10::DeviceIndex index) {
  static std::vector<at::Generator>* gens = [] {
    auto* v = new std::vector<at::Generator>();
    for (int i = 0; i < GetBackend().device_count(); ++i)
      v->push_back(at::make_generator<TpuGenerator>(static_cast<c10::DeviceIndex>(i)));
    return v;
  }();
  TORCH_CHECK(index >= 0 && index < static_cast<int>(gens->size()), "invalid tpu device index ", index);
  return (*gens)[index];
}

TpuGenerator* GetGenerator(const std::optional<at::Generator>& gen, c10::DeviceIndex index) {
  const at::Generator& g = gen.has_value() && gen->defined() ? *gen : DefaultGenerator(index);
  TORCH_CHECK(g.device().type() == c10::DeviceType::PrivateUse1,
              "expected a tpu generator for a tpu tensor, got a generator on ", g.device());
  return at::check_generator<TpuGenerator>(g);
}

// ---------------------------------------------------------------------------------------------
// Bridges
DType ToDType(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return DType::kF32;
    case at::kDouble: return DType::kF64;
    case at::kHalf: return DType::kF16;
    case at::kBFloat16: return DType::kBF16;
    case at::kLong: return DType::kI64;
    case at::kInt: return DType::kI32;
    case at::kShort: return DType::kI16;
    case at::kChar: return DType::kI8;
    case at::kByte: return DType::kU8;
    case at::kBool: return DType::kBool;
    case at::kUInt32: return DType::kU32;
    case at::kUInt64: return DType::kU64;
    case at::kComplexFloat: case at::kComplexDouble:
      // Note [Complex tensors]: programs see a complex tensor as its float pairs; a kernel that
      // asks for a complex IR dtype has no complex path.
      TORCH_CHECK_NOT_IMPLEMENTED(false, "this tpu op does not support ", t, " tensors; move them to the CPU "
                                  "for it (tensor.cpu())");
    default:
      TORCH_CHECK_NOT_IMPLEMENTED(false, "dtype ", t, " is not supported on the tpu device");
  }
}

bool IsSupported(at::ScalarType t) {
  switch (t) {
    case at::kFloat: case at::kDouble: case at::kHalf: case at::kBFloat16: case at::kLong:
    case at::kInt: case at::kShort: case at::kChar: case at::kByte: case at::kBool:
    case at::kUInt32: case at::kUInt64:
      return true;
    default:
      return false;
  }
}

bool IsStorageDType(at::ScalarType t) {
  return IsSupported(t) || t == at::kComplexFloat || t == at::kComplexDouble;
}

at::ScalarType ToScalarType(DType t) {
  switch (t) {
    case DType::kF32: return at::kFloat;
    case DType::kF64: return at::kDouble;
    case DType::kF16: return at::kHalf;
    case DType::kBF16: return at::kBFloat16;
    case DType::kI64: return at::kLong;
    case DType::kI32: return at::kInt;
    case DType::kI16: return at::kShort;
    case DType::kI8: return at::kChar;
    case DType::kU8: return at::kByte;
    case DType::kBool: return at::kBool;
    case DType::kU32: return at::kUInt32;
    case DType::kU64: return at::kUInt64;
  }
  return at::kFloat;
}

Device& DeviceFor(int index) {
  CheckNotInBadFork();  // Note [Fork]
  Backend& b = GetBackend();
  if (b.device_count() == 0 && !BackendStatus().ok()) ThrowStatus(BackendStatus());  // why there are none
  TORCH_CHECK(index >= 0 && index < b.device_count(), "Invalid device index tpu:", index, ": ",
              b.device_count(), " tpu device(s) are configured (TORCH_TPU_NUM_DEVICES)");
  return b.device(index);
}

int CurrentDeviceIndex() { return current_device; }
void SetCurrentDeviceIndex(int index) {
  DeviceFor(index);  // validates
  current_device = index;
}

Buffer* BufferOf(const at::Tensor& t) {
  const c10::DataPtr& p = t.storage().data_ptr();
  if (p.get_deleter() == &TpuAllocator::ReleaseFn) return static_cast<Buffer*>(p.get_context());
  // A DataPtr made elsewhere over one of our device addresses (torch.from_blob on a tpu data
  // pointer, as legacy serialization does).
  return p.get() ? Buffer::FromDeviceAddress(p.get()) : nullptr;
}

namespace {
// The buffer behind `t` and the byte offset of its storage's start in it.
Buffer* CheckedBufferOf(const at::Tensor& t, int64_t* storage_start) {
  Buffer* b = BufferOf(t);
  TORCH_CHECK(b || t.storage().nbytes() == 0,
              "this tpu tensor's storage is not memory torch_tpu allocated (torch.from_blob on an address that is "
              "no tpu tensor's), so it cannot be addressed; create it with torch.empty(..., device='tpu')");
  *storage_start = b ? static_cast<const char*>(t.storage().data()) - static_cast<const char*>(b->device_address()) : 0;
  return b;
}
}  // namespace

Binding BindingOf(const at::Tensor& t) {
  int64_t start;
  Buffer* b = CheckedBufferOf(t, &start);
  int64_t offset = start + t.storage_offset() * static_cast<int64_t>(t.element_size());
  Dims dims(t.sizes().begin(), t.sizes().end()), strides(t.strides().begin(), t.strides().end());
  if (t.is_complex()) {
    // Note [Complex tensors]: a complex tensor binds as its float pairs [..., 2].
    for (int64_t& s : strides) s *= 2;
    dims.push_back(2);
    strides.push_back(1);
    return Binding(b, offset, ToDType(c10::toRealValueType(t.scalar_type())), std::move(dims), std::move(strides));
  }
  return Binding(b, offset, ToDType(t.scalar_type()), std::move(dims), std::move(strides));
}

bool CoversStorage(const at::Tensor& t) {
  return t.storage_offset() == 0 && t.is_contiguous() &&
         static_cast<size_t>(t.numel()) * t.element_size() == t.storage().nbytes();
}

StorageSpan SpanOf(const at::Tensor& t) {
  // The byte range [lo, hi) that t's elements occupy (strides may be negative in principle).
  int64_t lo = t.storage_offset(), hi = t.storage_offset();
  if (t.numel() > 0) {
    for (int64_t d = 0; d < t.dim(); ++d) {
      int64_t reach = (t.size(d) - 1) * t.stride(d);
      if (reach < 0) lo += reach;
      else hi += reach;
    }
    hi += 1;
  }
  int64_t es = static_cast<int64_t>(t.element_size());
  int64_t start;
  Buffer* b = CheckedBufferOf(t, &start);
  return StorageSpan{b, start + lo * es, (hi - lo) * es};
}

at::Tensor ReadToHost(const at::Tensor& t) {
  static Counter* d2h = GetCounter("transfers_to_host");
  static Counter* d2h_bytes = GetCounter("transfer_bytes_to_host");
  StorageSpan span = SpanOf(t);
  // The span's bytes, then t's view of them: the same sizes and strides, from the span's start.
  at::Tensor bytes = at::empty({span.nbytes}, at::TensorOptions().dtype(at::kByte));
  at::Tensor host = at::empty({0}, at::TensorOptions().dtype(t.scalar_type()));
  int64_t first = t.storage_offset();  // the element the span starts at, in t's own numbering
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.stride(d) < 0 && t.size(d) > 0) first += (t.size(d) - 1) * t.stride(d);
  host.set_(bytes.storage(), t.storage_offset() - first, t.sizes(), t.strides());
  if (span.nbytes == 0) return host;
  SyncTensor(t);
  MaterializeOrThrow(span.buffer);  // never written (torch.empty): its bytes are whatever memory holds
  d2h->Add();
  d2h_bytes->Add(span.nbytes);
  Check(DeviceOf(t).queue().Read(span.buffer, span.offset, span.nbytes, bytes.data_ptr()));
  return host;
}

void MaterializeOrThrow(Buffer* buffer) {
  if (buffer->materialized()) return;
  Device& device = DeviceFor(buffer->device());
  Status st = device.allocator().Materialize(buffer);
  if (!st.ok() && st.code() == Code::kResourceExhausted) {
    // Queued and finished programs may still hold buffers Python has released: reclaim them
    // before reporting out-of-memory.
    device.queue().Drain();
    device.allocator().EmptyCache();
    st = device.allocator().Materialize(buffer);
  }
  Check(st);
}

namespace {
// An index out of range is an IndexError, except in the ops whose CPU kernels raise RuntimeError
// for it (gather and the scatters). A device error's message starts with the op's name.
bool OutOfRangeIsRuntimeError(const std::string& message) {
  for (const char* op : {"aten::gather", "aten::scatter"})
    if (message.rfind(op, 0) == 0) return true;
  return false;
}
}  // namespace

void ThrowStatus(const Status& s) {
  switch (s.code()) {
    case Code::kResourceExhausted:
      TORCH_CHECK_WITH(OutOfMemoryError, false, s.message());
    case Code::kOutOfRange:
      TORCH_CHECK(!OutOfRangeIsRuntimeError(s.message()), s.message());
      TORCH_CHECK_INDEX(false, s.message());
    case Code::kUnimplemented:
      TORCH_CHECK_NOT_IMPLEMENTED(false, s.message());
    case Code::kInvalidArgument:
      TORCH_CHECK(false, s.message());
    case Code::kFailedPrecondition:
    case Code::kCancelled:
      TORCH_CHECK(false, s.message());
    case Code::kInternal:
      TORCH_CHECK(false, "torch_tpu internal error (please report): ", s.message());
    case Code::kOk:
      break;
  }
  TORCH_CHECK(false, s.ToString());
}

void SyncTensor(const at::Tensor& t) {
  static Counter* syncs = GetCounter("host_syncs");
  syncs->Add();
  Buffer* b = BufferOf(t);
  if (b) PrepareHostRead(b);
  Queue& q = DeviceOf(t).queue();
  WaitInterruptibly(q, b ? b->last_use() : q.submitted());
  Check(q.SyncBuffer(b));
}

void SyncDevice(int index) {
  static Counter* syncs = GetCounter("host_syncs");
  syncs->Add();
  PrepareDeviceSync(index);
  Queue& q = DeviceFor(index).queue();
  WaitInterruptibly(q, q.submitted());
  Check(q.Synchronize());
}

c10::Allocator* GetTpuAllocator() { return &g_allocator; }

void RegisterDevice() {
  static std::once_flag once;
  std::call_once(once, [] {
    TORCH_CHECK(!at::isPrivateUse1HooksRegistered(),
                "torch_tpu cannot register the 'tpu' device: another backend already owns PyTorch's "
                "PrivateUse1 slot in this process (only one out-of-tree device can be loaded)");
    c10::SetAllocator(c10::DeviceType::PrivateUse1, &g_allocator);
    g_hooks = new TpuHooks();
    at::RegisterPrivateUse1HooksInterface(g_hooks);
  });
}

}  // namespace tpu::torch_bridge
