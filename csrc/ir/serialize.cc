#include "ir/serialize.h"

#include <climits>

#include "ir/verifier.h"

namespace tpu {
namespace {

constexpr uint32_t kGraphFormat = 2;  // 2: types carry their bounded dims
constexpr int kNumOpCodes = 0
#define TPU_OP(e, name, arity, kind) +1
#include "ir/ops.def"
#undef TPU_OP
    ;

void WriteDims(const Dims& d, ByteWriter& w) {
  w.U64(d.size());
  for (int64_t x : d) w.I64(x);
}

Status ReadDims(ByteReader& r, Dims* d) {
  uint64_t n;
  TPU_RETURN_IF_ERROR(r.Count(&n, 8));
  if (n > 64) return InvalidArgument("corrupt program: a shape of rank > 64");
  d->clear();
  for (uint64_t i = 0; i < n; ++i) {
    int64_t x;
    TPU_RETURN_IF_ERROR(r.I64(&x));
    d->push_back(x);
  }
  return Status::Ok();
}

void WriteType(const TensorType& t, ByteWriter& w) {
  w.U8(static_cast<uint8_t>(t.dtype));
  WriteDims(t.dims, w);
  w.U64(t.bounded);
}

Status ReadType(ByteReader& r, TensorType* t) {
  uint8_t dt;
  TPU_RETURN_IF_ERROR(r.U8(&dt));
  if (dt >= kNumDTypes) return InvalidArgument("corrupt program: unknown dtype");
  t->dtype = static_cast<DType>(dt);
  TPU_RETURN_IF_ERROR(ReadDims(r, &t->dims));
  for (int64_t d : t->dims)
    if (d < 0) return InvalidArgument("corrupt program: a negative dimension");
  TPU_RETURN_IF_ERROR(r.U64(&t->bounded));
  if (t->rank() < 64 && (t->bounded >> t->rank()) != 0) return InvalidArgument("corrupt program: a bounded dim past the rank");
  return Status::Ok();
}

}  // namespace

void WriteGraph(const Graph& g, ByteWriter& w) {
  w.U32(kGraphFormat);
  w.U64(g.params.size());
  for (const TensorType& p : g.params) WriteType(p, w);
  w.U64(g.ops.size());
  for (const Op& op : g.ops) {
    w.U32(static_cast<uint32_t>(op.code));
    w.U64(op.operands.size());
    for (int o : op.operands) w.U32(static_cast<uint32_t>(o));
    WriteType(op.type, w);
    for (const Dims* d : {&op.attrs.a, &op.attrs.b, &op.attrs.c, &op.attrs.d, &op.attrs.e}) WriteDims(*d, w);
    w.I64(op.attrs.i);
    w.I64(op.attrs.kind);
    w.F64(op.attrs.f);
    w.I64(op.src);
  }
  w.U64(g.results.size());
  for (int v : g.results) w.U32(static_cast<uint32_t>(v));
}

StatusOr<Graph> ReadGraph(ByteReader& r) {
  uint32_t format;
  TPU_RETURN_IF_ERROR(r.U32(&format));
  if (format != kGraphFormat) return InvalidArgument("program format " + std::to_string(format) + " is not this build's");
  Graph g;
  uint64_t n;
  TPU_RETURN_IF_ERROR(r.Count(&n, 9));
  g.params.resize(n);
  for (TensorType& p : g.params) TPU_RETURN_IF_ERROR(ReadType(r, &p));
  TPU_RETURN_IF_ERROR(r.Count(&n, 40));
  g.ops.resize(n);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    Op& op = g.ops[i];
    uint32_t code;
    TPU_RETURN_IF_ERROR(r.U32(&code));
    if (code >= static_cast<uint32_t>(kNumOpCodes)) return InvalidArgument("corrupt program: unknown op code");
    op.code = static_cast<OpCode>(code);
    uint64_t no;
    TPU_RETURN_IF_ERROR(r.Count(&no, 4));
    const int defined = g.num_params() + static_cast<int>(i);
    for (uint64_t k = 0; k < no; ++k) {
      uint32_t o;
      TPU_RETURN_IF_ERROR(r.U32(&o));
      if (static_cast<int64_t>(o) >= defined) return InvalidArgument("corrupt program: an operand used before it is defined");
      op.operands.push_back(static_cast<int>(o));
    }
    TPU_RETURN_IF_ERROR(ReadType(r, &op.type));
    for (Dims* d : {&op.attrs.a, &op.attrs.b, &op.attrs.c, &op.attrs.d, &op.attrs.e}) TPU_RETURN_IF_ERROR(ReadDims(r, d));
    TPU_RETURN_IF_ERROR(r.I64(&op.attrs.i));
    TPU_RETURN_IF_ERROR(r.I64(&op.attrs.kind));
    TPU_RETURN_IF_ERROR(r.F64(&op.attrs.f));
    int64_t src;
    TPU_RETURN_IF_ERROR(r.I64(&src));
    // (the index of an op of the program as submitted: an optimized graph may have fewer ops)
    if (src < -1 || src > INT32_MAX) return InvalidArgument("corrupt program: an op's source index");
    op.src = static_cast<int32_t>(src);
  }
  TPU_RETURN_IF_ERROR(r.Count(&n, 4));
  for (uint64_t k = 0; k < n; ++k) {
    uint32_t v;
    TPU_RETURN_IF_ERROR(r.U32(&v));
    if (static_cast<int64_t>(v) >= g.num_values()) return InvalidArgument("corrupt program: a result that is no value");
    g.results.push_back(static_cast<int>(v));
  }
  TPU_RETURN_IF_ERROR(Verify(g));
  return g;
}

}  // namespace tpu
