#include "torch/lower/context.h"

#include <ATen/native/Resize.h>

#include <atomic>
#include <memory>

#include "base/metrics.h"
#include "base/options.h"
#include "compiler/compiler.h"
#include "torch/deferred/capture.h"
#include "torch/deferred/window.h"
#include "torch/device_errors.h"
#include "torch/profiler.h"
#include "torch/python_location.h"
#include "torch/sync_wait.h"
#include "torch/tensor_utils.h"

namespace tpu::torch_bridge {
namespace {

std::atomic<int> g_mode{-1};

// Builders are pooled per thread (a Lowering may run while another is open on the same thread,
// e.g. a kernel that calls another op, so this is a stack rather than a single builder).
std::vector<std::unique_ptr<Builder>>& BuilderPool() {
  thread_local std::vector<std::unique_ptr<Builder>> pool;
  return pool;
}

Builder& AcquireBuilder() {
  auto& pool = BuilderPool();
  if (pool.empty()) return *new Builder();
  Builder* b = pool.back().release();
  pool.pop_back();
  return *b;
}

void ReleaseBuilder(Builder& b) {
  b.Reset();
  BuilderPool().emplace_back(&b);
}

void CheckFinite(const char* op, const at::Tensor& out) {
  if (!at::isFloatingType(out.scalar_type())) return;
  if (!at::isfinite(ReadToHost(out)).all().item<bool>()) {
    TORCH_CHECK(false, op, " produced NaN or Inf in its output of shape ", out.sizes(),
                " (torch_tpu debug mode with NaN checks on; set TORCH_TPU_CHECK_NAN=0 or "
                "torch_tpu.set_check_nan(False) to turn this off)");
  }
}

}  // namespace

EagerMode GetEagerMode() {
  int m = g_mode.load(std::memory_order_relaxed);
  if (m < 0) {
    const std::string& name = Flags().eager_mode;
    m = name == "debug" ? 1 : name == "fused" ? 2 : 0;
    g_mode.store(m, std::memory_order_relaxed);
  }
  return static_cast<EagerMode>(m);
}

void SetEagerMode(EagerMode mode) { g_mode.store(static_cast<int>(mode), std::memory_order_relaxed); }


Lowering::Lowering(const char* op) : op_(op), builder_(AcquireBuilder()) {}

Lowering::~Lowering() { ReleaseBuilder(builder_); }

int Lowering::AddParam(const TensorType& type, Binding binding) {
  params_.push_back(std::move(binding));
  return builder_.Param(type);
}

int Lowering::Input(const at::Tensor& t) {
  TORCH_CHECK(t.defined(), op_, ": expected a tensor argument but got an undefined tensor");
  if (IsCpuScalar(t)) return Scalar(t.item(), t.scalar_type());
  if (t.device().type() != c10::DeviceType::PrivateUse1)
    ThrowWrongDevice(op_, t, device_ >= 0 ? "tpu:" + std::to_string(device_) : "the tpu device", "an input");
  int dev = t.device().index() < 0 ? 0 : t.device().index();
  if (device_ < 0) device_ = dev;
  if (device_ != dev) ThrowWrongDevice(op_, t, "tpu:" + std::to_string(device_), "an input");
  // Note [Complex tensors]: lowerings that handle complex bind its float view (ComplexInput);
  // any other meets a complex tensor here and refuses it by name, rather than building a
  // program of the wrong shape.
  TORCH_CHECK_NOT_IMPLEMENTED(!t.is_complex(), op_, ": ",
                              t.scalar_type() == at::kComplexFloat ? "complex64"
                              : t.scalar_type() == at::kComplexDouble ? "complex128" : "complex32",
                              " inputs are not supported by this op on the tpu device (complex support: "
                              "elementwise arithmetic, sum/mean, copies and views, polar; the FFTs run on the CPU "
                              "fallback). Use .real/.imag/view_as_real, or run this op on the CPU");
  Binding binding = BindingOf(t);
  TensorType type = binding.type();
  return AddParam(type, std::move(binding));
}

int Lowering::Input(const at::Tensor& t, at::ScalarType dtype) {
  return builder_.ConvertIfNeeded(Input(t), ToDType(dtype));
}

int Lowering::Scalar(const at::Scalar& s, at::ScalarType dtype) {
  DType dt = ToDType(dtype);
  alignas(8) unsigned char bytes[8] = {};
  switch (dt) {
    case DType::kF32: { float v = s.toFloat(); std::memcpy(bytes, &v, 4); break; }
    case DType::kF64: { double v = s.toDouble(); std::memcpy(bytes, &v, 8); break; }
    case DType::kBF16: { at::BFloat16 v = s.toBFloat16(); std::memcpy(bytes, &v, 2); break; }
    case DType::kF16: { at::Half v = s.toHalf(); std::memcpy(bytes, &v, 2); break; }
    case DType::kI64: case DType::kU64: { int64_t v = s.toLong(); std::memcpy(bytes, &v, 8); break; }
    case DType::kI32: case DType::kU32: { int32_t v = static_cast<int32_t>(s.toLong()); std::memcpy(bytes, &v, 4); break; }
    case DType::kI16: { int16_t v = s.toShort(); std::memcpy(bytes, &v, 2); break; }
    case DType::kI8: { int8_t v = s.toChar(); std::memcpy(bytes, &v, 1); break; }
    case DType::kU8: { uint8_t v = s.toByte(); std::memcpy(bytes, &v, 1); break; }
    case DType::kBool: { bytes[0] = s.toBool() ? 1 : 0; break; }
  }
  return AddParam(TensorType{dt, {}}, Binding::Scalar(dt, bytes));
}

int Lowering::ScalarU64Pair(uint64_t a, uint64_t b) {
  const uint64_t words[2] = {a, b};
  return AddParam(TensorType{DType::kU64, {2}}, Binding::Scalar(DType::kU64, words, {2}));
}

int Lowering::RngState(c10::GeneratorImpl* gen, std::pair<uint64_t, uint64_t> state, int64_t words) {
  int v = ScalarU64Pair(state.first, state.second);
  if (ActiveCapture()) rng_.push_back(RngDraw{static_cast<int>(params_.size()) - 1,
                                              c10::intrusive_ptr<c10::GeneratorImpl>::reclaim_copy(gen), words});
  return v;
}

void Lowering::Output(int value, const at::Tensor& out) { AddOutput(value, c10::MaybeOwned<at::Tensor>::owned(std::in_place, out)); }

void Lowering::OutputBorrowed(int value, const at::Tensor& out) { AddOutput(value, c10::MaybeOwned<at::Tensor>::borrowed(out)); }

void Lowering::AddOutput(int value, c10::MaybeOwned<at::Tensor> owned_or_borrowed) {
  const at::Tensor& out = *owned_or_borrowed;
  if (out.device().type() != c10::DeviceType::PrivateUse1) ThrowWrongDevice(op_, out, "the tpu device", "the output");
  int dev = out.device().index() < 0 ? 0 : out.device().index();
  if (device_ < 0) device_ = dev;
  TORCH_CHECK(device_ == dev, op_, ": output is on tpu:", dev, " but inputs are on tpu:", device_);
  value = builder_.ConvertIfNeeded(value, ToDType(out.scalar_type()));
  TORCH_INTERNAL_ASSERT(builder_.TypeOf(value).dims == Dims(out.sizes().begin(), out.sizes().end()),
                        op_, ": lowered result has shape ", DimsToString(builder_.TypeOf(value).dims),
                        " but the output tensor has shape ", out.sizes());
  outputs_.emplace_back(value, std::move(owned_or_borrowed));
}

void Lowering::CaptureLocation() { location_ = UserSourceLocation(); }

bool Lowering::IsHostScalar(int v) const {
  for (;;) {
    const Op* op = builder_.ProducerOf(v);
    if (!op) break;
    if (op->code != OpCode::kBroadcastInDim && op->code != OpCode::kConvert && op->code != OpCode::kReshape)
      return false;
    v = op->operands[0];
  }
  int p = builder_.ParamNumber(v);
  return p >= 0 && p < static_cast<int>(params_.size()) && params_[p].is_inline();
}

int Lowering::Checked(int x, int ok, CheckKind kind, const std::string& message) {
  if (location_.empty()) CaptureLocation();
  return builder_.Check(x, ok, kind, message);
}

void Lowering::Run() {
  static Counter* executions = GetCounter("executions");
  if (DeviceProfiling() && location_.empty()) location_ = UserSourceLocation();  // Note [Device timeline]
  for (auto& [value, out] : outputs_) builder_.Result(value);
  auto graph = builder_.FinishInPlace();
  if (!graph.ok()) ThrowStatus(Internal(std::string(op_) + ": " + graph.status().message()));
  if (RecordsIntoWindow()) {
    RunInWindow(*graph.value());
    return;
  }
  CompileOptions options;
  options.name = op_;
  auto exe = CompileCache::Get().GetOrCompile(*graph.value(), GetBackend(), options);
  Check(exe.status());
  Device& dev = DeviceFor(device_ < 0 ? CurrentDeviceIndex() : device_);
  // A tensor may have no memory yet (made in fused mode and never written there).
  for (const Binding& p : params_)
    if (Buffer* b = p.buffer(); b && !b->materialized()) MaterializeOrThrow(b);
  c10::SmallVector<Binding, 2> results;
  for (auto& [value, out] : outputs_) {
    results.push_back(BindingOf(*out));
    if (Buffer* b = results.back().buffer(); b && !b->materialized()) MaterializeOrThrow(b);
  }
  ExecutablePtr program = std::move(exe).value();
  bool small = program->work() <= Flags().inline_work;
  TaskContext ctx(op_, std::move(location_));
  ctx.thread = ThreadId();
  if (DeviceProfiling()) ctx.profile_id = CurrentProfileId();
  uint64_t seq = dev.queue().Launch(std::move(program), params_.data(), params_.size(), results.data(),
                                    results.size(), std::move(ctx), small);
  executions->Add();
  if (GetEagerMode() == EagerMode::kDebug) {
    WaitInterruptibly(dev.queue(), seq);
    Check(dev.queue().WaitFor(seq));
    if (Flags().check_nan)
      for (auto& [value, out] : outputs_) CheckFinite(op_, *out);
  }
}

void Lowering::RunInWindow(const Graph& graph) {
  // Fused mode records the op into the device's window; a backend without strided bindings runs
  // strict and debug mode as one-op windows (their views become ops of the program).
  c10::SmallVector<Binding, 2> results;
  for (auto& [value, out] : outputs_) results.push_back(BindingOf(*out));
  int device = device_ < 0 ? CurrentDeviceIndex() : device_;
  if (CaptureScope* capture = ActiveCapture()) {
    // A compiled graph's op (Note [Capture]): recorded into the capture's window, never cut.
    if (device != capture->device())
      CaptureBreak(std::string(op_) + " runs on tpu:" + std::to_string(device) + " while the graph is on tpu:" +
                   std::to_string(capture->device()));
    capture->window().Record(graph, params_.data(), params_.size(), results.data(), results.size(), op_,
                             std::move(location_), rng_.data(), rng_.size());
    return;
  }
  Window& window = WindowFor(device);
  window.Record(graph, params_.data(), params_.size(), results.data(), results.size(), op_, std::move(location_));
  EagerMode mode = GetEagerMode();
  if (mode == EagerMode::kFused) {
    if (for_effect_)
      for (const Binding& r : results)
        if (Buffer* b = r.buffer()) window.KeepUntilCut(b);
    return;
  }
  uint64_t seq = window.Cut(CutReason::kEachOp);
  if (mode == EagerMode::kDebug) {
    Queue& q = DeviceFor(device_ < 0 ? CurrentDeviceIndex() : device_).queue();
    WaitInterruptibly(q, seq);
    Check(q.WaitFor(seq));
    if (Flags().check_nan)
      for (auto& [value, out] : outputs_) CheckFinite(op_, *out);
  }
}

at::Tensor EmptyLike(at::IntArrayRef sizes, at::ScalarType dtype, const at::Tensor& like,
                     std::optional<at::MemoryFormat> format) {
  return at::empty(sizes, at::TensorOptions().dtype(dtype).device(like.device()), format);
}

std::optional<at::MemoryFormat> ChannelsLast(const at::Tensor& t) {
  if (!t.defined() || (t.dim() != 4 && t.dim() != 5)) return std::nullopt;
  at::MemoryFormat f = t.suggest_memory_format();
  if (f == at::MemoryFormat::ChannelsLast || f == at::MemoryFormat::ChannelsLast3d) return f;
  return std::nullopt;
}

void ResizeOut(const at::Tensor& out, at::IntArrayRef sizes) {
  // An out= tensor on another device, or a result allocated like an input that is on the CPU.
  if (out.device().type() != c10::DeviceType::PrivateUse1) ThrowWrongDevice("", out, "the tpu device", "the result");
  if (out.sizes() != sizes) at::native::resize_output(const_cast<at::Tensor&>(out), sizes);
}

void CheckSameDevice(const char* op, std::initializer_list<const at::Tensor*> tensors) {
  const at::Tensor* anchor = nullptr;  // the first tensor on a tpu (else the first one)
  for (const at::Tensor* t : tensors) {
    if (!t->defined() || IsCpuScalar(*t)) continue;
    bool on_tpu = t->device().type() == c10::DeviceType::PrivateUse1;
    if (!anchor || (on_tpu && anchor->device().type() != c10::DeviceType::PrivateUse1)) anchor = t;
  }
  if (!anchor) return;
  for (const at::Tensor* t : tensors)
    if (t->defined() && !IsCpuScalar(*t) && t->device() != anchor->device())
      ThrowWrongDevice(op, *t, anchor->device().str(), "an input");
}

int TensorOrScalar(Lowering& l, const at::Tensor& t, at::ScalarType dtype) {
  if (IsCpuScalar(t)) return l.Scalar(t.item(), dtype);
  return l.Input(t, dtype);
}

}  // namespace tpu::torch_bridge
