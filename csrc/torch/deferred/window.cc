#include "torch/deferred/window.h"

#include <algorithm>
#include <memory>

#include <torch/csrc/autograd/graph_task.h>

#include "base/metrics.h"
#include "base/options.h"
#include "compiler/compiler.h"
#include "ir/printer.h"
#include "ir/strided.h"
#include "torch/deferred/capture.h"
#include "torch/lower/context.h"
#include "torch/profiler.h"
#include "torch/tensor_utils.h"

namespace tpu::torch_bridge {
namespace {

constexpr const char* kReasonNames[] = {"host_read", "synchronize", "size_limit", "fallback",
                                        "mode_change", "alias", "each_op", "compiled_graph", "collective",
                                        "optimizer_step", "backward", "optimizer_begin", "work_limit"};
static_assert(sizeof(kReasonNames) / sizeof(kReasonNames[0]) == static_cast<int>(CutReason::kCount));

Counter* CutCounter(CutReason r) {
  static Counter** counters = [] {
    auto** c = new Counter*[static_cast<int>(CutReason::kCount)];
    for (int i = 0; i < static_cast<int>(CutReason::kCount); ++i)
      c[i] = GetCounter(std::string("window_cuts/") + kReasonNames[i]);
    return c;
  }();
  return counters[static_cast<int>(r)];
}

// Words that separate the kinds of things the window's fingerprint hashes.
constexpr uint64_t kParamWord = 0x7061'7261'6d00'0001ULL;
constexpr uint64_t kResultWord = 0x7265'7375'6c74'0002ULL;

// Note [Windows by work]
// One window per step serializes the host and the device: the device waits while the step is
// recorded, then the host waits while it runs (synchronize, a host read). A window cut once it
// holds enough work runs on the queue while the next one is recorded, at the price of
// materializing what crosses the cut. The work is counted in flops (EstimateFlops, compiler.h),
// which vary by orders of magnitude between ops where their counts do not. Option window_work
// sets the threshold, off by default: at 5e7 flops every example model's fused step but DLRM's
// was at least as fast as strict mode's in a back-to-back run of bench_models (the ResNets'
// 0.72-0.85x became 1.01-1.05x), but a cut costs the memory that one window saves -- values
// crossing it are written (one window recomputes some, Note [Rematerialization]) and a window
// holds the inputs the backward has consumed until its program ends -- so the small GPT's fused
// peak (test_steady_state) rises above strict's (3.32 MB against 3.04).

int64_t Elements(const Buffer* b, DType dtype) { return b->nbytes() / DTypeSize(dtype); }

bool SameGeometry(const Binding& b, int64_t offset, DType dtype, const Dims& dims, const Dims& strides) {
  return b.byte_offset() == offset && b.dtype() == dtype && b.dims() == dims && b.strides() == strides;
}

}  // namespace

const char* CutReasonName(CutReason reason) { return kReasonNames[static_cast<int>(reason)]; }

Window::Window(int device, bool capture, bool dense)
    : device_(device), capture_(capture), dense_(dense), origins_(std::make_shared<std::vector<OpOrigin>>()) {}

Window::~Window() {
  std::lock_guard<std::mutex> lock(mu_);
  ResetLocked();
}

bool Window::StridedBindings() const {
  static const bool strided = GetBackend().strided_bindings();
  return strided && !dense_;
}

Window::Entry* Window::FindLocked(const Buffer* buffer) {
  if (capture_) {
    auto it = slots_.find(buffer);
    return it == slots_.end() ? nullptr : &entries_[it->second];
  }
  if (buffer->window_epoch != epoch_) return nullptr;
  int slot = buffer->window_slot;
  if (slot < 0 || slot >= static_cast<int>(entries_.size()) || entries_[slot].buffer != buffer) return nullptr;
  return &entries_[slot];
}

Window::Entry& Window::EntryLocked(Buffer* buffer) {
  if (Entry* e = FindLocked(buffer)) return *e;
  buffer->Retain();
  if (capture_) {
    slots_.emplace(buffer, static_cast<int>(entries_.size()));
  } else {
    buffer->window_slot = static_cast<int32_t>(entries_.size());
    buffer->window_epoch = epoch_;
  }
  entries_.emplace_back();
  entries_.back().buffer = buffer;
  return entries_.back();
}

int Window::ParamLocked(Binding binding) {
  int id = builder_.Param(binding.type());
  params_.push_back(std::move(binding));
  return id;
}

int Window::BaseLocked(Entry& e, const Binding& view) {
  if (e.base >= 0) return e.base;
  DType dt = view.dtype();
  TensorType type = view.CoversBuffer() ? view.type() : TensorType{dt, {Elements(e.buffer, dt)}};
  e.base = ParamLocked(Binding(e.buffer, 0, dt, type.dims));
  e.base_type = type;
  ++e.held;
  return e.base;
}

ViewOffset Window::OffsetOf(const Binding& binding, bool pending) {
  int64_t elements = binding.byte_offset() / DTypeSize(binding.dtype());
  // A view of a value the window computes starts where the program's own structure says (a
  // split, a slice): a constant. A view written into a ready storage may move from one window to
  // the next (a cache written at a growing position): a value, so one program serves them all.
  if (pending || elements == 0) return ViewOffset::Constant(elements);
  return ViewOffset::Value(ParamLocked(Binding::Scalar(DType::kI64, &elements)));
}

int Window::FlatOf(int v, const TensorType& type, DType dtype, int64_t n) {
  if (type.dims.size() == 1 && type.dims[0] == n) return v;
  return builder_.Reshape(v, {n});
}

int Window::ViewOfValue(int v, const TensorType& type, const Binding& binding, bool pending) {
  if (binding.CoversBuffer()) return type.dims == binding.dims() ? v : builder_.Reshape(v, binding.dims());
  int flat = FlatOf(v, type, binding.dtype(), Elements(binding.buffer(), binding.dtype()));
  return ReadStrided(builder_, flat, binding.dims(), binding.strides(), OffsetOf(binding, pending));
}

int Window::ReadLocked(Binding& binding) {
  Entry& e = EntryLocked(binding.buffer());
  if (e.value >= 0) return ViewOfValue(e.value, e.value_type, binding, /*pending=*/true);
  if (StridedBindings()) {
    // The ready value, read in place through the binding's strides (one parameter per view).
    for (const Entry::ViewParam& vp : e.views)
      if (SameGeometry(binding, vp.offset, vp.dtype, vp.dims, vp.strides)) return vp.id;
    Entry::ViewParam vp{binding.byte_offset(), binding.dtype(), binding.dims(), binding.strides(), -1};
    vp.id = ParamLocked(std::move(binding));
    ++e.held;
    e.views.push_back(std::move(vp));
    return e.views.back().id;
  }
  int base = BaseLocked(e, binding);
  return ViewOfValue(base, e.base_type, binding, /*pending=*/false);
}

void Window::WriteLocked(const Binding& binding, int value) {
  Entry& e = EntryLocked(binding.buffer());
  if (binding.CoversBuffer()) {
    e.value = value;
    e.value_type = builder_.TypeOf(value);
    return;
  }
  // A write through a view: the storage's whole value, updated.
  DType dt = binding.dtype();
  int64_t n = Elements(e.buffer, dt);
  bool pending = e.value >= 0;
  int current = pending ? FlatOf(e.value, e.value_type, dt, n) : FlatOf(BaseLocked(e, binding), e.base_type, dt, n);
  e.value = UpdateStrided(builder_, current, binding.dims(), binding.strides(), OffsetOf(binding, pending), value);
  e.value_type = TensorType{dt, {n}};
}

bool Window::AliasesPending(const Binding& b) {
  if (!b.buffer()) return false;
  Entry* e = FindLocked(b.buffer());
  if (!e) return false;
  return (e->value >= 0 && e->value_type.dtype != b.dtype()) || (e->base >= 0 && e->base_type.dtype != b.dtype());
}

void Window::Record(const Graph& g, Binding* params, size_t num_params, const Binding* results, size_t num_results,
                    const char* op, std::string location, const RngDraw* rng, size_t num_rng) {
  std::lock_guard<std::mutex> lock(mu_);
  // Note [Backward windows] (option window_at_backward, off by default): a training step is
  // recorded, then run; with one window per step (Note [Step windows], torch_tpu/modes.py)
  // nothing overlaps the two, while strict mode runs each op as Python issues the next. Autograd
  // runs a backward pass as a graph task on its device thread, so with the option the first op
  // recorded in another task than the last one (a backward beginning, or the step going on after
  // it) cuts the window: the forward's program runs while the backward is recorded, and the
  // backward's while the optimizer step is. The cuts fall at the same op of every step, so the
  // windows keep their fingerprints. The price is memory: the forward's window writes every
  // activation the backward reads (a single window recomputes some, Note [Rematerialization])
  // and holds its scratch beside them all. Measured (bench_models --threads 2, one run each way,
  // noisy): ResNet-50 train fused/strict 0.69 -> 0.83, ResNet-18 0.72 -> 0.78, DLRM 0.90 -> 1.08,
  // while the small GPT's fused peak (tests/python/test_steady_state.py gpt_peak) rose from
  // 2.60 MB to 3.59 MB (strict: 2.84-2.98 MB).
  if (!capture_ && Flags().window_at_backward) {  // (only then: this runs for every op)
    if (const int task = torch::autograd::get_current_graph_task_id(); task != autograd_task_) {
      autograd_task_ = task;
      if (num_ops_ > 0) CutLocked(CutReason::kBackward);
    }
  }
  // A storage pending under one dtype, used under another, would need a bitcast: cut instead.
  bool alias = false;
  for (size_t i = 0; i < num_params && !alias; ++i) alias = AliasesPending(params[i]);
  for (size_t i = 0; i < num_results && !alias; ++i) alias = AliasesPending(results[i]);
  if (alias && capture_)
    CaptureBreak(std::string(op) + " reads a storage the graph computes under another dtype (a view that "
                 "reinterprets its bytes)");
  if (alias) CutLocked(CutReason::kAlias);
  // Memory for the ready values this op reads, before anything changes (this may run out).
  for (size_t i = 0; i < num_params; ++i) {
    Buffer* b = params[i].buffer();
    if (!b || b->materialized()) continue;
    Entry* e = FindLocked(b);
    if (!e || e->value < 0) MaterializeOrThrow(b);
  }
  const int first_value = builder_.num_values();
  const int first_op = builder_.num_ops();
  const int np = g.num_params();
  SmallVector<int, 16> remap(g.num_values(), -1);
  for (int p = 0; p < np; ++p) {
    if (params[p].buffer()) {
      remap[p] = ReadLocked(params[p]);
      continue;
    }
    remap[p] = ParamLocked(std::move(params[p]));
    for (size_t r = 0; r < num_rng && capture_; ++r)
      if (rng[r].param == p) rng_.push_back(RngDraw{static_cast<int>(params_.size()) - 1, rng[r].generator, rng[r].words});
  }
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& o = g.ops[i];
    SmallVector<int, 4> operands;
    for (int v : o.operands) operands.push_back(remap[v]);
    remap[np + i] = builder_.Append(o, std::move(operands));
  }
  for (size_t r = 0; r < num_results; ++r) WriteLocked(results[r], remap[g.results[r]]);
  if (!builder_.status().ok()) {
    Status why = Internal(std::string(op) + ": recording into the fused window failed: " + builder_.status().message());
    AbandonLocked(why);
    ThrowStatus(why);
  }
  // Everything recorded goes into the fingerprint in creation order; every new op names `op`.
  auto add = [this](uint64_t w) { fingerprint_.Add(w); };
  builder_.ForEachValueFrom(
      first_value,
      [&](const TensorType& t) {
        add(kParamWord);
        HashTypeWords(t, add);
      },
      [&](const Op& o) { HashOpWords(o, o.operands, add); });
  const int thread = ThreadId();  // the window may hold several threads' ops: errors go to each op's
  for (int i = first_op; i < builder_.num_ops(); ++i) origins_->push_back(OpOrigin{op, location, thread});
  ++num_ops_;
  if (capture_) return;
  if (num_ops_ >= std::max<int64_t>(1, Flags().window_ops)) {
    CutLocked(CutReason::kSizeLimit);
  } else if (const int64_t limit = Flags().window_work; limit > 0 && (work_ += EstimateFlops(g)) >= limit) {
    CutLocked(CutReason::kWorkLimit);  // Note [Windows by work]
  }
}

uint64_t Window::Cut(CutReason reason) {
  std::lock_guard<std::mutex> lock(mu_);
  return CutLocked(reason);
}

void Window::CutIfPending(const Buffer* buffer, CutReason reason) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry* e = FindLocked(buffer);
  if (e && e->value >= 0) CutLocked(reason);
}

bool Window::Uses(const Buffer* buffer) {
  std::lock_guard<std::mutex> lock(mu_);
  return FindLocked(buffer) != nullptr;
}

int64_t Window::ops() {
  std::lock_guard<std::mutex> lock(mu_);
  return num_ops_;
}

bool Window::UsesAny(Buffer* const* buffers, size_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  if (entries_.empty()) return false;
  for (size_t i = 0; i < n; ++i)
    if (buffers[i] && FindLocked(buffers[i])) return true;
  return false;
}

std::vector<Window::Pending> Window::PendingValues() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Pending> out;
  for (const Entry& e : entries_)
    if (e.value >= 0) out.push_back(Pending{e.buffer, e.value_type, e.value});
  return out;
}

int Window::BindWhole(Binding binding) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = EntryLocked(binding.buffer());
  if (e.base < 0 && binding.CoversBuffer()) {
    e.base_type = binding.type();
    e.base = ParamLocked(std::move(binding));
    ++e.held;
  }
  return e.base;
}

int Window::ReadValue(Binding binding) {
  std::lock_guard<std::mutex> lock(mu_);
  if (binding.buffer() && !binding.buffer()->materialized()) {
    Entry* e = FindLocked(binding.buffer());
    if (!e || e->value < 0) MaterializeOrThrow(binding.buffer());
  }
  return ReadLocked(binding);
}

StatusOr<Window::Program> Window::TakeProgram(const std::vector<int>& results) {
  std::lock_guard<std::mutex> lock(mu_);
  Program p;
  p.key = fingerprint_;
  p.key.Add(kResultWord);
  for (int v : results) {
    p.key.Add(static_cast<uint64_t>(v));
    builder_.Result(v);
  }
  StatusOr<Graph> graph = builder_.Finish();
  if (!graph.ok()) {
    Status s = graph.status();
    ResetLocked();
    return s;
  }
  p.graph = std::make_unique<Graph>(std::move(graph).value());
  p.params = std::move(params_);
  p.rng = std::move(rng_);
  p.origins = origins_;
  ResetLocked();
  return p;
}

void Window::Discard() {
  std::lock_guard<std::mutex> lock(mu_);
  ResetLocked();
}

uint64_t Window::CutLocked(CutReason reason) {
  static Counter* windows = GetCounter("windows");
  static Counter* window_ops = GetCounter("window_ops");
  static Counter* executions = GetCounter("executions");
  if (num_ops_ == 0) {
    ResetLocked();
    return 0;
  }
  // The results: pending values of the storages someone besides the window still holds -- an
  // owner (a tensor, a kept check), not the queue: a launched program keeps its bindings until
  // its slot is recycled, and an in-place update of a buffer an earlier window wrote, whose tensor
  // is gone, would be written or not by how far the queue had got (the same step recording
  // programs of different results at random, each compiled).
  std::vector<const Entry*> live;
  for (const Entry& e : entries_)
    if (e.value >= 0 && e.buffer->owners() > e.held) live.push_back(&e);
  windows->Add();
  window_ops->Add(num_ops_);
  CutCounter(reason)->Add();
  if (live.empty()) {  // nothing the program computes is observable
    ResetLocked();
    return 0;
  }
  for (const Entry* e : live) MaterializeOrThrow(e->buffer);  // may throw: the window stays as it is
  Fingerprint128 key = fingerprint_;
  key.Add(kResultWord);
  for (const Entry* e : live) {
    key.Add(static_cast<uint64_t>(e->value));
    builder_.Result(e->value);
  }
  std::vector<Binding> results;
  results.reserve(live.size());
  for (const Entry* e : live) results.emplace_back(e->buffer, 0, e->value_type.dtype, e->value_type.dims);
  Queue& queue = DeviceFor(device_).queue();
  TaskContext ctx = ProfiledContext("fused window");
  ctx.thread = ThreadId();
  ctx.origins = origins_;
  auto graph = builder_.FinishInPlace();
  StatusOr<ExecutablePtr> exe = graph.status();
  if (graph.ok()) {
    CompileOptions options;
    options.name = "fused window";
    exe = CompileCache::Get().GetOrCompile(*graph.value(), key, GetBackend(), options);
  }
  uint64_t seq;
  if (exe.ok()) {
    ExecutablePtr program = std::move(exe).value();
    bool small = program->work() <= Flags().inline_work;
    seq = queue.Launch(std::move(program), params_.data(), params_.size(), results.data(), results.size(),
                       std::move(ctx), small);
    executions->Add();
  } else {
    // Nothing of the window can run: its results fail with the error (Note [Failed buffers]),
    // which the next sync point that reads them raises.
    seq = queue.Fail(Status(exe.status().code(), "compiling the fused window failed: " + exe.status().message()),
                     results.data(), results.size(), std::move(ctx));
  }
  ResetLocked();
  return seq;
}

void Window::AbandonLocked(const Status& why) {
  // What the window would have written is lost: those storages fail with the error (Note
  // [Failed buffers]) instead of keeping stale values silently; the window starts afresh.
  std::vector<Binding> lost;
  for (const Entry& e : entries_)
    if (e.value >= 0) lost.emplace_back(e.buffer, 0, e.value_type.dtype, e.value_type.dims);
  TaskContext ctx("fused window");
  ctx.thread = ThreadId();
  if (!lost.empty()) DeviceFor(device_).queue().Fail(why, lost.data(), lost.size(), std::move(ctx));
  ResetLocked();
}

void Window::KeepUntilCut(Buffer* buffer) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!FindLocked(buffer)) return;  // not pending here (the window was cut meanwhile): nothing to keep
  buffer->Retain();
  kept_.push_back(buffer);
}

void Window::ResetLocked() {
  for (Buffer* b : kept_) b->Release();
  kept_.clear();
  for (Entry& e : entries_) e.buffer->Release();
  entries_.clear();
  slots_.clear();
  rng_.clear();
  params_.clear();
  builder_.Reset();
  fingerprint_ = Fingerprint128();
  origins_ = std::make_shared<std::vector<OpOrigin>>();
  num_ops_ = 0;
  work_ = 0;
  ++epoch_;
}

std::string Window::Dump() {
  std::lock_guard<std::mutex> lock(mu_);
  if (num_ops_ == 0) return "";
  Builder copy = builder_;
  for (const Entry& e : entries_)
    if (e.value >= 0 && e.buffer->owners() > e.held) copy.Result(e.value);
  auto g = copy.FinishInPlace();
  if (!g.ok()) return "(the window does not form a valid program: " + g.status().message() + ")";
  return PrintStableHlo(*g.value(), "fused_window");
}

Window& WindowFor(int device) {
  static std::vector<std::unique_ptr<Window>>* windows = [] {
    auto* v = new std::vector<std::unique_ptr<Window>>();
    for (int i = 0; i < GetBackend().device_count(); ++i) v->push_back(std::make_unique<Window>(i));
    return v;
  }();
  return *windows->at(device);
}

void CutAllWindows(CutReason reason) {
  for (int i = 0; i < GetBackend().device_count(); ++i) WindowFor(i).Cut(reason);
}

bool RecordsIntoWindow() {
  static const bool dense = !GetBackend().strided_bindings();
  return dense || GetEagerMode() == EagerMode::kFused || ActiveCapture() != nullptr;
}

// ---- hooks for the rest of the torch layer (tensor_utils.h) ---------------------------------

bool MaterializeEagerly() { return GetEagerMode() != EagerMode::kFused && ActiveCapture() == nullptr; }

constexpr const char* kHostReadBreak =
    "it reads a device value on the host (.item(), .tolist(), .cpu(), printing, or an op whose result size depends on the data)";

void PrepareHostAccess(Buffer* buffer) {
  if (ActiveCapture()) CaptureBreak(kHostReadBreak);
  WindowFor(buffer->device()).CutIfPending(buffer, CutReason::kHostRead);
}

// Note [Host reads cut]: a host read (.item(), .cpu(), printing, a data-dependent size) cuts its
// device's whole window, not only when the value read is pending. In strict mode the read waits
// for every op queued before it; here it makes the windows of a loop that reads its loss each
// step end where the step does, even when the loss was computed by an earlier window (Note
// [Backward windows]) -- else the rest of the step (the backward, a hand-written update) stays
// open and joins the next step's window, or a window of whatever the program does next, which a
// failure there would take down with it.
void PrepareHostRead(Buffer* buffer) {
  if (ActiveCapture()) CaptureBreak(kHostReadBreak);
  Window& w = WindowFor(buffer->device());
  // Outside window modes the window is empty but for what was recorded before a mode change that
  // did not cut it: the value read is all that must run (as in PrepareHostAccess), and a cut of
  // the empty window would reset it at every read.
  if (RecordsIntoWindow()) w.Cut(CutReason::kHostRead);
  else w.CutIfPending(buffer, CutReason::kHostRead);
}

void PrepareDeviceSync(int device) {
  if (ActiveCapture()) CaptureBreak("it synchronizes with the device (torch.tpu.synchronize(), an event)");
  WindowFor(device).Cut(CutReason::kSynchronize);
}

bool DeferredUses(Buffer* buffer) {
  if (CaptureScope* c = ActiveCapture()) return c->window().Uses(buffer);
  return WindowFor(buffer->device()).Uses(buffer);
}

}  // namespace tpu::torch_bridge
