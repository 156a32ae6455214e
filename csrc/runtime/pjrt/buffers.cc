#include "runtime/pjrt/buffers.h"

#include <string>

#include "runtime/memory.h"

namespace tpu::pjrt {

PJRT_Buffer_Type ToPjrtType(DType dtype) {
  switch (dtype) {
    case DType::kF32: return PJRT_Buffer_Type_F32;
    case DType::kF64: return PJRT_Buffer_Type_F64;
    case DType::kF16: return PJRT_Buffer_Type_F16;
    case DType::kBF16: return PJRT_Buffer_Type_BF16;
    case DType::kI64: return PJRT_Buffer_Type_S64;
    case DType::kI32: return PJRT_Buffer_Type_S32;
    case DType::kI16: return PJRT_Buffer_Type_S16;
    case DType::kI8: return PJRT_Buffer_Type_S8;
    case DType::kU8: return PJRT_Buffer_Type_U8;
    case DType::kU32: return PJRT_Buffer_Type_U32;
    case DType::kU64: return PJRT_Buffer_Type_U64;
    case DType::kBool: return PJRT_Buffer_Type_PRED;
  }
  return PJRT_Buffer_Type_INVALID;
}

StatusOr<DType> FromPjrtType(PJRT_Buffer_Type type) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (ToPjrtType(static_cast<DType>(i)) == type) return static_cast<DType>(i);
  return Unimplemented(std::string("PJRT element type ") + PjrtTypeName(type) + " has no torch_tpu dtype");
}

const char* PjrtTypeName(PJRT_Buffer_Type type) {
  switch (type) {
    case PJRT_Buffer_Type_PRED: return "pred";
    case PJRT_Buffer_Type_S8: return "s8";
    case PJRT_Buffer_Type_S16: return "s16";
    case PJRT_Buffer_Type_S32: return "s32";
    case PJRT_Buffer_Type_S64: return "s64";
    case PJRT_Buffer_Type_U8: return "u8";
    case PJRT_Buffer_Type_U16: return "u16";
    case PJRT_Buffer_Type_U32: return "u32";
    case PJRT_Buffer_Type_U64: return "u64";
    case PJRT_Buffer_Type_F16: return "f16";
    case PJRT_Buffer_Type_F32: return "f32";
    case PJRT_Buffer_Type_F64: return "f64";
    case PJRT_Buffer_Type_BF16: return "bf16";
    default: return "(other)";
  }
}

StatusOr<ArrayType> TypeOf(const Api& api, PJRT_Buffer* buffer) {
  ArrayType t;
  auto et = TPU_PJRT_ARGS(PJRT_Buffer_ElementType_Args);
  et.buffer = buffer;
  TPU_RETURN_IF_ERROR(api.ToStatus(api->PJRT_Buffer_ElementType(&et), "PJRT_Buffer_ElementType"));
  t.type = et.type;
  auto dims = TPU_PJRT_ARGS(PJRT_Buffer_Dimensions_Args);
  dims.buffer = buffer;
  TPU_RETURN_IF_ERROR(api.ToStatus(api->PJRT_Buffer_Dimensions(&dims), "PJRT_Buffer_Dimensions"));
  t.dims.assign(dims.dims, dims.dims + dims.num_dims);
  return t;
}

StatusOr<PJRT_Buffer*> Upload(const Api& api, PJRT_Client* client, PJRT_Device* device, const void* data,
                              PJRT_Buffer_Type type, const Dims& dims) {
  auto args = TPU_PJRT_ARGS(PJRT_Client_BufferFromHostBuffer_Args);
  args.client = client;
  args.data = data;
  args.type = type;
  args.dims = dims.data();
  args.num_dims = dims.size();
  // The plugin copies (or has finished reading) `data` when the call returns, so the caller's
  // memory may be reused at once.
  args.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableOnlyDuringCall;
  args.device = device;
  TPU_RETURN_IF_ERROR(api.ToStatus(api->PJRT_Client_BufferFromHostBuffer(&args), "PJRT_Client_BufferFromHostBuffer"));
  Status st = api.AwaitAndDestroy(args.done_with_host_buffer, "host to device transfer");
  if (!st.ok()) {
    DestroyBuffer(api, args.buffer);
    return st;
  }
  return args.buffer;
}

Status Download(const Api& api, PJRT_Buffer* buffer, void* dst, int64_t nbytes) {
  auto args = TPU_PJRT_ARGS(PJRT_Buffer_ToHostBuffer_Args);
  args.src = buffer;
  args.dst = dst;
  args.dst_size = static_cast<size_t>(nbytes);
  TPU_RETURN_IF_ERROR(api.ToStatus(api->PJRT_Buffer_ToHostBuffer(&args), "PJRT_Buffer_ToHostBuffer"));
  return api.AwaitAndDestroy(args.event, "device to host transfer");
}

void DestroyBuffer(const Api& api, PJRT_Buffer* buffer) {
  if (!buffer) return;
  auto args = TPU_PJRT_ARGS(PJRT_Buffer_Destroy_Args);
  args.buffer = buffer;
  (void)api.ToStatus(api->PJRT_Buffer_Destroy(&args), "PJRT_Buffer_Destroy");
}

StatusOr<Buffer*> PjrtAllocator::Allocate(int64_t nbytes, bool materialize) {
  return NewBuffer(this, device_, nbytes, materialize);
}

Status PjrtAllocator::Materialize(Buffer* buffer) {
  if (buffer->materialized()) return Status::Ok();
  std::unique_lock<std::mutex> lock(mu_);
  if (buffer->materialized()) return Status::Ok();  // another thread won
  int64_t n = buffer->nbytes();
  if (stats_.allocated + n > MemoryBudget(stats_)) {
    ++stats_.num_ooms;
    Status oom = OutOfMemory(device_, n, stats_.allocated, stats_.capacity, stats_.limit);
    int64_t free_bytes = MemoryBudget(stats_) - stats_.allocated;
    lock.unlock();  // observers run outside the lock (Note [Allocation events])
    NotifyOom(device_, n, free_bytes);
    return oom;
  }
  stats_.allocated += n;
  stats_.allocated_bytes_total += n;
  stats_.reserved = stats_.allocated;
  if (stats_.allocated > stats_.peak_allocated) stats_.peak_allocated = stats_.allocated;
  stats_.peak_reserved = stats_.peak_allocated;
  ++stats_.num_allocs;
  buffer->set_contents(kUnwritten);
  lock.unlock();
  NotifyAlloc(*buffer, n);
  return Status::Ok();
}

void PjrtAllocator::Free(Buffer* buffer) {
  if (buffer->materialized()) {
    NotifyFree(*buffer, buffer->nbytes());
    DestroyBuffer(*api_, PjrtBufferOf(buffer));
    std::lock_guard<std::mutex> lock(mu_);
    stats_.allocated -= buffer->nbytes();
    stats_.freed_bytes_total += buffer->nbytes();
    stats_.reserved = stats_.allocated;
    ++stats_.num_frees;
  }
  delete buffer;
}

Status PjrtAllocator::SetMemoryLimit(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.limit = bytes > 0 ? bytes : 0;
  return Status::Ok();
}

MemoryStats PjrtAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void PjrtAllocator::ResetPeak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_allocated = stats_.peak_reserved = stats_.allocated;
}

void PjrtAllocator::ResetAccumulated() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.num_allocs = stats_.num_frees = stats_.num_ooms = 0;
  stats_.allocated_bytes_total = stats_.freed_bytes_total = 0;
}

}  // namespace tpu::pjrt
