// Fused elementwise regions: one tiled pass over the iteration space. Each tile loads its inputs
// (straight from memory when contiguous and already of the register type), runs the region's ops
// on registers of kTile elements that stay in L1 (registers.h: Note [Register classes]), and stores
// the outputs.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "base/metrics.h"
#include "base/thread_pool.h"
#include "runtime/host/elementwise_simd.h"
#include "runtime/host/kernels.h"
#include "runtime/host/half.h"
#include "runtime/host/reduce_simd.h"
#include "runtime/host/registers.h"
#include "runtime/host/tiles.h"
#include "runtime/host/wrapping.h"

namespace tpu::host {
namespace {

// Note [Tile length]: a tile is kTile elements or a multiple of it. Each tile costs a fixed amount
// (offsets, one kernel call per op, stores), about as much as a kernel spends on 256 elements, so
// a region runs its longest tile whose values still fit in L1: values that need storage (an op's
// result, an input that must be converted, gathered or splatted, a splat filled once per call)
// take kL1Budget bytes between them; inputs read in place and the result written in place take
// none. A one-op region over contiguous float32 then runs tiles of kMaxTile elements, a long
// chain tiles of kTile.
constexpr int64_t kL1Budget = 32 * 1024;

int64_t TileLength(int values_stored) {
  if (values_stored == 0) return kMaxTile;
  int64_t t = kL1Budget / (8 * values_stored) / kTile * kTile;
  return std::clamp<int64_t>(t, kTile, kMaxTile);
}

template <typename T>
inline T Sign(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(x)) return x;
  }
  return static_cast<T>((T(0) < x) - (x < T(0)));
}

// Note [Unimplemented elementwise]: the loops return false for an (op, register class) they do not
// implement (exp on integers, xor on floats): RunFusedRegion asks each op once with no elements,
// before any tile runs, and returns Unimplemented -- an output is never left zeroed or unwritten.
template <typename T>
bool UnaryLoop(OpCode code, const T* a, T* o, int64_t n) {
  switch (code) {
    case OpCode::kAbs: for (int64_t i = 0; i < n; ++i) o[i] = a[i] < 0 ? WrapNeg(a[i]) : a[i]; return true;
    case OpCode::kNegate: for (int64_t i = 0; i < n; ++i) o[i] = WrapNeg(a[i]); return true;
    case OpCode::kSign: for (int64_t i = 0; i < n; ++i) o[i] = Sign(a[i]); return true;
    default: break;
  }
  if constexpr (std::is_floating_point_v<T>) {
    switch (code) {
      case OpCode::kExp: for (int64_t i = 0; i < n; ++i) o[i] = std::exp(a[i]); return true;
      case OpCode::kExpm1: for (int64_t i = 0; i < n; ++i) o[i] = std::expm1(a[i]); return true;
      case OpCode::kLog: for (int64_t i = 0; i < n; ++i) o[i] = std::log(a[i]); return true;
      case OpCode::kLog1p: for (int64_t i = 0; i < n; ++i) o[i] = std::log1p(a[i]); return true;
      case OpCode::kSqrt: for (int64_t i = 0; i < n; ++i) o[i] = std::sqrt(a[i]); return true;
      case OpCode::kRsqrt: for (int64_t i = 0; i < n; ++i) o[i] = T(1) / std::sqrt(a[i]); return true;
      case OpCode::kTanh: for (int64_t i = 0; i < n; ++i) o[i] = std::tanh(a[i]); return true;
      case OpCode::kLogistic: for (int64_t i = 0; i < n; ++i) o[i] = T(1) / (T(1) + std::exp(-a[i])); return true;
      case OpCode::kSine: for (int64_t i = 0; i < n; ++i) o[i] = std::sin(a[i]); return true;
      case OpCode::kCosine: for (int64_t i = 0; i < n; ++i) o[i] = std::cos(a[i]); return true;
      case OpCode::kFloor: for (int64_t i = 0; i < n; ++i) o[i] = std::floor(a[i]); return true;
      case OpCode::kCeil: for (int64_t i = 0; i < n; ++i) o[i] = std::ceil(a[i]); return true;
      case OpCode::kRoundNearestEven: for (int64_t i = 0; i < n; ++i) o[i] = std::nearbyint(a[i]); return true;
      case OpCode::kErf: for (int64_t i = 0; i < n; ++i) o[i] = std::erf(a[i]); return true;
      default: break;
    }
  } else {
    switch (code) {
      case OpCode::kFloor: case OpCode::kCeil: case OpCode::kRoundNearestEven:  // the identity
        std::copy(a, a + n, o);
        return true;
      case OpCode::kNot:
        for (int64_t i = 0; i < n; ++i) o[i] = static_cast<T>(~a[i]);
        return true;
      default: break;
    }
  }
  return false;  // e.g. exp on integers, not on floats
}

template <typename T>
inline T IntDiv(T a, T b) {
  if (b == 0) return T(-1);  // StableHLO: x/0 on integers is all ones; never trap
  // x / -1 without the INT_MIN / -1 trap: a wrapping negation (INT_MIN stays INT_MIN).
  if (std::is_signed_v<T> && b == T(-1)) return WrapNeg(a);
  return a / b;
}
template <typename T>
inline T IntRem(T a, T b) {
  if (b == 0) return a;
  if (std::is_signed_v<T> && b == T(-1)) return 0;
  return a % b;
}

template <typename T>
TPU_ISA_CLONES
bool BinaryLoop(OpCode code, const T* a, const T* b, T* o, int64_t n) {
  switch (code) {
    case OpCode::kAdd: for (int64_t i = 0; i < n; ++i) o[i] = WrapAdd(a[i], b[i]); return true;
    case OpCode::kSubtract: for (int64_t i = 0; i < n; ++i) o[i] = WrapSub(a[i], b[i]); return true;
    case OpCode::kMultiply: for (int64_t i = 0; i < n; ++i) o[i] = WrapMul(a[i], b[i]); return true;
    case OpCode::kMaximum:
      for (int64_t i = 0; i < n; ++i) o[i] = (a[i] > b[i] || a[i] != a[i]) ? a[i] : b[i];
      return true;
    case OpCode::kMinimum:
      for (int64_t i = 0; i < n; ++i) o[i] = (a[i] < b[i] || a[i] != a[i]) ? a[i] : b[i];
      return true;
    default: break;
  }
  if constexpr (std::is_floating_point_v<T>) {
    switch (code) {
      case OpCode::kDivide: for (int64_t i = 0; i < n; ++i) o[i] = a[i] / b[i]; return true;
      case OpCode::kRemainder: for (int64_t i = 0; i < n; ++i) o[i] = std::fmod(a[i], b[i]); return true;
      case OpCode::kPower: for (int64_t i = 0; i < n; ++i) o[i] = std::pow(a[i], b[i]); return true;
      case OpCode::kAtan2: for (int64_t i = 0; i < n; ++i) o[i] = std::atan2(a[i], b[i]); return true;
      default: break;
    }
  } else {
    switch (code) {
      case OpCode::kDivide: for (int64_t i = 0; i < n; ++i) o[i] = IntDiv(a[i], b[i]); return true;
      case OpCode::kRemainder: for (int64_t i = 0; i < n; ++i) o[i] = IntRem(a[i], b[i]); return true;
      case OpCode::kAnd: for (int64_t i = 0; i < n; ++i) o[i] = a[i] & b[i]; return true;
      case OpCode::kOr: for (int64_t i = 0; i < n; ++i) o[i] = a[i] | b[i]; return true;
      case OpCode::kXor: for (int64_t i = 0; i < n; ++i) o[i] = a[i] ^ b[i]; return true;
      case OpCode::kPower:
        for (int64_t i = 0; i < n; ++i) {
          T base = a[i], e = b[i], r = 1;
          if (e < 0) { r = (base == 1) ? 1 : (base == -1 ? ((e & 1) ? -1 : 1) : 0); o[i] = r; continue; }
          while (e) { if (e & 1) r = WrapMul(r, base); base = WrapMul(base, base); e >>= 1; }
          o[i] = r;
        }
        return true;
      default: break;
    }
  }
  return false;  // e.g. and/or/xor on floats, atan2 on integers
}

template <typename T>
TPU_ISA_CLONES
void CompareLoop(CompareDirection dir, const T* a, const T* b, int32_t* o, int64_t n) {
  switch (dir) {
    case CompareDirection::kEQ: for (int64_t i = 0; i < n; ++i) o[i] = a[i] == b[i]; return;
    case CompareDirection::kNE: for (int64_t i = 0; i < n; ++i) o[i] = a[i] != b[i]; return;
    case CompareDirection::kLT: for (int64_t i = 0; i < n; ++i) o[i] = a[i] < b[i]; return;
    case CompareDirection::kLE: for (int64_t i = 0; i < n; ++i) o[i] = a[i] <= b[i]; return;
    case CompareDirection::kGT: for (int64_t i = 0; i < n; ++i) o[i] = a[i] > b[i]; return;
    case CompareDirection::kGE: for (int64_t i = 0; i < n; ++i) o[i] = a[i] >= b[i]; return;
  }
}

template <typename T>
TPU_ISA_CLONES
void SelectLoop(const int32_t* p, const T* a, const T* b, T* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = p[i] ? a[i] : b[i];
}

template <typename T>
TPU_ISA_CLONES
void ClampLoop(const T* lo, const T* x, const T* hi, T* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    T v = x[i];
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(v)) { o[i] = v; continue; }
    }
    v = v < lo[i] ? lo[i] : v;
    o[i] = v > hi[i] ? hi[i] : v;
  }
}

template <typename F>
void DispatchClass(Rc rc, F&& f) {
  switch (rc) {
    case Rc::kF32: f(float{}); break;
    case Rc::kF64: f(double{}); break;
    case Rc::kI64: f(int64_t{}); break;
    case Rc::kI32: f(int32_t{}); break;
  }
}

// Runs one op over registers. `in` are register pointers of the operand classes. False: no kernel
// for this op on this type (Note [Unimplemented elementwise]); with n == 0 that is all it does.
bool RunOp(const Graph& g, const Op& op, const void* const* in, void* out, int64_t n) {
  Rc rc = ClassOf(g.TypeOf(op.operands[0]).dtype);
  switch (GetOpKind(op.code)) {
    case OpKind::Unary: {
      if (op.code == OpCode::kConvert) {
        Convert(rc, in[0], op.type.dtype, out, n);
        return true;
      }
      if (op.code == OpCode::kIsFinite) {
        int32_t* o = static_cast<int32_t*>(out);
        if (rc == Rc::kF32) for (int64_t i = 0; i < n; ++i) o[i] = std::isfinite(static_cast<const float*>(in[0])[i]);
        else if (rc == Rc::kF64) for (int64_t i = 0; i < n; ++i) o[i] = std::isfinite(static_cast<const double*>(in[0])[i]);
        else for (int64_t i = 0; i < n; ++i) o[i] = 1;
        return true;
      }
      if (op.code == OpCode::kNot && op.type.dtype == DType::kBool) {
        const int32_t* a = static_cast<const int32_t*>(in[0]);
        int32_t* o = static_cast<int32_t*>(out);
        for (int64_t i = 0; i < n; ++i) o[i] = !a[i];
        return true;
      }
      if (rc == Rc::kF32 && UnaryF32Simd(op.code, static_cast<const float*>(in[0]), static_cast<float*>(out), n))
        break;
      bool done = false;
      DispatchClass(rc, [&](auto t) {
        using T = decltype(t);
        done = UnaryLoop<T>(op.code, static_cast<const T*>(in[0]), static_cast<T*>(out), n);
      });
      if (!done) return false;
      break;
    }
    case OpKind::Binary: {
      if (op.code == OpCode::kCompare) {
        if (rc == Rc::kF32 && CompareF32Simd(static_cast<CompareDirection>(op.attrs.kind), static_cast<const float*>(in[0]),
                                             static_cast<const float*>(in[1]), static_cast<int32_t*>(out), n))
          return true;
        if (rc == Rc::kI64 && CompareI64Simd(static_cast<CompareDirection>(op.attrs.kind), static_cast<const int64_t*>(in[0]),
                                             static_cast<const int64_t*>(in[1]), static_cast<int32_t*>(out), n))
          return true;
        DispatchClass(rc, [&](auto t) {
          using T = decltype(t);
          CompareLoop<T>(static_cast<CompareDirection>(op.attrs.kind), static_cast<const T*>(in[0]),
                         static_cast<const T*>(in[1]), static_cast<int32_t*>(out), n);
        });
        return true;
      }
      if (rc == Rc::kF32 && BinaryF32Simd(op.code, static_cast<const float*>(in[0]),
                                          static_cast<const float*>(in[1]), static_cast<float*>(out), n))
        break;
      if (rc == Rc::kI64 && BinaryI64Simd(op.code, static_cast<const int64_t*>(in[0]),
                                          static_cast<const int64_t*>(in[1]), static_cast<int64_t*>(out), n))
        break;
      if (rc == Rc::kI32 && BinaryI32Simd(op.code, static_cast<const int32_t*>(in[0]),
                                          static_cast<const int32_t*>(in[1]), static_cast<int32_t*>(out), n))
        break;
      bool done = false;
      DispatchClass(rc, [&](auto t) {
        using T = decltype(t);
        done = BinaryLoop<T>(op.code, static_cast<const T*>(in[0]), static_cast<const T*>(in[1]),
                             static_cast<T*>(out), n);
      });
      if (!done) return false;
      break;
    }
    case OpKind::Ternary: {
      Rc vc = ClassOf(op.type.dtype);
      if (op.code == OpCode::kSelect && vc == Rc::kF32) {
        SelectF32Simd(static_cast<const int32_t*>(in[0]), static_cast<const float*>(in[1]),
                      static_cast<const float*>(in[2]), static_cast<float*>(out), n);
        return true;
      }
      DispatchClass(vc, [&](auto t) {
        using T = decltype(t);
        if (op.code == OpCode::kSelect)
          SelectLoop<T>(static_cast<const int32_t*>(in[0]), static_cast<const T*>(in[1]),
                        static_cast<const T*>(in[2]), static_cast<T*>(out), n);
        else
          ClampLoop<T>(static_cast<const T*>(in[0]), static_cast<const T*>(in[1]),
                       static_cast<const T*>(in[2]), static_cast<T*>(out), n);
      });
      return true;  // select/clamp pick existing values: no rounding needed
    }
    default:
      return false;  // not an elementwise op
  }
  RoundToDType(out, op.type.dtype, n);
  return true;
}

// A register's first value (of rb bytes) spread over its n values.
void SplatReg(char* t, int rb, int64_t n) {
  if (rb == 8) SplatU64Simd(reinterpret_cast<uint64_t*>(t), n);
  else SplatU32Simd(reinterpret_cast<uint32_t*>(t), n);
}

// Note [Composites from bfloat16]: a bfloat16 gelu or silu is a region of the composite's chain
// between two converts: bfloat16 -> float32 of the input, float32 -> bfloat16 of the result. Run
// by tiles, the input convert widens a tile into storage, the composite reads it there and writes
// a float32 tile, and the output's store rounds it: three passes, the first waiting on memory
// while nothing computes and the second computing while nothing loads (a bfloat16 gelu over
// [4096, 1024] took 1.04 ms on 2 threads where PyTorch's CPU kernel takes 0.82, against 0.77 for
// the float32 one). When the region is exactly that -- its ops the two converts, the covered
// chain and the composite, the one output the rounded result, input and output contiguous -- it
// runs as one bfloat16 -> bfloat16 kernel (GeluErfBf16Simd, SiluBf16Simd: widen, the float32
// kernel, round), the same bits in one pass. The region's shape is matched when its composites are
// (FusedRegion::bf16_composite); here only the layout. Returns false where it does not run so.
bool RunBf16Composite(const FusedRegion& region, const std::vector<Operand>& operands, const Dims& dims, int nin) {
  const int comp = region.bf16_composite;  // the region's shape, matched with its composites
  if (comp < 0 || dims.size() > 1) return false;
  const int in_conv = region.composite_input[comp] - nin;
  const Operand& x = operands[region.operand_slots[in_conv][0]];
  const Operand& y = operands[nin];
  if (!dims.empty() && (x.strides[0] != 1 || y.strides[0] != 1)) return false;
  static Counter* runs = GetCounter("host_bf16_composite_regions");
  runs->Add();
  const auto* src = reinterpret_cast<const uint16_t*>(x.base);
  auto* dst = reinterpret_cast<uint16_t*>(y.base);
  const bool gelu = region.composite[comp] == FusedRegion::Composite::kGeluErf;
  const std::array<Operand, 2> xy{x, y};
  // Threaded by the chain's work (Note [Threading by work], tiles.h).
  ForEachTile(
      dims, xy, kMaxTile,
      [&](const int64_t* off, int64_t len) {
        if (gelu) GeluErfBf16Simd(src + off[0], dst + off[1], len);
        else SiluBf16Simd(src + off[0], dst + off[1], len);
      },
      static_cast<int64_t>(region.ops.size()));
  return true;
}

}  // namespace

// Note [Widening reads]: a bfloat16 op runs as converts of its inputs to float32, the float32
// op and a convert of its result back, and each tile widened every bfloat16 input into storage
// before the op read it there: a pass per input that only waited on memory (an addcmul over
// (4096, 1024) bfloat16 spent 40% of its time widening, and took 1.8x PyTorch CPU's time). A
// bfloat16 input that only such converts read, whose results only float32 binary ops with a
// widening kernel (BinaryF32WideningSimd: add, subtract, multiply, divide, maximum, minimum) read
// -- no output, no composite -- is read in place when it is contiguous: those ops widen it as they
// load it, the same values. The same ops may also write a bfloat16 output themselves, rounding as
// they store: when the region ends in such an op and a convert of its result to bfloat16 that one
// output alone reads (contiguous), the op writes that output and the convert and the store are
// skipped. What the region's ops and slots decide is found here, with the composites; a run
// checks only the layout.
void MatchWidening(const Graph& g, FusedRegion& region) {
  const int nin = static_cast<int>(region.inputs.size());
  const int nops = static_cast<int>(region.ops.size());
  const int last_slot = nin + nops - 1;
  region.widenable.assign(nin, false);
  region.rounded_tail = false;
  region.binary_f32.assign(nops, false);
  auto reads = [&](int i, int slot) {
    const auto& slots = region.operand_slots[i];
    return std::find(slots.begin(), slots.end(), slot) != slots.end();
  };
  auto plain = [&](int i) { return region.composite.empty() || region.composite[i] == FusedRegion::Composite::kNone; };
  const std::vector<int>& outs = region.output_slots;
  auto is_output = [&](int slot) { return std::find(outs.begin(), outs.end(), slot) != outs.end(); };
  for (int i = 0; i < nops; ++i) {  // (the kernel asked with no elements: whether it has the op)
    const Op& op = g.ops[region.ops[i]];
    region.binary_f32[i] = plain(i) && op.type.dtype == DType::kF32 && region.operand_slots[i].size() == 2 &&
                           BinaryF32WideningSimd(op.code, nullptr, false, nullptr, false, nullptr, false, 0);
  }
  // The ops of a binary chain widen their leaves too, and its last op may round into the output
  // (Note [Binary chains], composite.cc).
  std::vector<bool>& widens = region.f32_steps;
  widens = region.binary_f32;
  std::vector<bool> chain_end(nops, false);
  for (int i = 0; i < static_cast<int>(region.chain.size()); ++i) {
    for (int p : region.chain[i]) widens[p] = true;
    chain_end[i] = !region.chain[i].empty();
  }
  for (int k = 0; k < nin; ++k) {
    if (g.TypeOf(region.inputs[k]).dtype != DType::kBF16 || is_output(k)) continue;
    bool ok = true, read = false;
    for (int i = 0; i < nops && ok; ++i) {
      if (!reads(i, k)) continue;
      read = true;
      const Op& op = g.ops[region.ops[i]];
      const int slot = nin + i;
      ok = op.code == OpCode::kConvert && op.type.dtype == DType::kF32 && plain(i) && !is_output(slot);
      for (int j = 0; j < nops && ok; ++j)
        if (reads(j, slot)) ok = widens[j];
    }
    region.widenable[k] = ok && read;
  }
  if (nops < 2) return;
  const Op& last = g.ops[region.ops[nops - 1]];
  const int prev = last_slot - 1;
  bool ok = last.code == OpCode::kConvert && last.type.dtype == DType::kBF16 &&
            g.TypeOf(last.operands[0]).dtype == DType::kF32 && plain(nops - 1) &&
            region.operand_slots[nops - 1][0] == prev && (region.binary_f32[nops - 2] || chain_end[nops - 2]) &&
            !is_output(prev);
  for (int i = 0; i < nops - 1 && ok; ++i) ok = !reads(i, prev);
  region.rounded_tail = ok && std::count(outs.begin(), outs.end(), last_slot) == 1;
}

Status RunFusedRegion(const Graph& g, const FusedRegion& region, const std::vector<View>& views) {
  const int nin = static_cast<int>(region.inputs.size());
  const int nops = static_cast<int>(region.ops.size());
  // Reused per thread: a tiny op's whole run costs about as much as one heap allocation. (Bound
  // to a local reference so the pool threads running tiles use this thread's vector.)
  thread_local std::vector<Operand> reused_operands;
  std::vector<Operand>& operands = reused_operands;
  operands.clear();
  Dims dims = region.shape;
  for (int v : region.inputs) {
    const View& w = views[v];
    operands.push_back({static_cast<char*>(w.data), w.dtype, w.strides, DTypeSize(w.dtype)});
  }
  const int nout = static_cast<int>(region.outputs.size());
  const std::vector<int>& out_slot = region.output_slots;
  for (int k = 0; k < nout; ++k) {
    const View& w = views[region.outputs[k]];
    operands.push_back({static_cast<char*>(w.data), w.dtype, w.strides, DTypeSize(w.dtype)});
  }
  for (auto& o : operands)
    if (o.strides.size() != dims.size()) return Internal("fused region operand rank mismatch");
  {
    SmallVector<Dims*, 8> sp;
    for (auto& o : operands) sp.push_back(&o.strides);
    Coalesce(dims, sp);
  }
  if (RunBf16Composite(region, operands, dims, nin)) return Status::Ok();  // Note [Composites from bfloat16]
  int rank = static_cast<int>(dims.size());
  auto inner_stride = [&](const Operand& o) { return rank ? o.strides[rank - 1] : 1; };
  // Note [Row tiles]: when the innermost dim is short and does not merge with the next one (a
  // per-channel operand of an NCHW tensor with a small H * W, a bias over short rows), a tile
  // holds several whole rows rather than one short row: the per-tile cost is paid once for all
  // of them. Operands contiguous across those rows are read (and written) in place; the others
  // are loaded and stored row by row, and one value per row (a per-channel operand: the
  // innermost stride 0, an outer one not) is spread over its rows in one call. Rows up to
  // kTile long (the shortest tile: a row always fits) take row tiles when such an operand is
  // there: a tile per 16 x 16 plane paid a load and a splat per plane (x * w[c] on
  // [16, 32, 16, 16]: 18.9 -> 14.5 us); without one, tiles along rows longer than kTile / 2 read
  // their operands in place, where a row tile would copy a broadcast row (a bias over [64, 256]
  // took 4.5 us that way against 2.9).
  const int64_t inner = rank ? dims[rank - 1] : 1;
  bool per_row_value = false;
  for (int k = 0; k < nin && rank >= 2; ++k) {
    bool varies = false;
    for (int d = 0; d + 1 < rank; ++d) varies |= operands[k].strides[d] != 0;
    per_row_value |= operands[k].strides[rank - 1] == 0 && varies;
  }
  const bool row_tiles = rank >= 2 && (inner <= kTile / 2 || (per_row_value && inner <= kTile));
  auto flat = [&](const Operand& o) {
    return inner_stride(o) == 1 && (!row_tiles || o.strides[rank - 2] == inner);
  };
  // The last op may write straight into its output when that output is contiguous and already
  // in register layout: every other op has read its inputs by then (safe for in-place updates).
  int direct_out = -1;
  int last_slot = nin + nops - 1;
  for (int k = 0; k < nout; ++k) {
    const Operand& o = operands[nin + k];
    if (out_slot[k] == last_slot && flat(o) && IsRegisterLayout(o.dtype)) direct_out = k;
  }

  const int nslots = nin + nops;
  if (nslots > kMaxRegionValues) return Internal("fused region with more values than register slots");
  // Every op asked once, with no elements, whether it has a kernel for its types: an unsupported
  // one fails the region before anything is written (Note [Unimplemented elementwise]).
  for (int i = 0; i < nops; ++i) {
    const Op& op = g.ops[region.ops[i]];
    const void* none[3] = {nullptr, nullptr, nullptr};
    if (!RunOp(g, op, none, nullptr, 0)) {
      return Unimplemented(std::string(OpName(op.code)) + " is not implemented for " +
                           DTypeName(g.TypeOf(op.operands[0]).dtype) + " operands on the host executor");
    }
  }
  // Inputs that are one value for the whole region (a scalar broadcast: every stride 0) are
  // splatted once per call into a tile that every thread reads (ops never write their inputs).
  thread_local std::vector<char> reused_splats;
  std::vector<char>& splats = reused_splats;
  // With row tiles (Note [Row tiles]), an input that is one row broadcast over all the others (a
  // bias, a norm's weight: every stride 0 but the innermost) is the same in every tile: it is
  // laid out once per call as a tile's worth of rows, like a scalar's splat.
  SmallVector<int, 8> splat_of(nin, -1);
  SmallVector<bool, 8> row_splat(nin, false);
  int nsplats = 0;
  for (int k = 0; k < nin; ++k) {
    bool scalar = true, row = row_tiles;
    for (int d = 0; d < rank; ++d) {
      scalar &= operands[k].strides[d] == 0;
      if (d + 1 < rank) row &= operands[k].strides[d] == 0;
    }
    if (scalar || row) {
      splat_of[k] = nsplats++;
      row_splat[k] = !scalar;
    }
  }
  // Each value that needs storage gets a tile of it (Note [Tile length]).
  const bool composites = !region.composite.empty();
  // Note [Widening reads]: the inputs the region may read in place (contiguous ones of those
  // MatchWidening found), and the output its last binary op writes itself.
  bool widened[kMaxRegionValues] = {};  // the slot's register is a bfloat16 input read in place
  for (int k = 0; k < nin; ++k) widened[k] = region.widenable[k] && splat_of[k] < 0 && flat(operands[k]);
  int rounded_out = -1;  // the output the region's last binary op writes rounded (-1: none)
  for (int k = 0; k < nout && region.rounded_tail; ++k)
    if (out_slot[k] == last_slot && flat(operands[nin + k])) rounded_out = k;
  // Note [Scalar operands]: per float32 binary op, a bit for each operand that is a scalar's splat
  // (bit 0: the first), which the op then reads as one value.
  // Binary chain steps (Note [Binary chains], composite.cc) read their scalar operands so too.
  uint8_t scalar_operands[kMaxRegionValues] = {};
  for (int i = 0; i < nops; ++i) {
    const auto& slots = region.operand_slots[i];
    for (int j = 0; j < 2 && region.f32_steps[i]; ++j)
      if (slots[j] < nin && splat_of[slots[j]] >= 0 && !row_splat[slots[j]]) scalar_operands[i] |= 1 << j;
  }
  int store_of[kMaxRegionValues];
  int nstored = 0;
  for (int k = 0; k < nin; ++k) {
    const Operand& o = operands[k];
    bool in_place = splat_of[k] >= 0 || (flat(o) && IsRegisterLayout(o.dtype)) || widened[k];
    store_of[k] = in_place ? -1 : nstored++;
  }
  // Note [Register-preserving converts]: a convert whose result's register holds the same value
  // (bfloat16 -> float32: the register already holds it as float32) reads its operand's register
  // instead of copying it (a bfloat16 op upcasts each input so: a third of the region's work).
  // Note [Converts the store rounds]: a float32 -> bfloat16/float16 convert whose value no op of
  // the region reads (it only leaves through outputs, which have its dtype) aliases its operand
  // too: the output's store rounds to nearest even exactly as the convert would have (rounding
  // twice is rounding once), so the region skips a copy and a rounding pass per tile.
  bool read_in_region[kMaxRegionValues] = {};
  for (int i = 0; i < nops; ++i)
    for (int s : region.operand_slots[i]) read_in_region[s] = true;
  int alias_of[kMaxRegionValues];
  for (int i = 0; i < nops; ++i) {
    const Op& op = g.ops[region.ops[i]];
    const bool direct = direct_out >= 0 && nin + i == last_slot;
    bool alias = false;
    if (op.code == OpCode::kConvert && !direct && !(composites && region.composite[i] != FusedRegion::Composite::kNone)) {
      const DType from = g.TypeOf(op.operands[0]).dtype, to = op.type.dtype;
      const bool store_rounds =
          from == DType::kF32 && (to == DType::kBF16 || to == DType::kF16) && !read_in_region[nin + i];
      alias = ConvertKeepsRegister(from, to) || store_rounds;
    }
    alias_of[nin + i] = alias ? region.operand_slots[i][0] : -1;
    if (alias) widened[nin + i] = widened[alias_of[nin + i]];
    bool none = direct || alias_of[nin + i] >= 0 || (rounded_out >= 0 && i == nops - 2) ||
                (composites && region.composite[i] == FusedRegion::Composite::kCovered);
    store_of[nin + i] = none ? -1 : nstored++;
  }
  // A splat is filled to the tile's length at every call: it counts as a stored value.
  const int64_t tile = TileLength(nstored + nsplats);
  const int64_t tile_rows = row_tiles ? std::max<int64_t>(1, tile / inner) : 1;  // rows a row tile holds
  splats.resize(static_cast<size_t>(nsplats) * tile * 8 + 64);
  for (int k = 0; k < nin; ++k) {
    if (splat_of[k] < 0) continue;
    char* t = splats.data() + splat_of[k] * tile * 8;
    if (row_splat[k]) {
      const int rb = RegBytes(operands[k].dtype);
      for (int64_t j = 0; j < tile_rows; ++j) Load(operands[k].dtype, operands[k].base, inner_stride(operands[k]), inner, t + j * inner * rb);
      continue;
    }
    Load(operands[k].dtype, operands[k].base, 0, 1, t);
    SplatReg(t, RegBytes(operands[k].dtype), tile);
  }
  // A tile: `m` rows of len / m elements each (m == 1 unless row_tiles), the first at `off`.
  auto run_tile = [&](const int64_t* off, int64_t m, int64_t len) {
    // nstored * tile * 8 <= max(kL1Budget, nstored * kTile * 8), within this (TileLength).
    alignas(64) thread_local static char storage_bytes[kMaxRegionValues * kTile * 8];
    auto storage = [&](int slot) { return storage_bytes + store_of[slot] * tile * 8; };
    const int64_t row = len / m;
    void* regs[kMaxRegionValues];
    for (int k = 0; k < nin; ++k) {
      const Operand& o = operands[k];
      const char* p = o.base + off[k] * o.elem;
      int64_t s = inner_stride(o);
      if (splat_of[k] >= 0) {
        regs[k] = splats.data() + splat_of[k] * tile * 8;
      } else if (store_of[k] < 0) {
        regs[k] = const_cast<char*>(p);
      } else {
        char* t = storage(k);
        regs[k] = t;
        const int rb = RegBytes(o.dtype);
        const int64_t row_bytes = m == 1 ? 0 : o.strides[rank - 2] * o.elem;
        if (s != 0) {
          LoadRows(o.dtype, p, row_bytes, s, row, m, t);  // (the rows in one call)
        } else if (m > 1) {
          // Broadcast along short rows (a per-channel value over an NCHW tensor's 2 x 2 or 4 x 4
          // planes): every row's element in one call. A call to load and one to splat per row
          // of 4 made batch norm's backward on [16, 256, 2, 2] take 7 ns an element.
          LoadRowsSplat(o.dtype, p, row_bytes, row, m, t);
        } else {
          // One row broadcast along: load one element, splat (whole vectors: the fill was most
          // of group norm's affine on [16, 8, 12, 256], a splat per 256-element tile).
          Load(o.dtype, p, 0, 1, t);
          SplatReg(t, rb, row);
        }
      }
    }
    for (int i = 0; i < nops; ++i) {
      using C = FusedRegion::Composite;
      const C composite = composites ? region.composite[i] : C::kNone;
      if (composite == C::kCovered) continue;  // only its chain reads it (Note [Region composites])
      const Op& op = g.ops[region.ops[i]];
      int slot = nin + i;
      if (alias_of[slot] >= 0) {  // Note [Register-preserving converts]
        regs[slot] = regs[alias_of[slot]];
        continue;
      }
      void* out = store_of[slot] >= 0 ? storage(slot) : nullptr;
      if (direct_out >= 0 && slot == last_slot) {
        const Operand& o = operands[nin + direct_out];
        out = o.base + off[nin + direct_out] * o.elem;
      }
      // Note [Widening reads]: the region's last binary op (or binary chain) rounds into the output.
      const bool rounded = rounded_out >= 0 && i == nops - 2;
      if (rounded) {
        const Operand& o = operands[nin + rounded_out];
        out = o.base + off[nin + rounded_out] * o.elem;
      }
      if (composite == C::kSilu) {
        SiluF32Simd(static_cast<const float*>(regs[region.composite_input[i]]), static_cast<float*>(out), len);
      } else if (composite == C::kSiluBackward) {
        SiluBackwardF32Simd(static_cast<const float*>(regs[region.composite_input[i]]),
                            static_cast<const float*>(regs[region.composite_input2[i]]), static_cast<float*>(out), len);
      } else if (composite == C::kGeluErf) {
        GeluErfF32Simd(static_cast<const float*>(regs[region.composite_input[i]]), static_cast<float*>(out), len);
      } else if (composite == C::kBinaryChain) {  // Note [Binary chains] (composite.cc)
        const auto& positions = region.chain[i];
        BinaryChainStep steps[kMaxBinaryChain];
        int prev = -1;
        for (size_t k = 0; k < positions.size(); ++k) {
          const int p = positions[k];
          BinaryChainStep& st = steps[k];
          st.code = g.ops[region.ops[p]].code;
          for (int side : {0, 1}) {
            const int s = region.operand_slots[p][side];
            if (prev >= 0 && s == nin + prev && st.acc < 0) {
              st.acc = side;
              continue;
            }
            st.in[side] = regs[s];
            st.scalar[side] = (scalar_operands[p] >> side) & 1;
            st.bf16[side] = widened[s];  // Note [Widening reads]
          }
          prev = p;
        }
        BinaryChainF32Simd(steps, static_cast<int>(positions.size()), out, rounded, len);
      } else if (composite == C::kGeluErfBackward) {
        GeluErfBackwardF32Simd(static_cast<const float*>(regs[region.composite_input[i]]),
                               static_cast<const float*>(regs[region.composite_input2[i]]), static_cast<float*>(out), len);
      } else {
        const void* in[3];
        const auto& slots = region.operand_slots[i];
        for (size_t j = 0; j < slots.size(); ++j) in[j] = regs[slots[j]];
        if (rounded || (slots.size() == 2 && (widened[slots[0]] || widened[slots[1]]))) {  // Note [Widening reads]
          BinaryF32WideningSimd(op.code, in[0], widened[slots[0]], in[1], widened[slots[1]], out, rounded, len);
        } else if (scalar_operands[i]) {  // Note [Scalar operands] (elementwise_simd.cc)
          BinaryF32ScalarSimd(op.code, static_cast<const float*>(in[0]), scalar_operands[i] & 1,
                              static_cast<const float*>(in[1]), scalar_operands[i] & 2, static_cast<float*>(out), len);
        } else {
          (void)RunOp(g, op, in, out, len);  // every op was checked above
        }
      }
      regs[slot] = out;
    }
    for (int k = 0; k < nout; ++k) {
      if (k == direct_out || k == rounded_out) continue;
      const Operand& o = operands[nin + k];
      StoreRows(o.dtype, regs[out_slot[k]], row, m, o.base + off[nin + k] * o.elem,
                m == 1 ? 0 : o.strides[rank - 2] * o.elem, inner_stride(o));
    }
  };
  // Threaded by the region's work, not only its size (Note [Threading by work], tiles.h).
  if (row_tiles) {
    ForEachRowTile(dims, operands, tile_rows, [&](const int64_t* off, int64_t m) { run_tile(off, m, m * inner); }, nops);
  } else {
    ForEachTile(dims, operands, tile, [&](const int64_t* off, int64_t len) { run_tile(off, 1, len); }, nops);
  }
  return Status::Ok();
}

}  // namespace tpu::host
