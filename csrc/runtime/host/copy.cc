// CopyView: dst = convert(src) for views of any strides (a result into its binding, a layout
// change, a broadcast made dense), in the fused regions' tiles and register classes.
#include <algorithm>
#include <cstring>

#include "runtime/host/kernels.h"
#include "runtime/host/registers.h"
#include "runtime/host/tiles.h"

namespace tpu::host {

namespace {

// len elements of `elem` bytes at q (stride in elements), each a copy of value.
void FillRun(const char* value, int elem, char* q, int64_t len, int64_t stride) {
  if (stride == 1 && std::all_of(value, value + elem, [&](char c) { return c == value[0]; })) {
    std::memset(q, value[0], static_cast<size_t>(len * elem));
    return;
  }
  auto fill = [&](auto v) {
    using T = decltype(v);
    std::memcpy(&v, value, sizeof(T));
    T* t = reinterpret_cast<T*>(q);
    if (stride == 1) std::fill(t, t + len, v);
    else for (int64_t i = 0; i < len; ++i) t[i * stride] = v;
  };
  switch (elem) {
    case 1: fill(uint8_t{}); break;
    case 2: fill(uint16_t{}); break;
    case 4: fill(uint32_t{}); break;
    default: fill(uint64_t{}); break;
  }
}

// A contiguous run of `bytes` from p to q, which may overlap. A run of a few words (a concatenate's
// short pieces, a batch norm's H x W of 2 x 2 gathered per channel) goes in fixed-size pieces the
// compiler copies in registers, rather than a library call per row.
void CopyBytes(const char* p, char* q, int64_t bytes) {
  if (bytes > 64 || bytes % 4 != 0 || (q < p + bytes && p < q + bytes)) {
    std::memmove(q, p, static_cast<size_t>(bytes));
    return;
  }
  int64_t i = 0;
  for (; i + 16 <= bytes; i += 16) std::memcpy(q + i, p + i, 16);
  for (; i < bytes; i += 4) std::memcpy(q + i, p + i, 4);
}

// n elements of `from` at p (stride ps) converted to `to` at q (stride qs), n <= kTile. Out of
// line: its register buffers would otherwise sit in the frame of every short row's copy.
__attribute__((noinline)) void ConvertRun(DType from, const char* p, int64_t ps, int64_t n, DType to, char* q,
                                          int64_t qs) {
  alignas(64) char reg[kTile * 8];
  alignas(64) char reg2[kTile * 8];
  Load(from, p, ps, n, reg);
  if (ClassOf(from) == ClassOf(to) && !(to == DType::kBool && from != DType::kBool)) {
    RoundToDType(reg, to, n);
    Store(to, reg, n, q, qs);
  } else {
    Convert(ClassOf(from), reg, to, reg2, n);
    Store(to, reg2, n, q, qs);
  }
}

}  // namespace

Status CopyView(const View& src, const View& dst) {
  if (src.dims != dst.dims) return Internal("CopyView shape mismatch");
  std::vector<Operand> operands;
  operands.push_back({static_cast<char*>(src.data), src.dtype, src.strides, DTypeSize(src.dtype)});
  operands.push_back({static_cast<char*>(dst.data), dst.dtype, dst.strides, DTypeSize(dst.dtype)});
  Dims dims = src.dims;
  SmallVector<Dims*, 8> sp;
  sp.push_back(&operands[0].strides);
  sp.push_back(&operands[1].strides);
  Coalesce(dims, sp);
  int rank = static_cast<int>(dims.size());
  int64_t s0 = rank ? operands[0].strides[rank - 1] : 1, s1 = rank ? operands[1].strides[rank - 1] : 1;
  bool same = src.dtype == dst.dtype;
  int elem = DTypeSize(src.dtype);
  if (same && CopyTransposed(operands[0].base, operands[1].base, elem, dims, operands[0].strides, operands[1].strides))
    return Status::Ok();
  const bool plain = same && s0 == 1 && s1 == 1;
  // A byte copy or a fill needs no storage.
  const int64_t tile = plain || s0 == 0 ? kMaxTile : kTile;
  auto convert = [&](const char* p, int64_t ps, int64_t n, char* q, int64_t qs) {
    ConvertRun(src.dtype, p, ps, n, dst.dtype, q, qs);
  };
  auto copy_run = [&](const char* p, char* q, int64_t len) {  // len <= tile
    if (plain) {
      CopyBytes(p, q, len * elem);
    } else if (s0 == 0) {  // one value along the run (a broadcast: a scatter's zeros): converted once, filled
      char value[8];
      convert(p, 0, 1, value, 1);
      FillRun(value, operands[1].elem, q, len, s1);
    } else {
      convert(p, s0, len, q, s1);
    }
  };
  const int64_t inner = rank ? dims[rank - 1] : 1;
  if (rank >= 2 && inner < tile) {
    // Note [Row tiles]: short rows (a concatenate's pieces, a slice's rows) several per tile.
    const int64_t ps = operands[0].strides[rank - 2], qs = operands[1].strides[rank - 2];
    ForEachRowTile(dims, operands, std::max<int64_t>(1, tile / inner), [&](const int64_t* off, int64_t m) {
      if (plain) {  // the common case, without a call per row (a batch norm's rows of 4 floats)
        const char* p = operands[0].base + off[0] * elem;
        char* q = operands[1].base + off[1] * elem;
        for (int64_t j = 0; j < m; ++j, p += ps * elem, q += qs * elem) CopyBytes(p, q, inner * elem);
        return;
      }
      for (int64_t j = 0; j < m; ++j)
        copy_run(operands[0].base + (off[0] + j * ps) * elem, operands[1].base + (off[1] + j * qs) * operands[1].elem,
                 inner);
    });
  } else {
    ForEachTile(dims, operands, tile, [&](const int64_t* off, int64_t len) {
      copy_run(operands[0].base + off[0] * elem, operands[1].base + off[1] * operands[1].elem, len);
    });
  }
  return Status::Ok();
}


}  // namespace tpu::host
