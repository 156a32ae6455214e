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
// computed indices. The offset is a value (an i64 scalar), so views at different offsets share
// one program.
#pragma once

#include "ir/builder.h"

namespace tpu {

// Reads the view out of `flat` (a rank-1 value). `offset`: an i64 scalar value, or -1 for 0.
int ReadStrided(Builder& b, int flat, const Dims& sizes, const Dims& strides, int offset);

// `flat` with the view's elements replaced by `update` (a value of the view's sizes and flat's
// element type). Where the view repeats a location (a stride-0 dim), the last write wins.
int UpdateStrided(Builder& b, int flat, const Dims& sizes, const Dims& strides, int offset, int update);

// Whether (sizes, strides) nest (Note [Strided views]); the others go through gather/scatter.
bool StridesNest(const Dims& sizes, const Dims& strides);

}  // namespace tpu
