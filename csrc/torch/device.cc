// Registration of the `tpu` device with PyTorch: allocator, device guard, hooks, generator.
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <chrono>
#include <memory>
#include <mutex>

#include "base/metrics.h"
#include "torch/fork.h"
#include "torch/generator.h"
#include "torch/tensor_utils.h"

namespace tpu::torch_bridge {
namespace {

thread_local int current_device = 0;

// ---------------------------------------------------------------------------------------------
// Allocator
class TpuAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    int index = CurrentDeviceIndex();
    Device& device = DeviceFor(index);
    auto result = device.allocator().Allocate(static_cast<int64_t>(nbytes));
    if (!result.ok()) {
      // Queued and finished programs may still hold buffers Python has released: reclaim them
      // before reporting out-of-memory.
      device.queue().Drain();
      device.allocator().EmptyCache();
      result = device.allocator().Allocate(static_cast<int64_t>(nbytes));
    }
    if (!result.ok()) ThrowStatus(result.status());
    Buffer* buffer = result.value();
    return c10::DataPtr(buffer->data(), buffer, &Release,
                        c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(index)));
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
  bool initialized() override { return true; }
  void emptyCache(c10::MempoolId_t) override {
    for (int i = 0; i < GetBackend().device_count(); ++i) {
      GetBackend().device(i).queue().CollectGarbage();
      GetBackend().device(i).allocator().EmptyCache();
    }
  }
  void recordStream(const c10::DataPtr&, c10::Stream) override {}  // one in-order queue per device
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
    set(out.allocated_bytes, s.allocated, s.peak_allocated, 0, 0);
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
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    DeviceFor(device < 0 ? 0 : device).queue().CollectGarbage();
    MemoryStats s = DeviceFor(device < 0 ? 0 : device).allocator().stats();
    return {static_cast<size_t>(s.capacity - s.reserved), static_cast<size_t>(s.capacity)};
  }

 private:
  static void Release(void* ctx) { static_cast<Buffer*>(ctx)->Release(); }
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

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

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
    ev->device = dev;
    ev->done_ns = std::make_shared<std::atomic<int64_t>>(0);
    auto done = ev->done_ns;
    ev->seq = DeviceFor(dev).queue().Enqueue(
        [done] {
          done->store(NowNs());
          return Status::Ok();
        },
        TaskContext{"event.record", ""});
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
    if (ev) Check(DeviceFor(ev->device).queue().WaitFor(ev->seq));
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
  bool isPinnedPtr(const void*) const override { return false; }
  c10::Allocator* getPinnedMemoryAllocator() const override { return c10::GetCPUAllocator(); }
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
    // Allocate, copy the old bytes once the queue is done with them, swap the data pointer.
    auto* impl = storage.unsafeGetStorageImpl();
    size_t old = impl->nbytes();
    // Allocate on the storage's own device, not the current one.
    c10::DeviceGuard guard(storage.device());
    c10::DataPtr fresh = g_allocator.allocate(newsize);
    if (old > 0 && impl->data_ptr().get()) {
      auto* buffer = static_cast<Buffer*>(impl->data_ptr().get_context());
      if (buffer) Check(DeviceFor(buffer->device()).queue().WaitFor(buffer->last_use()));
      std::memcpy(fresh.get(), impl->data_ptr().get(), std::min(old, newsize));
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
  return static_cast<Buffer*>(t.storage().data_ptr().get_context());
}

View ViewOf(const at::Tensor& t) {
  View v;
  v.dtype = ToDType(t.scalar_type());
  v.data = static_cast<char*>(t.storage().data_ptr().get()) + t.storage_offset() * t.element_size();
  v.dims.assign(t.sizes().begin(), t.sizes().end());
  v.strides.assign(t.strides().begin(), t.strides().end());
  return v;
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
  Queue& q = DeviceOf(t).queue();
  Check(q.WaitFor(b ? b->last_use() : q.submitted()));
}

void SyncDevice(int index) {
  static Counter* syncs = GetCounter("host_syncs");
  syncs->Add();
  Check(DeviceFor(index).queue().Synchronize());
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
