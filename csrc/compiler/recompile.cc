#include "compiler/recompile.h"

#include "base/hash.h"

namespace tpu {

const char* CompileReasonName(CompileReason r) {
  switch (r) {
    case CompileReason::kNew: return "new";
    case CompileReason::kInputShape: return "input_shape";
    case CompileReason::kInputDtype: return "input_dtype";
    case CompileReason::kResultType: return "result_type";
    case CompileReason::kAttribute: return "attribute";
    case CompileReason::kOptions: return "options";
    case CompileReason::kEvicted: return "evicted";
    case CompileReason::kCount: break;
  }
  return "?";
}

uint64_t StructureHash(const Graph& g) {
  uint64_t h = HashStep(0x7374727563747572ULL, g.params.size());
  for (const Op& op : g.ops) {
    h = HashStep(h, (static_cast<uint64_t>(op.code) << 32) | op.operands.size());
    for (int o : op.operands) h = HashStep(h, static_cast<uint64_t>(o));
  }
  h = HashStep(h, g.results.size());
  for (int r : g.results) h = HashStep(h, static_cast<uint64_t>(r));
  return HashFinish(h);
}

namespace {
const char* AttrField(const Attrs& a, const Attrs& b) {
  if (a.a != b.a) return "a";
  if (a.b != b.b) return "b";
  if (a.c != b.c) return "c";
  if (a.d != b.d) return "d";
  if (a.e != b.e) return "e";
  if (a.i != b.i) return "i";
  if (a.kind != b.kind) return "kind";
  return "f";
}
}  // namespace

CompileReason Difference(const Graph& before, const Graph& now, std::string* what) {
  if (before.params.size() == now.params.size()) {
    for (size_t p = 0; p < now.params.size(); ++p) {
      const TensorType &x = before.params[p], &y = now.params[p];
      if (x == y) continue;
      *what = "input " + std::to_string(p) + " is " + y.ToString() + ", was " + x.ToString();
      return x.dtype != y.dtype ? CompileReason::kInputDtype : CompileReason::kInputShape;
    }
  }
  size_t n = std::min(before.ops.size(), now.ops.size());
  for (size_t i = 0; i < n; ++i) {
    const Op &x = before.ops[i], &y = now.ops[i];
    std::string op = "op " + std::to_string(i) + " (" + OpName(y.code) + ")";
    if (x.type != y.type) {
      *what = op + " gives " + y.type.ToString() + ", was " + x.type.ToString();
      return CompileReason::kResultType;
    }
    if (!(x.attrs == y.attrs)) {
      *what = op + ": attribute " + AttrField(x.attrs, y.attrs) + " differs";
      if (x.attrs.f != y.attrs.f && AttrField(x.attrs, y.attrs)[0] == 'f')
        *what += " (" + std::to_string(y.attrs.f) + ", was " + std::to_string(x.attrs.f) + ")";
      return CompileReason::kAttribute;
    }
  }
  *what = "the same program with other compile options";
  return CompileReason::kOptions;
}

}  // namespace tpu
