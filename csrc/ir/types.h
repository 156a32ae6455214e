// Value types: element type + shape, each dimension static or bounded dynamic.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/small_vector.h"
#include "ir/dtype.h"

namespace tpu {

// Shapes and strides are short: kept inline (see base/small_vector.h).
using Dims = SmallVector<int64_t, 6>;

// Note [Bounded dims in the IR]: a dimension may be *bounded dynamic* (StableHLO's bounded
// dynamism): `dims[d]` is then a static upper bound and the size is known only at run time (at
// most the bound). Such a value is laid out at its bound, as a static one of that shape; the
// elements past the runtime size are padding whose values are unspecified. Sizes come in with
// stablehlo.set_dimension_size (a value's dim takes an i32 runtime size) and are read with
// stablehlo.get_dimension_size. Ops over a bounded value see only its first `size` elements along
// that dim: a reduce or a dot_general's contraction ignores the padding. Printed as
// `tensor<?x3xf32, #stablehlo.bounds<8, ?>>`. A program's parameters and results are static
// (dense buffers), and only the ops BoundedOperandsAllowed names take a bounded operand; backends
// that run static shapes make the program static first (compiler/passes/bounded.h), XLA reads it
// as it is.
struct TensorType {
  DType dtype = DType::kF32;
  Dims dims;
  uint64_t bounded = 0;  // bit d: dims[d] is an upper bound, the size is a runtime value

  bool IsBounded(int d) const { return (bounded >> d) & 1; }
  TensorType Static() const { return TensorType{dtype, dims}; }  // the same value's padded layout

  int rank() const { return static_cast<int>(dims.size()); }
  int64_t NumElements() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
  int64_t ByteSize() const { return NumElements() * DTypeSize(dtype); }
  bool operator==(const TensorType& o) const {
    return dtype == o.dtype && dims == o.dims && bounded == o.bounded;
  }
  bool operator!=(const TensorType& o) const { return !(*this == o); }
  // "tensor<2x3xf32>"; bounded: "tensor<?x3xf32, #stablehlo.bounds<8, ?>>"
  std::string ToString() const;
};

std::string DimsToString(const Dims& dims);

}  // namespace tpu
