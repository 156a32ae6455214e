// Graph: a function of typed parameters, ops in topological order, and results.
// Value ids: parameters are 0..num_params-1; op i produces value num_params + i.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ir/types.h"

namespace tpu {

enum class OpCode : uint16_t {
#define TPU_OP(e, name, arity, kind) e,
#include "ir/ops.def"
#undef TPU_OP
};

enum class OpKind : uint8_t { Unary, Binary, Ternary, Structural, Other };

const char* OpName(OpCode code);
int OpArity(OpCode code);  // -1: variadic
OpKind GetOpKind(OpCode code);
inline bool IsElementwise(OpCode c) {
  OpKind k = GetOpKind(c);
  return k == OpKind::Unary || k == OpKind::Binary || k == OpKind::Ternary;
}

// Whether `code` may take an operand with a bounded dim (Note [Bounded dims in the IR]):
// elementwise ops, broadcast_in_dim, transpose, reduce, dot_general and the dimension-size ops.
inline bool BoundedOperandsAllowed(OpCode c) {
  return IsElementwise(c) || c == OpCode::kBroadcastInDim || c == OpCode::kTranspose || c == OpCode::kReduce ||
         c == OpCode::kDotGeneral || c == OpCode::kGetDimensionSize || c == OpCode::kSetDimensionSize;
}

enum class CompareDirection : int64_t { kEQ, kNE, kLT, kLE, kGT, kGE };
enum class ReduceKind : int64_t { kAdd, kMul, kMax, kMin, kAnd, kOr, kReplace };
const char* CompareDirectionName(CompareDirection d);

// Note [Check op]: check(x, ok) is x when every element of ok is true; otherwise the program
// fails there with the kind's message (PyTorch CPU's), and what depends on x is not computed
// (RunReport). The lowering anchors the check in the data flow by using its result, so passes
// keep it exactly where its value is needed. Kinds are typed: the printer, fingerprint and
// backends agree on what each means.
enum class CheckKind : int64_t {
  kIntegerDivisionByZero,  // integer //, %, fmod, div(rounding_mode=...) by a tensor holding 0
  kBceInputRange,          // binary_cross_entropy input outside [0, 1] (or NaN)
  kBceTargetRange,         // ... target
  kProbabilityRange,       // bernoulli with a probability tensor outside [0, 1] (or NaN)
  kAssert,                 // torch._assert_async: the message is the op's (attrs.a, one byte each)
  kCount
};
// The error message (PyTorch CPU's) and the name printed as the custom_call's backend_config.
const char* CheckMessage(CheckKind kind);
const char* CheckName(CheckKind kind);
struct Op;
// A check op's message: its kind's, or for kAssert the message it carries.
std::string CheckOpMessage(const Op& op);

// Attributes. Which fields an op uses (unused ones stay empty/zero and still hash equal):
//   broadcast_in_dim: a = broadcast_dimensions       transpose: a = permutation
//   reduce: a = dimensions, kind = ReduceKind          arg_reduce: a = {dim}, kind = kMax|kMin
//   slice: a = start, b = limit, c = strides          pad: a = low, b = high, c = interior
//   concatenate / iota: i = dimension                 compare: kind = CompareDirection
//   constant: f = value (rank-0 result)       sort: i = dimension, kind = 1 when descending
//   dot_general: a = lhs_batch, b = rhs_batch, c = lhs_contracting, d = rhs_contracting
//   gather: a = offset_dims, b = collapsed_slice_dims, c = start_index_map, d = slice_sizes,
//           i = index_vector_dim, kind = 1 when out-of-range indices are errors (else clamped)
//   scatter: a = update_window_dims, b = inserted_window_dims, c = scatter_dims_to_operand_dims,
//            i = index_vector_dim, kind = ReduceKind (combiner; kReplace overwrites)
//            | 256 when out-of-range indices are errors (else skipped)
//   rng_bit_generator: (operand: ui64[2] state {seed, offset}) Philox bits
//   check: kind = CheckKind; kAssert: a = the message's bytes (one per element)
//   convolution, reduce_window, arg_reduce_window: see ir/window.h
struct Attrs {
  Dims a, b, c, d, e;
  int64_t i = 0;
  int64_t kind = 0;
  double f = 0.0;
  bool operator==(const Attrs& o) const {
    // Bitwise for f: a NaN constant must equal itself, or its program would miss the cache on
    // every call (and +0.0 / -0.0 are different constants).
    return a == o.a && b == o.b && c == o.c && d == o.d && e == o.e && i == o.i && kind == o.kind &&
           std::memcmp(&f, &o.f, sizeof(f)) == 0;
  }
};

struct Op {
  OpCode code;
  SmallVector<int, 4> operands;
  TensorType type;
  Attrs attrs;
  // The index of the op of the program as submitted that this op computes (Optimize numbers
  // them; passes carry it along), so a run-time error names the user's op. Not part of the
  // program's identity: fingerprints and structural equality ignore it.
  int32_t src = -1;
};

struct Graph {
  std::vector<TensorType> params;
  std::vector<Op> ops;
  std::vector<int> results;

  int num_params() const { return static_cast<int>(params.size()); }
  int num_values() const { return num_params() + static_cast<int>(ops.size()); }
  bool IsParam(int v) const { return v < num_params(); }
  const Op& Producer(int v) const { return ops[v - num_params()]; }
  const TensorType& TypeOf(int v) const {
    return IsParam(v) ? params[v] : ops[v - num_params()].type;
  }
};

// The canonical structural hash used as the compile-cache key (structure + types + attributes).
uint64_t Fingerprint(const Graph& g);
// Feeds one op (code, operands as given, type, attributes) or a parameter's type into `add`, as
// Fingerprint does: for fingerprints built incrementally (base/hash.h Fingerprint128).
template <typename AddWord>
void HashOpWords(const Op& op, const SmallVector<int, 4>& operands, AddWord add);
template <typename AddWord>
void HashTypeWords(const TensorType& t, AddWord add) {
  add(static_cast<uint64_t>(t.dtype) | (t.bounded ? uint64_t{1} << 32 : 0));  // as HashType in graph.cc
  add(t.dims.size());
  for (int64_t d : t.dims) add(static_cast<uint64_t>(d));
  if (t.bounded) add(t.bounded);
}
bool StructurallyEqual(const Graph& a, const Graph& b);

template <typename AddWord>
void HashOpWords(const Op& op, const SmallVector<int, 4>& operands, AddWord add) {
  add((static_cast<uint64_t>(op.code) << 32) | operands.size());
  for (int o : operands) add(static_cast<uint64_t>(o));
  HashTypeWords(op.type, add);
  const Attrs& a = op.attrs;
  for (const Dims* d : {&a.a, &a.b, &a.c, &a.d, &a.e}) {
    add(d->size());
    for (int64_t x : *d) add(static_cast<uint64_t>(x));
  }
  uint64_t f;
  std::memcpy(&f, &a.f, sizeof(f));
  add(static_cast<uint64_t>(a.i));
  add(static_cast<uint64_t>(a.kind));
  add(f);
}

}  // namespace tpu
