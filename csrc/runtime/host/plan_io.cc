// The host backend's persistent format of a HostExecutable (Backend::Serialize/Deserialize): the
// optimized graph and its plan. Reading checks every index and offset of the plan against the
// graph, so an entry that is corrupt in a way its checksum missed cannot make the executor read
// or write out of bounds -- it is refused and the program recompiled.
#include <memory>

#include "base/bytes.h"
#include "ir/serialize.h"
#include "runtime/host/host_backend.h"

namespace tpu::host {
namespace {

// 2: row steps; 3: results' scratch apart; 4: with the temps of reshaped results (Note [Reshaped
// results]); 5: RMS norm row steps (matched again on reading: a plan of 4 would not match); 6:
// softmax row steps take the safe-softmax guard (Note [Safe softmax rows])
constexpr uint32_t kPlanFormat = 6;

void WriteInts(const std::vector<int>& v, ByteWriter& w) {
  w.U64(v.size());
  for (int x : v) w.I64(x);
}

Status ReadInts(ByteReader& r, std::vector<int>* v, int64_t limit) {
  uint64_t n;
  TPU_RETURN_IF_ERROR(r.Count(&n, 8));
  v->clear();
  for (uint64_t i = 0; i < n; ++i) {
    int64_t x;
    TPU_RETURN_IF_ERROR(r.I64(&x));
    if (x < -1 || x >= limit) return InvalidArgument("corrupt plan: an index out of range");
    v->push_back(static_cast<int>(x));
  }
  return Status::Ok();
}

}  // namespace

std::string SerializePlan(const HostExecutable& e) {
  ByteWriter w;
  w.U32(kPlanFormat);
  WriteGraph(e.graph, w);
  w.U64(e.regions.size());
  for (const FusedRegion& r : e.regions) {
    w.U64(r.shape.size());
    for (int64_t d : r.shape) w.I64(d);
    WriteInts(r.ops, w);
    WriteInts(r.inputs, w);
    WriteInts(r.outputs, w);
    w.U64(r.operand_slots.size());
    for (const auto& s : r.operand_slots) WriteInts(std::vector<int>(s.begin(), s.end()), w);
    WriteInts(r.output_slots, w);
  }
  // Row steps are not stored: reading matches them again (MatchRowChains is deterministic).
  w.U64(e.rows.size());
  w.U64(e.steps.size());
  for (const Step& s : e.steps) {
    w.U8(static_cast<uint8_t>(s.kind));
    w.I64(s.index);
  }
  w.U64(e.slots.size());
  for (const ValueSlot& s : e.slots) {
    w.U8(static_cast<uint8_t>(s.kind));
    w.I64(s.offset);
  }
  WriteInts(e.producer_step, w);
  w.I64(e.scratch_bytes);
  w.I64(e.temp_bytes);
  w.I64(e.work());
  return w.take();
}

StatusOr<std::shared_ptr<const HostExecutable>> DeserializePlan(const std::string& bytes, const Graph& source,
                                                               const CompileOptions& options) {
  ByteReader r(bytes);
  uint32_t format;
  TPU_RETURN_IF_ERROR(r.U32(&format));
  if (format != kPlanFormat) return InvalidArgument("host plan format " + std::to_string(format) + " is not this build's");
  auto e = std::make_shared<HostExecutable>();
  TPU_ASSIGN_OR_RETURN(e->graph, ReadGraph(r));
  const Graph& g = e->graph;
  // Launches bind the source's parameters and results: the optimized graph must have the same.
  if (g.params != source.params || g.results.size() != source.results.size())
    return InvalidArgument("host plan: its program's signature is not the requested one");
  const int nv = g.num_values(), nops = static_cast<int>(g.ops.size());
  uint64_t n;
  TPU_RETURN_IF_ERROR(r.Count(&n, 48));
  e->regions.resize(n);
  for (FusedRegion& reg : e->regions) {
    uint64_t rank;
    TPU_RETURN_IF_ERROR(r.Count(&rank, 8));
    for (uint64_t i = 0; i < rank; ++i) {
      int64_t d;
      TPU_RETURN_IF_ERROR(r.I64(&d));
      reg.shape.push_back(d);
    }
    TPU_RETURN_IF_ERROR(ReadInts(r, &reg.ops, nops));
    TPU_RETURN_IF_ERROR(ReadInts(r, &reg.inputs, nv));
    TPU_RETURN_IF_ERROR(ReadInts(r, &reg.outputs, nv));
    uint64_t no;
    TPU_RETURN_IF_ERROR(r.Count(&no, 8));
    if (no != reg.ops.size()) return InvalidArgument("corrupt plan: region slots do not match its ops");
    const int nslots = static_cast<int>(reg.inputs.size() + reg.ops.size());
    if (nslots > kMaxRegionValues) return InvalidArgument("corrupt plan: a region with too many values");
    for (uint64_t k = 0; k < no; ++k) {
      std::vector<int> s;
      TPU_RETURN_IF_ERROR(ReadInts(r, &s, nslots));
      if (s.size() != g.ops[reg.ops[k]].operands.size()) return InvalidArgument("corrupt plan: operand slots");
      for (int x : s)
        if (x < 0) return InvalidArgument("corrupt plan: a negative slot");
      reg.operand_slots.emplace_back(s.begin(), s.end());
    }
    TPU_RETURN_IF_ERROR(ReadInts(r, &reg.output_slots, nslots));
    if (reg.output_slots.size() != reg.outputs.size()) return InvalidArgument("corrupt plan: output slots");
    for (int op : reg.ops)
      if (op < 0 || !IsElementwise(g.ops[op].code) || g.ops[op].type.dims != reg.shape)
        return InvalidArgument("corrupt plan: a region op that does not belong in it");
    MatchComposites(g, reg);  // not stored: matched again, like the row steps
  }
  uint64_t nrows;
  TPU_RETURN_IF_ERROR(r.U64(&nrows));
  e->rows = MatchRowChains(g);
  if (nrows != e->rows.size()) return InvalidArgument("corrupt plan: row steps do not match its program");
  TPU_RETURN_IF_ERROR(r.Count(&n, 9));
  e->steps.resize(n);
  for (Step& s : e->steps) {
    uint8_t kind;
    int64_t index;
    TPU_RETURN_IF_ERROR(r.U8(&kind));
    TPU_RETURN_IF_ERROR(r.I64(&index));
    if (kind > static_cast<uint8_t>(StepKind::kRows)) return InvalidArgument("corrupt plan: unknown step");
    s.kind = static_cast<StepKind>(kind);
    int64_t limit = s.kind == StepKind::kFused  ? static_cast<int64_t>(e->regions.size())
                    : s.kind == StepKind::kRows ? static_cast<int64_t>(e->rows.size())
                                                : nops;
    if (index < 0 || index >= limit) return InvalidArgument("corrupt plan: a step out of range");
    s.index = static_cast<int>(index);
  }
  TPU_RETURN_IF_ERROR(r.Count(&n, 9));
  if (n != static_cast<uint64_t>(nv)) return InvalidArgument("corrupt plan: slots do not match the values");
  e->slots.resize(n);
  for (ValueSlot& s : e->slots) {
    uint8_t kind;
    TPU_RETURN_IF_ERROR(r.U8(&kind));
    TPU_RETURN_IF_ERROR(r.I64(&s.offset));
    if (kind > static_cast<uint8_t>(SlotKind::kInRegion)) return InvalidArgument("corrupt plan: unknown slot");
    s.kind = static_cast<SlotKind>(kind);
  }
  TPU_RETURN_IF_ERROR(ReadInts(r, &e->producer_step, static_cast<int64_t>(e->steps.size())));
  if (e->producer_step.size() != static_cast<size_t>(nv)) return InvalidArgument("corrupt plan: producer steps");
  int64_t work;
  TPU_RETURN_IF_ERROR(r.I64(&e->scratch_bytes));
  TPU_RETURN_IF_ERROR(r.I64(&e->temp_bytes));
  TPU_RETURN_IF_ERROR(r.I64(&work));
  if (e->temp_bytes < 0 || e->temp_bytes > e->scratch_bytes) return InvalidArgument("corrupt plan: scratch sizes");
  for (int v : g.results) e->result_temps.push_back(ResultTemp(*e, v));
  std::vector<bool> is_result(nv, false);
  for (int v : e->result_temps) is_result[v] = true;
  for (int v = g.num_params(); v < nv; ++v) {
    const ValueSlot& s = e->slots[v];
    // A launch may take only temp_bytes (Note [Result scratch]): every other temp lies below it.
    int64_t limit = is_result[v] ? e->scratch_bytes : e->temp_bytes;
    if (s.kind == SlotKind::kTemp && (s.offset < 0 || s.offset + TempBytes(g, v) > limit))
      return InvalidArgument("corrupt plan: a temp outside the scratch");
    // (values inside a fused region live in its registers: no step writes them to memory)
    if ((s.kind == SlotKind::kTemp || s.kind == SlotKind::kView) && e->producer_step[v] < 0)
      return InvalidArgument("corrupt plan: a value nothing writes");
  }
  for (int p = 0; p < g.num_params(); ++p)
    if (e->slots[p].kind != SlotKind::kParam) return InvalidArgument("corrupt plan: a parameter's slot");
  if (r.remaining() != 0) return InvalidArgument("corrupt plan: trailing bytes");
  e->last_read = LastReads(*e, &e->last_view_read);
  e->view_last_read = ViewLastReads(*e);
  e->last_read.resize(g.num_params());
  e->last_view_read.resize(g.num_params());
  e->set_identity(Fingerprint(source), options.name, work);
  e->set_source(source);
  return std::shared_ptr<const HostExecutable>(std::move(e));
}

}  // namespace tpu::host
