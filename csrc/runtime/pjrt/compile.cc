#include "runtime/pjrt/compile.h"

#include <algorithm>
#include <utility>

#include "ir/printer.h"

namespace tpu::pjrt {
namespace {

// ---- protobuf wire format, for the few fields of xla.CompileOptionsProto we set -------------
// A field is a varint key (field_number << 3 | wire_type) and then a varint (wire type 0), or a
// varint length and that many bytes (wire type 2: a string or a nested message). A negative
// int64 is the varint of its two's complement (10 bytes).
void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void PutVarintField(std::string& out, int field, uint64_t v) {
  PutVarint(out, static_cast<uint64_t>(field) << 3 | 0);
  PutVarint(out, v);
}
void PutBytesField(std::string& out, int field, const std::string& bytes) {
  PutVarint(out, static_cast<uint64_t>(field) << 3 | 2);
  PutVarint(out, bytes.size());
  out += bytes;
}

// One entry of CompileOptionsProto.env_option_overrides (map<string, OptionOverrideProto>, field
// 7): a map entry is a message of key = 1 and value = 2; OptionOverrideProto.bool_field = 2.
std::string BoolOverride(const std::string& name, bool value) {
  std::string v, entry;
  PutVarintField(v, 2, value ? 1 : 0);
  PutBytesField(entry, 1, name);
  PutBytesField(entry, 2, v);
  return entry;
}

// ---- the program ---------------------------------------------------------------------------

int AppendOp(Graph& g, OpCode code, SmallVector<int, 4> operands, TensorType type, Attrs attrs = {}) {
  g.ops.push_back(Op{code, std::move(operands), std::move(type), std::move(attrs)});
  return g.num_params() + static_cast<int>(g.ops.size()) - 1;
}

// Note [Checked indices on PJRT]: appends, for each index component of each checked gather and
// scatter, min(0, indices) and max(0, indices) as i64, and for each check op whether it held,
// and returns their concatenation (-1 when nothing is checked).
int AppendIndexChecks(Graph& g, std::vector<IndexCheck>* checks) {
  std::vector<int> parts;
  size_t num_ops = g.ops.size();
  for (size_t i = 0; i < num_ops; ++i) {
    const Op op = g.ops[i];  // a copy: appending may move the ops
    if (op.code == OpCode::kCheck) {
      // check(x, ok) -> x, and min(1, convert(ok)) over every element: 1 when all held.
      int ok = op.operands[1];
      const TensorType ot = g.TypeOf(ok);  // a copy: appending may move the types
      Dims all;
      for (int d = 0; d < ot.rank(); ++d) all.push_back(d);
      Attrs ca;
      ca.f = 1;
      int one = AppendOp(g, OpCode::kConstant, {}, TensorType{DType::kI64, {}}, ca);
      int flags = AppendOp(g, OpCode::kConvert, {ok}, TensorType{DType::kI64, ot.dims});
      Attrs ra;
      ra.a = all;
      ra.kind = static_cast<int64_t>(ReduceKind::kMin);
      int held = AppendOp(g, OpCode::kReduce, {flags, one}, TensorType{DType::kI64, {}}, ra);
      parts.push_back(AppendOp(g, OpCode::kReshape, {held}, TensorType{DType::kI64, {1}}));
      Op& pass = g.ops[i];
      pass.code = OpCode::kReshape;
      pass.operands = {op.operands[0]};
      pass.attrs = Attrs{};
      IndexCheck c;
      c.op = static_cast<int>(i);
      c.check_kind = static_cast<int>(op.attrs.kind);
      c.message = CheckOpMessage(op);
      checks->push_back(c);
      continue;
    }
    bool gather = op.code == OpCode::kGather && op.attrs.kind != 0;
    bool scatter = op.code == OpCode::kScatter && (op.attrs.kind >> 8) != 0;
    if (!gather && !scatter) continue;
    int indices = op.operands[1];
    const TensorType it = g.TypeOf(indices);
    if (it.NumElements() == 0) continue;  // nothing to check
    const Dims operand = g.TypeOf(op.operands[0]).dims;  // a copy: appending may move the ops
    Dims all;
    for (int d = 0; d < it.rank(); ++d) all.push_back(d);
    int zero = AppendOp(g, OpCode::kConstant, {}, TensorType{DType::kI64, {}});
    const Dims& map = op.attrs.c;  // start_index_map / scatter_dims_to_operand_dims
    for (size_t k = 0; k < map.size(); ++k) {
      int64_t d = map[k];
      IndexCheck c;
      c.op = static_cast<int>(i);
      c.dim = d;
      c.size = operand[d];
      c.max_start = gather ? operand[d] - op.attrs.d[d] : operand[d] - 1;
      Dims start(it.rank(), 0), limit = it.dims, strides(it.rank(), 1);
      start.back() = static_cast<int64_t>(k);
      limit.back() = static_cast<int64_t>(k) + 1;
      Dims comp_dims = it.dims;
      comp_dims.back() = 1;
      Attrs sa;
      sa.a = start;
      sa.b = limit;
      sa.c = strides;
      int comp = AppendOp(g, OpCode::kSlice, {indices}, TensorType{it.dtype, comp_dims}, sa);
      if (it.dtype != DType::kI64) comp = AppendOp(g, OpCode::kConvert, {comp}, TensorType{DType::kI64, comp_dims});
      for (ReduceKind kind : {ReduceKind::kMin, ReduceKind::kMax}) {
        Attrs ra;
        ra.a = all;
        ra.kind = static_cast<int64_t>(kind);
        int r = AppendOp(g, OpCode::kReduce, {comp, zero}, TensorType{DType::kI64, {}}, ra);
        parts.push_back(AppendOp(g, OpCode::kReshape, {r}, TensorType{DType::kI64, {1}}));
      }
      checks->push_back(c);
    }
  }
  if (parts.empty()) return -1;
  if (parts.size() == 1) return parts[0];
  Attrs ca;
  ca.i = 0;
  SmallVector<int, 4> operands(parts.begin(), parts.end());
  return AppendOp(g, OpCode::kConcatenate, std::move(operands),
                  TensorType{DType::kI64, {static_cast<int64_t>(parts.size())}}, ca);
}

// Adds ` {tf.aliasing_output = R : i32}` after each aliased parameter's type in the function's
// signature: the attribute jax emits for donated arguments, which XLA turns into an
// input/output alias of the compiled program.
Status AddAliasAttributes(const Graph& g, const std::vector<int>& aliased, std::string* text) {
  size_t sig = text->find("func.func public @main(");
  if (sig == std::string::npos) return Internal("printed program has no main function");
  size_t pos = sig;
  for (int p = 0; p < g.num_params(); ++p) {
    std::string arg = "%arg" + std::to_string(p) + ": " + g.params[p].ToString();
    size_t at = text->find(arg, pos);
    if (at == std::string::npos) return Internal("printed program lacks parameter " + std::to_string(p));
    pos = at + arg.size();
    if (aliased[p] < 0) continue;
    std::string attr = " {tf.aliasing_output = " + std::to_string(aliased[p]) + " : i32}";
    text->insert(pos, attr);
    pos += attr.size();
  }
  return Status::Ok();
}

int64_t Work(const Graph& g) {
  int64_t w = 0;
  for (const Op& op : g.ops) w += op.type.NumElements();
  return w;
}

}  // namespace

PjrtProgram MakeProgram(const Graph& graph, const CompileOptions& options) {
  PjrtProgram p;
  Graph g = graph;
  p.num_results = static_cast<int>(g.results.size());
  int check = AppendIndexChecks(g, &p.checks);
  if (check >= 0) g.results.push_back(check);
  p.aliased.assign(g.num_params(), -1);
  // A program that may fail after it ran (Note [Checked indices on PJRT]) keeps its inputs: the
  // buffers it was to update must still hold their values when its error is reported.
  if (p.checks.empty()) {
    for (size_t i = 0; i < options.donated.size() && static_cast<int>(i) < g.num_params(); ++i) {
      int r = options.donated[i];
      if (r < 0 || r >= p.num_results) continue;
      // XLA aliases an input with an output of the same type only.
      if (g.params[i] != g.TypeOf(g.results[r])) continue;
      if (std::find(p.aliased.begin(), p.aliased.end(), r) != p.aliased.end()) continue;
      p.aliased[i] = r;
    }
  }
  p.text = PrintStableHlo(g, "main");
  if (std::any_of(p.aliased.begin(), p.aliased.end(), [](int r) { return r >= 0; })) {
    Status st = AddAliasAttributes(g, p.aliased, &p.text);
    if (!st.ok()) p.aliased.assign(g.num_params(), -1), p.text = PrintStableHlo(g, "main");
  }
  return p;
}

std::string CompileOptionsBytes(const std::string& platform_name) {
  // ExecutableBuildOptionsProto: device_ordinal = 1 (-1: not set), num_replicas = 4,
  // num_partitions = 5 (proto3 defaults them to 0, which XLA rejects).
  std::string build;
  PutVarintField(build, 1, static_cast<uint64_t>(int64_t{-1}));
  PutVarintField(build, 4, 1);
  PutVarintField(build, 5, 1);
  // CompileOptionsProto: executable_build_options = 3, compile_portable_executable = 4 (no
  // device assignment: each launch names its device, PJRT's execute_device), env_option_overrides = 7.
  std::string out;
  PutBytesField(out, 3, build);
  PutVarintField(out, 4, 1);
  // StableHLO's maximum/minimum propagate NaN (IEEE 754 maximum); XLA's CPU and GPU backends may
  // otherwise use min/max instructions that return the other operand.
  if (platform_name == "cpu") PutBytesField(out, 7, BoolOverride("xla_cpu_enable_fast_min_max", false));
  if (platform_name == "cuda" || platform_name == "rocm")
    PutBytesField(out, 7, BoolOverride("xla_gpu_enable_fast_min_max", false));
  return out;
}

PjrtExecutable::~PjrtExecutable() {
  if (!exe_) return;
  auto args = TPU_PJRT_ARGS(PJRT_LoadedExecutable_Destroy_Args);
  args.executable = exe_;
  (void)api_->ToStatus((*api_)->PJRT_LoadedExecutable_Destroy(&args), "PJRT_LoadedExecutable_Destroy");
}

namespace {

std::shared_ptr<PjrtExecutable> Wrap(const Client& client, PJRT_LoadedExecutable* loaded, const Graph& graph,
                                     const CompileOptions& options, PjrtProgram program) {
  auto exe = std::make_shared<PjrtExecutable>(&client.api(), loaded);
  exe->set_identity(Fingerprint(graph), options.name, Work(graph));
  exe->set_source(graph);
  program.text.clear();  // not needed after the compile; kept small in the cache
  exe->set_program(std::move(program));
  return exe;
}

std::string ProgramName(const CompileOptions& options) {
  return options.name && *options.name ? std::string("program '") + options.name + "'" : std::string("a program");
}

}  // namespace

namespace {

// PJRT_Client_Compile of StableHLO text; checks that the executable has `num_outputs` outputs
// (PJRT hands a program's results back one buffer each).
StatusOr<PJRT_LoadedExecutable*> CompileMlir(const Client& client, std::string& text, const std::string& what,
                                             int num_outputs) {
  const Api& api = client.api();
  auto prog = TPU_PJRT_ARGS(PJRT_Program);
  prog.code = text.data();
  prog.code_size = text.size();
  static const char kFormat[] = "mlir";
  prog.format = kFormat;
  prog.format_size = sizeof(kFormat) - 1;
  std::string opts = CompileOptionsBytes(client.platform_name());
  auto args = TPU_PJRT_ARGS(PJRT_Client_Compile_Args);
  args.client = client.get();
  args.program = &prog;
  args.compile_options = opts.data();
  args.compile_options_size = opts.size();
  TPU_RETURN_IF_ERROR(api.ToStatus(api->PJRT_Client_Compile(&args),
                                   "XLA (" + client.platform_name() + ") could not compile " + what));
  if (TPU_PJRT_HAS(api, PJRT_Executable_NumOutputs) && TPU_PJRT_HAS(api, PJRT_LoadedExecutable_GetExecutable)) {
    auto get = TPU_PJRT_ARGS(PJRT_LoadedExecutable_GetExecutable_Args);
    get.loaded_executable = args.executable;
    Status st = api.ToStatus(api->PJRT_LoadedExecutable_GetExecutable(&get), "PJRT_LoadedExecutable_GetExecutable");
    if (st.ok()) {
      auto n = TPU_PJRT_ARGS(PJRT_Executable_NumOutputs_Args);
      n.executable = get.executable;
      st = api.ToStatus(api->PJRT_Executable_NumOutputs(&n), "PJRT_Executable_NumOutputs");
      if (st.ok() && static_cast<int>(n.num_outputs) != num_outputs)
        st = Internal("XLA compiled " + what + " to " + std::to_string(n.num_outputs) + " outputs, expected " +
                      std::to_string(num_outputs));
      auto destroy = TPU_PJRT_ARGS(PJRT_Executable_Destroy_Args);
      destroy.executable = get.executable;
      (void)api.ToStatus(api->PJRT_Executable_Destroy(&destroy), "PJRT_Executable_Destroy");
    }
    if (!st.ok()) {
      PjrtExecutable discard(&api, args.executable);
      return st;
    }
  }
  return args.executable;
}

}  // namespace

StatusOr<std::shared_ptr<const PjrtExecutable>> CompileForPjrt(const Client& client, const Graph& graph,
                                                               const CompileOptions& options) {
  PjrtProgram program = MakeProgram(graph, options);
  int outputs = program.num_results + (program.checks.empty() ? 0 : 1);
  TPU_ASSIGN_OR_RETURN(PJRT_LoadedExecutable * loaded,
                       CompileMlir(client, program.text, ProgramName(options), outputs));
  return std::shared_ptr<const PjrtExecutable>(Wrap(client, loaded, graph, options, std::move(program)));
}

StatusOr<std::shared_ptr<const PjrtExecutable>> CompileText(const Client& client, const std::string& text,
                                                            const std::string& name, int num_outputs) {
  std::string code = text;
  TPU_ASSIGN_OR_RETURN(PJRT_LoadedExecutable * loaded,
                       CompileMlir(client, code, "program '" + name + "'", num_outputs));
  auto exe = std::make_shared<PjrtExecutable>(&client.api(), loaded);
  PjrtProgram p;
  p.num_results = num_outputs;
  exe->set_program(std::move(p));
  exe->set_identity(0, name, 0);
  return std::shared_ptr<const PjrtExecutable>(std::move(exe));
}

namespace {
std::string TensorText(PJRT_Buffer_Type type, const Dims& dims, int64_t extra = -1) {
  std::string s = "tensor<";
  for (int64_t d : dims) s += std::to_string(d) + "x";
  if (extra >= 0) s += std::to_string(extra) + "x";
  StatusOr<DType> dt = FromPjrtType(type);
  return s + (dt.ok() ? DTypeName(dt.value()) : "ui8") + ">";
}
}  // namespace

std::string ReinterpretProgram(const ArrayType& from, const ArrayType& to) {
  int64_t n = 1;
  for (int64_t d : from.dims) n *= d;
  StatusOr<DType> fdt = FromPjrtType(from.type), tdt = FromPjrtType(to.type);
  int fsize = fdt.ok() ? DTypeSize(fdt.value()) : 1, tsize = tdt.ok() ? DTypeSize(tdt.value()) : 1;
  int64_t bytes = n * fsize;
  std::string u8 = TensorText(PJRT_Buffer_Type_U8, {bytes});
  std::string body;
  // %bytes: ui8[bytes]
  if (from.type == PJRT_Buffer_Type_U8) {
    body += "    %bytes = \"stablehlo.reshape\"(%arg0) : (" + TensorText(from.type, from.dims) + ") -> " + u8 + "\n";
  } else if (from.type == PJRT_Buffer_Type_PRED) {
    std::string c = TensorText(PJRT_Buffer_Type_U8, from.dims);
    body += "    %c = \"stablehlo.convert\"(%arg0) : (" + TensorText(from.type, from.dims) + ") -> " + c + "\n";
    body += "    %bytes = \"stablehlo.reshape\"(%c) : (" + c + ") -> " + u8 + "\n";
  } else {
    std::string c = TensorText(PJRT_Buffer_Type_U8, from.dims, fsize);
    body += "    %c = \"stablehlo.bitcast_convert\"(%arg0) : (" + TensorText(from.type, from.dims) + ") -> " + c + "\n";
    body += "    %bytes = \"stablehlo.reshape\"(%c) : (" + c + ") -> " + u8 + "\n";
  }
  std::string out = TensorText(to.type, to.dims);
  if (to.type == PJRT_Buffer_Type_U8) {
    body += "    %r = \"stablehlo.reshape\"(%bytes) : (" + u8 + ") -> " + out + "\n";
  } else if (to.type == PJRT_Buffer_Type_PRED) {
    std::string s = TensorText(PJRT_Buffer_Type_U8, to.dims);
    body += "    %s = \"stablehlo.reshape\"(%bytes) : (" + u8 + ") -> " + s + "\n";
    body += "    %z = stablehlo.constant dense<0> : " + s + "\n";
    body += "    %r = \"stablehlo.compare\"(%s, %z) {comparison_direction = #stablehlo<comparison_direction NE>} : (" +
            s + ", " + s + ") -> " + out + "\n";
  } else {
    int64_t m = bytes / tsize;
    std::string s = TensorText(PJRT_Buffer_Type_U8, {m, tsize});
    std::string flat = TensorText(to.type, {m});
    body += "    %s = \"stablehlo.reshape\"(%bytes) : (" + u8 + ") -> " + s + "\n";
    body += "    %f = \"stablehlo.bitcast_convert\"(%s) : (" + s + ") -> " + flat + "\n";
    body += "    %r = \"stablehlo.reshape\"(%f) : (" + flat + ") -> " + out + "\n";
  }
  return "module @tpu_reinterpret {\n  func.func public @main(%arg0: " + TensorText(from.type, from.dims) + ") -> " +
         out + " {\n" + body + "    return %r : " + out + "\n  }\n}\n";
}

StatusOr<std::string> SerializeExecutable(const Client& client, const PjrtExecutable& exe) {
  const Api& api = client.api();
  if (!TPU_PJRT_HAS(api, PJRT_Executable_Serialize) || !TPU_PJRT_HAS(api, PJRT_LoadedExecutable_GetExecutable))
    return Unimplemented("the PJRT plugin cannot serialize executables");
  auto get = TPU_PJRT_ARGS(PJRT_LoadedExecutable_GetExecutable_Args);
  get.loaded_executable = exe.loaded();
  TPU_RETURN_IF_ERROR(
      api.ToStatus(api->PJRT_LoadedExecutable_GetExecutable(&get), "PJRT_LoadedExecutable_GetExecutable"));
  auto ser = TPU_PJRT_ARGS(PJRT_Executable_Serialize_Args);
  ser.executable = get.executable;
  Status st = api.ToStatus(api->PJRT_Executable_Serialize(&ser), "PJRT_Executable_Serialize");
  std::string bytes;
  if (st.ok()) {
    bytes.assign(ser.serialized_bytes, ser.serialized_bytes_size);
    if (ser.serialized_executable_deleter) ser.serialized_executable_deleter(ser.serialized_executable);
  }
  auto destroy = TPU_PJRT_ARGS(PJRT_Executable_Destroy_Args);
  destroy.executable = get.executable;
  (void)api.ToStatus(api->PJRT_Executable_Destroy(&destroy), "PJRT_Executable_Destroy");
  if (!st.ok()) return st;
  return bytes;
}

StatusOr<std::shared_ptr<const PjrtExecutable>> DeserializeExecutable(const Client& client, const std::string& bytes,
                                                                      const Graph& graph,
                                                                      const CompileOptions& options) {
  const Api& api = client.api();
  if (!TPU_PJRT_HAS(api, PJRT_Executable_DeserializeAndLoad))
    return Unimplemented("the PJRT plugin cannot deserialize executables");
  auto args = TPU_PJRT_ARGS(PJRT_Executable_DeserializeAndLoad_Args);
  args.client = client.get();
  args.serialized_executable = bytes.data();
  args.serialized_executable_size = bytes.size();
  TPU_RETURN_IF_ERROR(api.ToStatus(api->PJRT_Executable_DeserializeAndLoad(&args),
                                   "PJRT_Executable_DeserializeAndLoad of " + ProgramName(options)));
  // The layout of results and checks is a function of the graph and options alone.
  return std::shared_ptr<const PjrtExecutable>(
      Wrap(client, args.loaded_executable, graph, options, MakeProgram(graph, options)));
}

}  // namespace tpu::pjrt
