// A tensor's strided view of a flat array as StableHLO ops: how a program reads a view of a
// storage it holds as a value, and writes through one (a functional update of the whole value).
// The deferred engine uses these for storages its window computes, and every backend whose
// bindings are dense (PJRT) for views of ready storages.
//
// The view: element (i_0, ..., i_{r-1}) is flat[offset + sum_k i_k * strides[k]]. Note [Strided
// views]: a view whose dims (of size > 1, by decreasing stride) nest -- each stride a multiple of
// the next, no two dims overlapping -- is a dynamic_slice of `extent` elements at the offset,
// reshaped into nested blocks, sliced, transposed and broadcast (stride-0 dims); a write inverts
// it with dynamic_update_slice. Any other view is a gather (reads) or scatter (writes) of
// computed indices. The offset is a constant of the program, or a value (an i64 scalar) so that
// views at different offsets share one program -- then the array is padded so that the blocks
// fit from any valid offset (a copy of it, where a constant offset needs none).
#pragma once

#include "ir/builder.h"

namespace tpu {

// Where a view starts in its flat array: a constant, or an i64 scalar value.
struct ViewOffset {
  int value = -1;         // the value's id, or -1 for the constant
  int64_t constant = 0;   // elements
  static ViewOffset Constant(int64_t elements) { return ViewOffset{-1, elements}; }
  static ViewOffset Value(int id) { return ViewOffset{id, 0}; }
  bool dynamic() const { return value >= 0; }
};

// Reads the view out of `flat` (a rank-1 value).
int ReadStrided(Builder& b, int flat, const Dims& sizes, const Dims& strides, ViewOffset offset);

// `flat` with the view's elements replaced by `update` (a value of the view's sizes and flat's
// element type). Where the view repeats a location (a stride-0 dim), the last write wins.
int UpdateStrided(Builder& b, int flat, const Dims& sizes, const Dims& strides, ViewOffset offset, int update);

// Whether (sizes, strides) nest (Note [Strided views]); the others go through gather/scatter.
bool StridesNest(const Dims& sizes, const Dims& strides);

}  // namespace tpu
