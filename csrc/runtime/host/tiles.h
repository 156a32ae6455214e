// The iteration of the host executor's tiled loops (elementwise.cc's fused regions, copy.cc's
// copies): operands' strides coalesced, then tiles of a flat space or of whole short rows, threaded
// over the pool.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "base/small_vector.h"
#include "base/thread_pool.h"
#include "ir/dtype.h"
#include "ir/types.h"

namespace tpu::host {

// Note [Tile length] (elementwise.cc): the shortest and longest tiles.
constexpr int64_t kTile = 256;
constexpr int64_t kMaxTile = 16384;

// Merges dimensions that are contiguous for every operand and drops size-1 dims.
inline void Coalesce(Dims& dims, SmallVector<Dims*, 8>& strides) {
  Dims nd;
  std::vector<Dims> ns(strides.size());
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 1) continue;
    bool merge = !nd.empty();
    for (size_t k = 0; merge && k < strides.size(); ++k)
      merge = ns[k].back() == (*strides[k])[d] * dims[d];
    if (merge) {
      nd.back() *= dims[d];
      for (size_t k = 0; k < strides.size(); ++k) ns[k].back() = (*strides[k])[d];
    } else {
      nd.push_back(dims[d]);
      for (size_t k = 0; k < strides.size(); ++k) ns[k].push_back((*strides[k])[d]);
    }
  }
  dims = std::move(nd);
  for (size_t k = 0; k < strides.size(); ++k) *strides[k] = std::move(ns[k]);
}

struct Operand {
  char* base;
  DType dtype;
  Dims strides;
  int elem;
};

// Note [Threading by work]: whether a loop is worth the pool is decided by its elements times
// the passes each element takes (`passes`: a fused region's ops, 1 for a copy), so a long chain
// over a medium tensor -- an optimizer's per-parameter update, 25 ops over 45056 elements -- runs
// threaded like a single op over a tensor that many times larger.

// Iterates a (coalesced) space in tiles of at most `tile` elements, calling
// fn(offsets_in_elements[], len) per tile.
template <typename Ops, typename F>
void ForEachTile(const Dims& dims, const Ops& ops, int64_t tile, F&& fn, int64_t passes = 1) {
  int rank = static_cast<int>(dims.size());
  int64_t inner = rank ? dims.back() : 1;
  int64_t outer = 1;
  for (int d = 0; d + 1 < rank; ++d) outer *= dims[d];
  int64_t chunks = (inner + tile - 1) / tile;
  int64_t tiles = outer * chunks;
  int64_t total = outer * inner;
  auto body = [&](int64_t b, int64_t e) {
    SmallVector<int64_t, 16> off(ops.size());
    for (int64_t t = b; t < e; ++t) {
      int64_t o = t / chunks, c = t % chunks;
      int64_t start = c * tile;
      int64_t len = std::min(tile, inner - start);
      for (size_t k = 0; k < ops.size(); ++k) {
        int64_t rem = o, acc = 0;
        for (int d = rank - 2; d >= 0; --d) {
          acc += (rem % dims[d]) * ops[k].strides[d];
          rem /= dims[d];
        }
        off[k] = acc + (rank ? start * ops[k].strides[rank - 1] : 0);
      }
      fn(off.data(), len);
    }
  };
  if (ThreadPool::Worth(total * std::max<int64_t>(1, passes)))
    ThreadPool::Get().ParallelFor(tiles, std::max<int64_t>(1, 8192 / std::max<int64_t>(1, std::min(tile, inner))), body);
  else body(0, tiles);
}

// Iterates a (coalesced) space of rank >= 2 in tiles of up to `rows` whole rows (rows: the
// second-to-last dim), calling fn(offsets_in_elements_of_the_first_row[], rows_in_tile).
template <typename Ops, typename F>
void ForEachRowTile(const Dims& dims, const Ops& ops, int64_t rows, F&& fn, int64_t passes = 1) {
  const int rank = static_cast<int>(dims.size());
  const int64_t inner = dims[rank - 1], mid = dims[rank - 2];
  int64_t outer = 1;
  for (int d = 0; d + 2 < rank; ++d) outer *= dims[d];
  const int64_t chunks = (mid + rows - 1) / rows, tiles = outer * chunks;
  auto body = [&](int64_t b, int64_t e) {
    SmallVector<int64_t, 16> off(ops.size());
    for (int64_t t = b; t < e; ++t) {
      int64_t o = t / chunks, r0 = t % chunks * rows;
      for (size_t k = 0; k < ops.size(); ++k) {
        int64_t rem = o, acc = 0;
        for (int d = rank - 3; d >= 0; --d) {
          acc += (rem % dims[d]) * ops[k].strides[d];
          rem /= dims[d];
        }
        off[k] = acc + r0 * ops[k].strides[rank - 2];
      }
      fn(off.data(), std::min(rows, mid - r0));
    }
  };
  if (ThreadPool::Worth(outer * mid * inner * std::max<int64_t>(1, passes)))
    ThreadPool::Get().ParallelFor(tiles, std::max<int64_t>(1, 8192 / (rows * inner)), body);
  else
    body(0, tiles);
}

}  // namespace tpu::host
