#include "ir/printer.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "ir/window.h"

namespace tpu {
namespace {

std::string I64Array(const Dims& v) {
  std::string s = "array<i64";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : ": ") + std::to_string(v[i]);
  return s + ">";
}

std::string List(const Dims& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// Gather's / scatter's batching dims (attrs.e: the operand's list, then the indices'), printed
// only when there are any, so programs without them print as StableHLO before batching dims.
std::string BatchingDims(const Dims& e, const char* operand_name, const char* index_name) {
  if (e.empty()) return "";
  size_t half = e.size() / 2;
  return std::string(", ") + operand_name + " = " + List(Dims(e.begin(), e.begin() + half)) + ", " +
         index_name + " = " + List(Dims(e.begin() + half, e.end()));
}

// A rank-0 literal of `dtype` holding `value`, as MLIR's dense attribute syntax wants it.
std::string Literal(double value, DType dtype) {
  if (dtype == DType::kBool) return value != 0 ? "true" : "false";
  if (!IsFloat(dtype)) return std::to_string(static_cast<int64_t>(value));
  if (std::isfinite(value)) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.17e", value);
    return buf;
  }
  // Non-finite floats are written as their bit pattern.
  bool neg = std::signbit(value);
  bool nan = std::isnan(value);
  char buf[32];
  switch (dtype) {
    case DType::kF64:
      std::snprintf(buf, sizeof(buf), "0x%s", nan ? "7FF8000000000000" : (neg ? "FFF0000000000000" : "7FF0000000000000"));
      break;
    case DType::kF32:
      std::snprintf(buf, sizeof(buf), "0x%s", nan ? "7FC00000" : (neg ? "FF800000" : "7F800000"));
      break;
    case DType::kBF16:
      std::snprintf(buf, sizeof(buf), "0x%s", nan ? "7FC0" : (neg ? "FF80" : "7F80"));
      break;
    default:  // f16
      std::snprintf(buf, sizeof(buf), "0x%s", nan ? "7E00" : (neg ? "FC00" : "7C00"));
      break;
  }
  return buf;
}

// The identity of an arg-max (lowest value) or arg-min (highest value) reduction for `dtype`.
std::string ArgInitLiteral(DType dtype, bool is_max) {
  if (IsFloat(dtype)) return Literal(is_max ? -INFINITY : INFINITY, dtype);
  if (dtype == DType::kBool) return is_max ? "false" : "true";
  int bits = DTypeSize(dtype) * 8;
  if (!IsSignedInt(dtype)) {
    if (is_max) return "0";
    return bits == 64 ? "18446744073709551615" : std::to_string((uint64_t{1} << bits) - 1);
  }
  if (bits == 64) return is_max ? "-9223372036854775808" : "9223372036854775807";
  int64_t hi = (int64_t{1} << (bits - 1)) - 1;
  return std::to_string(is_max ? -hi - 1 : hi);
}

// dense<[[lo, hi], ...]> : tensor<Nx2xi64>
std::string Padding(const Dims& lo, const Dims& hi) {
  std::string s = "dense<[";
  for (size_t i = 0; i < lo.size(); ++i)
    s += (i ? ", [" : "[") + std::to_string(lo[i]) + ", " + std::to_string(hi[i]) + "]";
  return s + "]> : tensor<" + std::to_string(lo.size()) + "x2xi64>";
}

// One operand of #stablehlo.conv<...>: per dimension its role (b/f, i/o) or spatial number.
std::string ConvLayout(int64_t first, const char* first_name, int64_t second,
                       const char* second_name, const Dims& spatial) {
  std::vector<std::string> role(spatial.size() + 2);
  role[first] = first_name;
  role[second] = second_name;
  for (size_t i = 0; i < spatial.size(); ++i) role[spatial[i]] = std::to_string(i);
  std::string s = "[";
  for (size_t i = 0; i < role.size(); ++i) s += (i ? ", " : "") + role[i];
  return s + "]";
}

std::string WindowAttrs(const Attrs& a) {
  WindowSpec w = WindowSpec::FromAttrs(a);
  return "{base_dilations = " + I64Array(w.base_dilations) +
         ", padding = " + Padding(w.padding_low, w.padding_high) +
         ", window_dilations = " + I64Array(w.window_dilations) +
         ", window_dimensions = " + I64Array(w.dimensions) +
         ", window_strides = " + I64Array(w.strides) + "}";
}

const char* ReducerOp(ReduceKind k) {
  switch (k) {
    case ReduceKind::kAdd: return "stablehlo.add";
    case ReduceKind::kMul: return "stablehlo.multiply";
    case ReduceKind::kMax: return "stablehlo.maximum";
    case ReduceKind::kMin: return "stablehlo.minimum";
    case ReduceKind::kAnd: return "stablehlo.and";
    case ReduceKind::kOr: return "stablehlo.or";
    case ReduceKind::kReplace: return nullptr;
  }
  return nullptr;
}

// MLIR's hex form of a dense attribute's elements.
std::string HexBytes(const std::string& bytes) {
  static const char kDigits[] = "0123456789ABCDEF";
  std::string s = "\"0x";
  s.reserve(bytes.size() * 2 + 4);
  for (unsigned char c : bytes) {
    s += kDigits[c >> 4];
    s += kDigits[c & 15];
  }
  return s + "\"";
}

class Printer {
 public:
  explicit Printer(const Graph& g) : g_(g), names_(g.num_values()) {}

  std::string Print(const std::string& fn, const std::vector<ConstantParam>& constants = {}) {
    std::vector<const ConstantParam*> constant_of(g_.num_params(), nullptr);
    for (const ConstantParam& c : constants) constant_of.at(c.param) = &c;
    int args = 0;
    for (int i = 0; i < g_.num_params(); ++i)
      names_[i] = constant_of[i] ? "%cst" + std::to_string(i) : "%arg" + std::to_string(args++);
    os_ << "module @tpu_program {\n  func.func public @" << fn << "(";
    for (int i = 0, n = 0; i < g_.num_params(); ++i)
      if (!constant_of[i]) os_ << (n++ ? ", " : "") << names_[i] << ": " << g_.params[i].ToString();
    os_ << ") -> (";
    for (size_t i = 0; i < g_.results.size(); ++i)
      os_ << (i ? ", " : "") << g_.TypeOf(g_.results[i]).ToString();
    os_ << ") {\n";
    for (int i = 0; i < g_.num_params(); ++i)
      if (constant_of[i]) PrintConstantParam(i, constant_of[i]->bytes);
    for (size_t i = 0; i < g_.ops.size(); ++i) PrintOp(static_cast<int>(i));
    os_ << "    return";
    for (size_t i = 0; i < g_.results.size(); ++i) os_ << (i ? ", " : " ") << names_[g_.results[i]];
    if (!g_.results.empty()) os_ << " :";
    for (size_t i = 0; i < g_.results.size(); ++i)
      os_ << (i ? ", " : " ") << g_.TypeOf(g_.results[i]).ToString();
    os_ << "\n  }\n}\n";
    return os_.str();
  }

 private:
  std::string T(int v) const { return g_.TypeOf(v).ToString(); }

  void PrintConstantParam(int p, const std::string& bytes) {
    const TensorType& t = g_.params[p];
    if (t.dtype != DType::kBool) {
      os_ << "    " << names_[p] << " = stablehlo.constant dense<" << HexBytes(bytes) << "> : " << t.ToString() << "\n";
      return;
    }
    // i1 elements have no byte-per-element hex form in every MLIR version: bytes, then a convert.
    TensorType u8{DType::kU8, t.dims};
    os_ << "    " << names_[p] << "_u8 = stablehlo.constant dense<" << HexBytes(bytes) << "> : " << u8.ToString()
        << "\n    " << names_[p] << " = stablehlo.convert " << names_[p] << "_u8 : (" << u8.ToString() << ") -> "
        << t.ToString() << "\n";
  }

  std::string Operands(const Op& op) const {
    std::string s;
    for (size_t i = 0; i < op.operands.size(); ++i) s += (i ? ", " : "") + names_[op.operands[i]];
    return s;
  }

  std::string Signature(const Op& op) const {
    std::string s = "(";
    for (size_t i = 0; i < op.operands.size(); ++i) s += (i ? ", " : "") + T(op.operands[i]);
    return s + ") -> " + op.type.ToString();
  }

  // A region whose body applies `reducer` to two scalars of `dtype` (count pairs for variadic).
  std::string ReducerRegion(ReduceKind kind, DType dtype) const {
    std::string st = TensorType{dtype, {}}.ToString();
    std::ostringstream r;
    r << "({\n    ^bb0(%lhs: " << st << ", %rhs: " << st << "):\n";
    if (kind == ReduceKind::kReplace) {
      r << "      \"stablehlo.return\"(%rhs) : (" << st << ") -> ()\n";
    } else {
      r << "      %r = \"" << ReducerOp(kind) << "\"(%lhs, %rhs) : (" << st << ", " << st << ") -> "
        << st << "\n      \"stablehlo.return\"(%r) : (" << st << ") -> ()\n";
    }
    r << "    })";
    return r.str();
  }

  // One line of a comparator/reducer region body: %out = compare(%x, %y) on scalars of type `t`.
  void RegionCompare(const char* out, const char* x, const char* y, const char* dir, const std::string& t) {
    os_ << "      %" << out << " = \"stablehlo.compare\"(%" << x << ", %" << y
        << ") {comparison_direction = #stablehlo<comparison_direction " << dir << ">} : (" << t << ", " << t
        << ") -> tensor<i1>\n";
  }
  // %out = opname(%x, %y) on i1 scalars (and, or, not-equal...).
  void RegionLogic(const char* out, const char* opname, const char* x, const char* y) {
    os_ << "      %" << out << " = \"stablehlo." << opname << "\"(%" << x << ", %" << y
        << ") : (tensor<i1>, tensor<i1>) -> tensor<i1>\n";
  }

  void PrintOp(int i) {
    const Op& op = g_.ops[i];
    int v = g_.num_params() + i;
    std::string name = "%" + std::to_string(i);
    names_[v] = name;
    const Attrs& a = op.attrs;
    os_ << "    ";
    switch (op.code) {
      case OpCode::kParameterPlaceholder:
        os_ << "// placeholder\n";
        return;
      case OpCode::kConstant:
        os_ << name << " = stablehlo.constant dense<" << Literal(a.f, op.type.dtype) << "> : "
            << op.type.ToString() << "\n";
        return;
      case OpCode::kArgReduce: {
        // Variadic reduce over (values, iota) keeping the first max/min index; for floats a NaN
        // wins (the first NaN), as in PyTorch and the host executor. The helper values are named
        // %iotaN etc.: an MLIR value name that starts with a digit must be all digits.
        const TensorType& in = g_.TypeOf(op.operands[0]);
        std::string it = TensorType{DType::kI64, in.dims}.ToString();
        std::string vt = TensorType{in.dtype, {}}.ToString();
        std::string st = TensorType{DType::kI64, {}}.ToString();
        std::string id = std::to_string(i);
        bool is_max = static_cast<ReduceKind>(a.kind) == ReduceKind::kMax;
        bool is_float = IsFloat(in.dtype);
        os_ << "%iota" << id << " = \"stablehlo.iota\"() {iota_dimension = " << a.a[0]
            << " : i64} : () -> " << it << "\n    %vinit" << id << " = stablehlo.constant dense<"
            << ArgInitLiteral(in.dtype, is_max) << "> : " << vt << "\n    %iinit" << id
            << " = stablehlo.constant dense<0> : " << st << "\n    " << name
            << ":2 = \"stablehlo.reduce\"(" << names_[op.operands[0]] << ", %iota" << id
            << ", %vinit" << id << ", %iinit" << id << ") ({\n    ^bb0(%av: " << vt
            << ", %ai: " << st << ", %bv: " << vt << ", %bi: " << st << "):\n";
        RegionCompare(is_float ? "gt" : "better", "av", "bv", is_max ? "GT" : "LT", vt);
        RegionCompare(is_float ? "eqv" : "eq", "av", "bv", "EQ", vt);
        if (is_float) {
          RegionCompare("anan", "av", "av", "NE", vt);
          RegionCompare("bnan", "bv", "bv", "NE", vt);
          os_ << "      %bnum = \"stablehlo.not\"(%bnan) : (tensor<i1>) -> tensor<i1>\n";
          RegionLogic("nanwin", "and", "anan", "bnum");
          RegionLogic("better", "or", "gt", "nanwin");
          RegionLogic("bothnan", "and", "anan", "bnan");
          RegionLogic("eq", "or", "eqv", "bothnan");
        }
        RegionCompare("lti", "ai", "bi", "LT", st);
        RegionLogic("tie", "and", "eq", "lti");
        RegionLogic("pick", "or", "better", "tie");
        os_ << "      %v = \"stablehlo.select\"(%pick, %av, %bv) : (tensor<i1>, " << vt << ", " << vt
            << ") -> " << vt << "\n"
            << "      %ix = \"stablehlo.select\"(%pick, %ai, %bi) : (tensor<i1>, " << st << ", " << st
            << ") -> " << st << "\n"
            << "      \"stablehlo.return\"(%v, %ix) : (" << vt << ", " << st << ") -> ()\n"
            << "    }) {dimensions = " << I64Array(a.a) << "} : (" << in.ToString() << ", " << it
            << ", " << vt << ", " << st << ") -> ("
            << TensorType{in.dtype, op.type.dims}.ToString() << ", " << op.type.ToString() << ")\n";
        names_[v] = name + "#1";
        return;
      }
      case OpCode::kArgReduceWindow: {
        // Variadic reduce_window over (values, indices); the reducer orders candidates by value
        // (NaN highest), ties by the smaller index, NaNs among themselves by the larger index.
        const TensorType& in = g_.TypeOf(op.operands[0]);
        std::string vt = TensorType{in.dtype, {}}.ToString();
        std::string st = TensorType{DType::kI64, {}}.ToString();
        std::string id = std::to_string(i);
        os_ << "%vinit" << id << " = stablehlo.constant dense<" << ArgInitLiteral(in.dtype, true)
            << "> : " << vt << "\n    %iinit" << id
            << " = stablehlo.constant dense<9223372036854775807> : " << st << "\n    " << name
            << ":2 = \"stablehlo.reduce_window\"(" << Operands(op) << ", %vinit" << id << ", %iinit"
            << id << ") ({\n    ^bb0(%av: " << vt << ", %ai: " << st << ", %bv: " << vt
            << ", %bi: " << st << "):\n";
        RegionCompare("gt", "av", "bv", "GT", vt);
        RegionCompare("eqv", "av", "bv", "EQ", vt);
        RegionCompare("anan", "av", "av", "NE", vt);
        RegionCompare("bnan", "bv", "bv", "NE", vt);
        RegionCompare("lti", "ai", "bi", "LT", st);
        RegionCompare("gti", "ai", "bi", "GT", st);
        os_ << "      %bnum = \"stablehlo.not\"(%bnan) : (tensor<i1>) -> tensor<i1>\n";
        RegionLogic("nanwin", "and", "anan", "bnum");
        RegionLogic("bothnan", "and", "anan", "bnan");
        RegionLogic("nantie", "and", "bothnan", "gti");
        RegionLogic("numtie", "and", "eqv", "lti");
        RegionLogic("p1", "or", "gt", "nanwin");
        RegionLogic("p2", "or", "nantie", "numtie");
        RegionLogic("pick", "or", "p1", "p2");
        os_ << "      %v = \"stablehlo.select\"(%pick, %av, %bv) : (tensor<i1>, " << vt << ", "
            << vt << ") -> " << vt << "\n"
            << "      %ix = \"stablehlo.select\"(%pick, %ai, %bi) : (tensor<i1>, " << st << ", "
            << st << ") -> " << st << "\n"
            << "      \"stablehlo.return\"(%v, %ix) : (" << vt << ", " << st << ") -> ()\n"
            << "    }) " << WindowAttrs(a) << " : (" << in.ToString() << ", " << T(op.operands[1])
            << ", " << vt << ", " << st << ") -> (" << TensorType{in.dtype, op.type.dims}.ToString()
            << ", " << op.type.ToString() << ")\n";
        names_[v] = name + "#1";
        return;
      }
      case OpCode::kSort: {
        // A stable variadic sort of (x, iota); the comparator is "a before b": a < b, or b is
        // NaN and a is not (descending: a > b, or a is NaN and b is not). NaN sorts greatest.
        const TensorType& in = g_.TypeOf(op.operands[0]);
        std::string it = TensorType{DType::kI64, in.dims}.ToString();
        std::string vt = TensorType{in.dtype, {}}.ToString();
        std::string st = TensorType{DType::kI64, {}}.ToString();
        std::string id = std::to_string(i);
        bool desc = a.kind != 0;
        os_ << "%iota" << id << " = \"stablehlo.iota\"() {iota_dimension = " << a.i
            << " : i64} : () -> " << it << "\n    " << name << ":2 = \"stablehlo.sort\"("
            << names_[op.operands[0]] << ", %iota" << id << ") ({\n    ^bb0(%a: " << vt
            << ", %b: " << vt << ", %ai: " << st << ", %bi: " << st << "):\n";
        RegionCompare(IsFloat(in.dtype) ? "ord" : "before", "a", "b", desc ? "GT" : "LT", vt);
        if (IsFloat(in.dtype)) {
          RegionCompare("anan", "a", "a", "NE", vt);
          RegionCompare("bnan", "b", "b", "NE", vt);
          // ascending: b is NaN and a is not; descending: a is NaN and b is not
          os_ << "      %num = \"stablehlo.not\"(%" << (desc ? "bnan" : "anan")
              << ") : (tensor<i1>) -> tensor<i1>\n";
          RegionLogic("nan", "and", "num", desc ? "anan" : "bnan");
          RegionLogic("before", "or", "ord", "nan");
        }
        os_ << "      \"stablehlo.return\"(%before) : (tensor<i1>) -> ()\n"
            << "    }) {dimension = " << a.i << " : i64, is_stable = true} : (" << in.ToString()
            << ", " << it << ") -> (" << in.ToString() << ", " << it << ")\n";
        names_[v] = name + "#1";
        return;
      }
      case OpCode::kRngBitGenerator:
        os_ << name << ":2 = \"stablehlo.rng_bit_generator\"(" << Operands(op)
            << ") {rng_algorithm = #stablehlo<rng_algorithm PHILOX>} : (" << T(op.operands[0])
            << ") -> (" << T(op.operands[0]) << ", " << op.type.ToString() << ")\n";
        names_[v] = name + "#1";
        return;
      default:
        break;
    }
    os_ << name << " = \"" << OpName(op.code) << "\"(" << Operands(op) << ")";
    switch (op.code) {
      case OpCode::kReduce:
        os_ << " " << ReducerRegion(static_cast<ReduceKind>(a.kind), op.type.dtype)
            << " {dimensions = " << I64Array(a.a) << "}";
        break;
      case OpCode::kScatter:
        os_ << " " << ReducerRegion(static_cast<ReduceKind>(a.kind & 0xff), op.type.dtype)
            << " {indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<"
            << "update_window_dims = " << List(a.a) << ", inserted_window_dims = " << List(a.b)
            << BatchingDims(a.e, "input_batching_dims", "scatter_indices_batching_dims")
            << ", scatter_dims_to_operand_dims = " << List(a.c) << ", index_vector_dim = " << a.i
            << ">, unique_indices = false}";
        break;
      case OpCode::kReduceWindow:
        os_ << " " << ReducerRegion(static_cast<ReduceKind>(a.kind), op.type.dtype) << " "
            << WindowAttrs(a);
        break;
      case OpCode::kConvolution: {
        ConvolutionSpec c = ConvolutionSpec::FromAttrs(a);
        const ConvDimensionNumbers& dn = c.dn;
        os_ << " {batch_group_count = " << c.batch_group_count << " : i64"
            << ", dimension_numbers = #stablehlo.conv<"
            << ConvLayout(dn.input_batch, "b", dn.input_feature, "f", dn.input_spatial) << "x"
            << ConvLayout(dn.kernel_input_feature, "i", dn.kernel_output_feature, "o",
                          dn.kernel_spatial)
            << "->" << ConvLayout(dn.output_batch, "b", dn.output_feature, "f", dn.output_spatial)
            << ">, feature_group_count = " << c.feature_group_count << " : i64"
            << ", lhs_dilation = " << I64Array(c.lhs_dilation)
            << ", padding = " << Padding(c.padding_low, c.padding_high)
            << ", rhs_dilation = " << I64Array(c.rhs_dilation)
            << ", window_strides = " << I64Array(c.window_strides) << "}";
        break;
      }
      case OpCode::kReverse:
        os_ << " {dimensions = " << I64Array(a.a) << "}";
        break;
      case OpCode::kCheck: {  // Note [Check op]: an implementation-defined call each backend provides
        os_ << " {api_version = 1 : i32, backend_config = \"" << CheckName(static_cast<CheckKind>(a.kind));
        if (static_cast<CheckKind>(a.kind) == CheckKind::kAssert) {
          // The message, as an MLIR string body: printable ASCII but quote and backslash, else \XX.
          os_ << ": ";
          for (int64_t c : a.a) {
            const auto u = static_cast<unsigned char>(c);
            if (u >= 0x20 && u < 0x7f && u != '"' && u != '\\') {
              os_ << static_cast<char>(u);
            } else {
              static const char* kHex = "0123456789ABCDEF";
              os_ << '\\' << kHex[u >> 4] << kHex[u & 15];
            }
          }
        }
        os_ << "\", call_target_name = \"tpu.check\", has_side_effect = true}";
        break;
      }
      case OpCode::kBroadcastInDim:
        os_ << " {broadcast_dimensions = " << I64Array(a.a) << "}";
        break;
      case OpCode::kTranspose:
        os_ << " {permutation = " << I64Array(a.a) << "}";
        break;
      case OpCode::kSlice:
        os_ << " {limit_indices = " << I64Array(a.b) << ", start_indices = " << I64Array(a.a)
            << ", strides = " << I64Array(a.c) << "}";
        break;
      case OpCode::kDynamicSlice:
        os_ << " {slice_sizes = " << I64Array(a.a) << "}";
        break;
      case OpCode::kPad:
        os_ << " {edge_padding_high = " << I64Array(a.b) << ", edge_padding_low = " << I64Array(a.a)
            << ", interior_padding = " << I64Array(a.c) << "}";
        break;
      case OpCode::kConcatenate:
        os_ << " {dimension = " << a.i << " : i64}";
        break;
      case OpCode::kIota:
        os_ << " {iota_dimension = " << a.i << " : i64}";
        break;
      case OpCode::kGetDimensionSize:
      case OpCode::kSetDimensionSize:
        os_ << " {dimension = " << a.i << " : i64}";
        break;
      case OpCode::kCompare:
        os_ << " {comparison_direction = #stablehlo<comparison_direction "
            << CompareDirectionName(static_cast<CompareDirection>(a.kind)) << ">}";
        break;
      case OpCode::kDotGeneral:
        os_ << " {dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = " << List(a.a)
            << ", rhs_batching_dimensions = " << List(a.b)
            << ", lhs_contracting_dimensions = " << List(a.c)
            << ", rhs_contracting_dimensions = " << List(a.d) << ">}";
        break;
      case OpCode::kGather:
        os_ << " {dimension_numbers = #stablehlo.gather<offset_dims = " << List(a.a)
            << ", collapsed_slice_dims = " << List(a.b)
            << BatchingDims(a.e, "operand_batching_dims", "start_indices_batching_dims")
            << ", start_index_map = " << List(a.c)
            << ", index_vector_dim = " << a.i << ">, indices_are_sorted = false, slice_sizes = "
            << I64Array(a.d) << "}";
        break;
      default:
        break;
    }
    os_ << " : " << Signature(op) << "\n";
  }

  const Graph& g_;
  std::vector<std::string> names_;
  std::ostringstream os_;
};

}  // namespace

std::string PrintStableHlo(const Graph& g, const std::string& name) { return Printer(g).Print(name); }

StatusOr<std::string> PrintStableHlo(const Graph& g, const std::string& name,
                                     const std::vector<ConstantParam>& constants) {
  std::vector<bool> seen(g.num_params(), false);
  for (const ConstantParam& c : constants) {
    if (c.param < 0 || c.param >= g.num_params() || seen[c.param])
      return InvalidArgument("PrintStableHlo: constant parameter " + std::to_string(c.param) +
                             " is out of range or given twice (" + std::to_string(g.num_params()) + " parameters)");
    seen[c.param] = true;
    const TensorType& t = g.params[c.param];
    if (static_cast<int64_t>(c.bytes.size()) != t.ByteSize())
      return InvalidArgument("PrintStableHlo: constant parameter " + std::to_string(c.param) + " has " +
                             std::to_string(c.bytes.size()) + " bytes for " + t.ToString() + " (" +
                             std::to_string(t.ByteSize()) + " bytes)");
  }
  return Printer(g).Print(name, constants);
}

}  // namespace tpu
