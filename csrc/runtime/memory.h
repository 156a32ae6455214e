// What every backend's allocator shares: making a buffer, and its out-of-memory error.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/allocator.h"

namespace tpu {

// Allocator::Allocate for any backend: a new buffer of `allocator` on `device`, materialized at
// once with `materialize` (and deleted again when that fails).
StatusOr<Buffer*> NewBuffer(Allocator* allocator, int device, int64_t nbytes, bool materialize);

// "1.50 MiB"
std::string FormatMib(int64_t bytes);

// The ResourceExhausted error of a request that does not fit a device's capacity.
Status OutOfMemory(int device, int64_t nbytes, int64_t in_use, int64_t capacity);

}  // namespace tpu
