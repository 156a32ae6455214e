#include "ir/graph.h"

#include <cstring>
#include <sstream>

#include "base/hash.h"

namespace tpu {
namespace {
struct OpInfo {
  const char* name;
  int arity;
  OpKind kind;
};
constexpr OpInfo kOpInfos[] = {
#define TPU_OP(e, name, arity, kind) {name, arity, OpKind::kind},
#include "ir/ops.def"
#undef TPU_OP
};

uint64_t HashDims(uint64_t h, const Dims& v) {
  h = HashStep(h, v.size());
  for (int64_t d : v) h = HashStep(h, static_cast<uint64_t>(d));
  return h;
}

uint64_t HashType(uint64_t h, const TensorType& t) {
  // A bounded type adds a flag to the dtype word and its mask after the dims (static types hash
  // as they always did).
  h = HashDims(HashStep(h, static_cast<uint64_t>(t.dtype) | (t.bounded ? uint64_t{1} << 32 : 0)), t.dims);
  return t.bounded ? HashStep(h, t.bounded) : h;
}
}  // namespace

const char* OpName(OpCode code) { return kOpInfos[static_cast<int>(code)].name; }
int OpArity(OpCode code) { return kOpInfos[static_cast<int>(code)].arity; }
OpKind GetOpKind(OpCode code) { return kOpInfos[static_cast<int>(code)].kind; }

const char* CheckMessage(CheckKind kind) {
  switch (kind) {
    case CheckKind::kIntegerDivisionByZero: return "ZeroDivisionError";
    case CheckKind::kBceInputRange: return "all elements of input should be between 0 and 1";
    case CheckKind::kBceTargetRange: return "all elements of target should be between 0 and 1";
    case CheckKind::kProbabilityRange:
      return "Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could this error message be improved?  If "
             "so, please report an enhancement request to PyTorch.)";
    case CheckKind::kAssert: return "Assertion is failed";  // each op carries its own (CheckOpMessage)
    case CheckKind::kCount: break;
  }
  return "check failed";
}

std::string CheckOpMessage(const Op& op) {
  const auto kind = static_cast<CheckKind>(op.attrs.kind);
  if (kind != CheckKind::kAssert) return CheckMessage(kind);
  std::string m;
  for (int64_t c : op.attrs.a) m.push_back(static_cast<char>(c));
  return m;
}

const char* CheckName(CheckKind kind) {
  switch (kind) {
    case CheckKind::kIntegerDivisionByZero: return "integer_division_by_zero";
    case CheckKind::kBceInputRange: return "bce_input_range";
    case CheckKind::kBceTargetRange: return "bce_target_range";
    case CheckKind::kProbabilityRange: return "probability_range";
    case CheckKind::kAssert: return "assert";
    case CheckKind::kCount: break;
  }
  return "unknown";
}

const char* CompareDirectionName(CompareDirection d) {
  switch (d) {
    case CompareDirection::kEQ: return "EQ";
    case CompareDirection::kNE: return "NE";
    case CompareDirection::kLT: return "LT";
    case CompareDirection::kLE: return "LE";
    case CompareDirection::kGT: return "GT";
    case CompareDirection::kGE: return "GE";
  }
  return "?";
}

std::string DimsToString(const Dims& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

std::string TensorType::ToString() const {
  std::string s = "tensor<";
  for (int d = 0; d < rank(); ++d) s += (IsBounded(d) ? std::string("?") : std::to_string(dims[d])) + "x";
  s += DTypeName(dtype);
  if (bounded) {
    s += ", #stablehlo.bounds<";
    for (int d = 0; d < rank(); ++d) s += (d ? ", " : "") + (IsBounded(d) ? std::to_string(dims[d]) : std::string("?"));
    s += ">";
  }
  return s + ">";
}

uint64_t Fingerprint(const Graph& g) {
  // On the eager path for every op: one multiply per word, one finalizer at the end.
  uint64_t h = HashStep(0x7470755f69720001ULL, g.params.size());
  for (const auto& p : g.params) h = HashType(h, p);
  for (const auto& op : g.ops) {
    h = HashStep(h, (static_cast<uint64_t>(op.code) << 32) | op.operands.size());
    for (int o : op.operands) h = HashStep(h, static_cast<uint64_t>(o));
    h = HashType(h, op.type);
    const Attrs& a = op.attrs;
    h = HashDims(HashDims(HashDims(HashDims(HashDims(h, a.a), a.b), a.c), a.d), a.e);
    uint64_t f;
    std::memcpy(&f, &a.f, sizeof(f));
    h = HashStep(HashStep(HashStep(h, static_cast<uint64_t>(a.i)), static_cast<uint64_t>(a.kind)), f);
  }
  h = HashStep(h, g.results.size());
  for (int r : g.results) h = HashStep(h, static_cast<uint64_t>(r));
  return HashFinish(h);
}

bool StructurallyEqual(const Graph& a, const Graph& b) {
  if (a.params != b.params || a.results != b.results || a.ops.size() != b.ops.size()) return false;
  for (size_t i = 0; i < a.ops.size(); ++i) {
    const Op& x = a.ops[i];
    const Op& y = b.ops[i];
    if (x.code != y.code || x.operands != y.operands || x.type != y.type || !(x.attrs == y.attrs))
      return false;
  }
  return true;
}

}  // namespace tpu
