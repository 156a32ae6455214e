// Value types: element type + static shape.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/small_vector.h"
#include "ir/dtype.h"

namespace tpu {

// Shapes and strides are short: kept inline (see base/small_vector.h).
using Dims = SmallVector<int64_t, 6>;

struct TensorType {
  DType dtype = DType::kF32;
  Dims dims;

  int rank() const { return static_cast<int>(dims.size()); }
  int64_t NumElements() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
  int64_t ByteSize() const { return NumElements() * DTypeSize(dtype); }
  bool operator==(const TensorType& o) const { return dtype == o.dtype && dims == o.dims; }
  bool operator!=(const TensorType& o) const { return !(*this == o); }
  // "tensor<2x3xf32>"
  std::string ToString() const;
};

std::string DimsToString(const Dims& dims);

}  // namespace tpu
