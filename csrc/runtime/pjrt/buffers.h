// PJRT buffers: element types, host <-> device transfers, and the allocator that keeps a device's
// memory budget.
//
// Note [PJRT buffer contents]: a Buffer's contents() on this backend is
//   - null: no memory accounted yet (the allocator has not materialized it);
//   - kUnwritten: accounted, but never written -- it reads as zeros (device memory the program
//     has not initialized, like torch.empty's) and enters a program as a zero-filled array;
//   - else a PJRT_Buffer*, owned by the Buffer: the dense array of its current value. PJRT
//     arrays are immutable values, so a task that writes the buffer makes a new PJRT_Buffer
//     and replaces the old one (Executor::Replace), which it destroys.
// A PJRT_Buffer has an element type and dims, a Buffer only bytes: a buffer written from the host
// holds a u8 array (or keeps the type it had), and a launch that binds it with another type
// first reinterprets its bytes on the device (executor.cc).
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "base/status.h"
#include "ir/types.h"
#include "runtime/allocator.h"
#include "runtime/pjrt/api.h"

namespace tpu::pjrt {

// Note [PJRT buffer contents].
inline void* const kUnwritten = reinterpret_cast<void*>(uintptr_t{1});
inline PJRT_Buffer* PjrtBufferOf(const Buffer* b) {
  void* p = b->contents();
  return p == kUnwritten ? nullptr : static_cast<PJRT_Buffer*>(p);
}

// Every IR dtype has a PJRT element type (bool is PRED: one byte, 0 or 1).
PJRT_Buffer_Type ToPjrtType(DType dtype);
StatusOr<DType> FromPjrtType(PJRT_Buffer_Type type);
const char* PjrtTypeName(PJRT_Buffer_Type type);

struct ArrayType {
  PJRT_Buffer_Type type = PJRT_Buffer_Type_INVALID;
  Dims dims;
  bool operator==(const ArrayType& o) const { return type == o.type && dims == o.dims; }
  bool operator!=(const ArrayType& o) const { return !(*this == o); }
};
StatusOr<ArrayType> TypeOf(const Api& api, PJRT_Buffer* buffer);

// A dense array on `device` from host memory `data` (copied before this returns).
StatusOr<PJRT_Buffer*> Upload(const Api& api, PJRT_Client* client, PJRT_Device* device, const void* data,
                              PJRT_Buffer_Type type, const Dims& dims);
// The whole array's bytes into `dst` (`nbytes` = its dense size), waiting for the copy.
Status Download(const Api& api, PJRT_Buffer* buffer, void* dst, int64_t nbytes);
void DestroyBuffer(const Api& api, PJRT_Buffer* buffer);

// Accounts a device's bytes against its capacity; the memory itself is the plugin's (it is
// taken when a PJRT_Buffer is made). Exceeding the capacity is ResourceExhausted, as on the host.
class PjrtAllocator final : public Allocator {
 public:
  PjrtAllocator(const Api* api, int device, int64_t capacity) : api_(api), device_(device) {
    stats_.capacity = capacity;
  }
  StatusOr<Buffer*> Allocate(int64_t nbytes, bool materialize = true) override;
  Status Materialize(Buffer* buffer) override;
  void Free(Buffer* buffer) override;
  MemoryStats stats() const override;
  void ResetPeak() override;
  void ResetAccumulated() override;
  void EmptyCache() override {}  // nothing is cached: freed arrays go back to the plugin at once
  int64_t capacity() const override { return stats_.capacity; }
  Status SetMemoryLimit(int64_t bytes) override;

 private:
  const Api* api_;
  int device_;
  mutable std::mutex mu_;
  MemoryStats stats_;
};

}  // namespace tpu::pjrt
