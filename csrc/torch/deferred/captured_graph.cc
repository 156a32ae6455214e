#include "torch/deferred/captured_graph.h"

#include <c10/core/DeviceGuard.h>
#include <pybind11/stl.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cstring>
#include <mutex>
#include <unordered_map>

#include "base/metrics.h"
#include "base/options.h"
#include "compiler/compiler.h"
#include "ir/printer.h"
#include "torch/generator.h"
#include "torch/lower/context.h"
#include "torch/tensor_utils.h"

namespace py = pybind11;

namespace tpu::torch_bridge {

struct CapturedGraph::InputSig {
  enum Kind { kTensor, kCpuTensor, kValue } kind = kValue;
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> sizes, strides;
  int64_t storage_offset = 0;
  int64_t storage_nbytes = 0;
  int shares = -1;        // kTensor: the first earlier input on the same storage, or -1
  at::Tensor cpu_value;   // kCpuTensor: its value at capture (the program may have used it)
  py::object value;       // kValue
};

struct CapturedGraph::ParamRecipe {
  enum Kind { kInput, kConstant, kScalar, kRng } kind = kScalar;
  int input = -1;             // kInput: the input whose storage it binds
  Buffer* constant = nullptr; // kConstant (held in bound_buffers_)
  int64_t byte_offset = 0;
  DType dtype = DType::kF32;
  Dims dims, strides;
  alignas(16) unsigned char bytes[16] = {};  // kScalar
  c10::intrusive_ptr<c10::GeneratorImpl> generator;  // kRng
  int64_t words = 0;
};

struct CapturedGraph::StorageRecipe {
  // kInput: an input's storage; kNew: a program result; kFresh: made by the graph and never
  // written (uninitialized, as in eager); kCopy: made by the graph and written outside the program
  // (a host copy of a constant), so each call gets a copy of those bytes; kShared: a storage the
  // graph returns unchanged that existed before the capture (a constant).
  enum Kind { kInput, kNew, kFresh, kCopy, kShared } kind = kNew;
  int input = -1;
  int64_t nbytes = 0;
  Buffer* source = nullptr;  // kCopy (held in bound_buffers_)
  c10::Storage shared;       // kShared
};

struct CapturedGraph::OutputRecipe {
  enum Kind { kTensor, kOther, kValue } kind = kValue;
  int storage = -1;
  at::ScalarType dtype = at::kFloat;
  int64_t storage_offset = 0;
  std::vector<int64_t> sizes, strides;
  at::Tensor other;   // kOther: a tensor on another device (the CPU), returned as a copy
  py::object value;   // kValue
};

namespace {

bool IsTpu(const at::Tensor& t) { return t.device().type() == c10::DeviceType::PrivateUse1; }

const at::Tensor* TensorArg(py::handle h) {
  return THPVariable_Check(h.ptr()) ? &THPVariable_Unpack(h.ptr()) : nullptr;
}

std::string Shape(at::IntArrayRef v) { return c10::str(v); }

at::Tensor TensorOn(const c10::Storage& storage, at::ScalarType dtype, int64_t offset, at::IntArrayRef sizes,
                    at::IntArrayRef strides) {
  at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(storage),
                                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                           caffe2::TypeMeta::fromScalarType(dtype));
  t.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides, offset);
  return t;
}

c10::Storage NewStorage(int device, int64_t nbytes) {
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device)));
  return c10::Storage(c10::Storage::use_byte_size_t(), nbytes, GetTpuAllocator(), /*resizable=*/true);
}

Buffer* BufferOfStorage(const c10::Storage& s) {
  const c10::DataPtr& p = s.data_ptr();
  return p.get() ? Buffer::FromDeviceAddress(p.get()) : nullptr;
}

}  // namespace

CapturedGraph::CapturedGraph() = default;

CapturedGraph::~CapturedGraph() {
  for (Buffer* b : bound_buffers_) b->Release();
}

int CapturedGraph::num_params() const { return static_cast<int>(params_.size()); }
int CapturedGraph::num_results() const { return static_cast<int>(results_.size()); }
int64_t CapturedGraph::num_ops() const { return exe_ ? static_cast<int64_t>(exe_->source().ops.size()) : 0; }

std::string CapturedGraph::Text() const { return exe_ ? PrintStableHlo(exe_->source(), "compiled_graph") : ""; }

std::string CapturedGraph::Mismatch(const py::list& args) const {
  std::vector<at::Tensor> tensors;
  return MismatchOf(args, &tensors);
}

// The first way `args` differ from the capture's arguments ("" when they do not); fills `tensors`.
std::string CapturedGraph::MismatchOf(const py::list& args, std::vector<at::Tensor>* tensors) const {
  if (args.size() != inputs_.size())
    return "the graph takes " + std::to_string(inputs_.size()) + " arguments, got " + std::to_string(args.size());
  tensors->assign(inputs_.size(), at::Tensor());
  std::unordered_map<const Buffer*, int> first;
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const InputSig& s = inputs_[i];
    py::handle h = args[i];
    const at::Tensor* t = TensorArg(h);
    std::string in = "argument " + std::to_string(i) + ": ";
    if (s.kind == InputSig::kValue) {
      if (t) return in + "a tensor where the capture had " + py::repr(s.value).cast<std::string>();
      if (!h.get_type().is(s.value.get_type()) || !h.equal(s.value))
        return in + py::repr(h).cast<std::string>() + " where the capture had " + py::repr(s.value).cast<std::string>();
      continue;
    }
    if (!t) return in + "not a tensor (" + py::repr(h).cast<std::string>() + ")";
    if (t->scalar_type() != s.dtype)
      return in + "dtype " + std::string(c10::toString(t->scalar_type())) + " where the capture had " +
             c10::toString(s.dtype);
    if (t->sizes() != at::IntArrayRef(s.sizes))
      return in + "size " + Shape(t->sizes()) + " where the capture had " + Shape(s.sizes);
    if (t->strides() != at::IntArrayRef(s.strides))
      return in + "strides " + Shape(t->strides()) + " where the capture had " + Shape(s.strides);
    if (s.kind == InputSig::kCpuTensor) {
      if (IsTpu(*t)) return in + "a tpu tensor where the capture had a CPU tensor";
      if (!at::equal(*t, s.cpu_value)) return in + "a CPU tensor whose value changed (its value is part of the program)";
      (*tensors)[i] = *t;
      continue;
    }
    if (!IsTpu(*t)) return in + "a " + t->device().str() + " tensor where the capture had a tpu tensor";
    if (t->device().index() != device_) return in + "on " + t->device().str() + ", the graph was captured on tpu:" + std::to_string(device_);
    if (t->storage_offset() != s.storage_offset)
      return in + "storage offset " + std::to_string(t->storage_offset()) + " where the capture had " +
             std::to_string(s.storage_offset);
    if (static_cast<int64_t>(t->storage().nbytes()) != s.storage_nbytes)
      return in + "a storage of " + std::to_string(t->storage().nbytes()) + " bytes where the capture had " +
             std::to_string(s.storage_nbytes);
    const Buffer* b = BufferOf(*t);
    auto [it, fresh] = first.emplace(b, static_cast<int>(i));
    int shares = fresh ? -1 : it->second;
    if (shares != s.shares)
      return in + (shares < 0 ? "its own storage where the capture shared argument " + std::to_string(s.shares) + "'s"
                              : "shares argument " + std::to_string(shares) + "'s storage, which the capture did not");
    (*tensors)[i] = *t;
  }
  return "";
}

py::object CapturedGraph::Replay(const py::list& args) {
  static Counter* replays = GetCounter("compiled_graph_replays");
  static Counter* executions = GetCounter("executions");
  if (ActiveCapture()) CaptureBreak("a compiled graph (" + name_ + ") runs inside it");
  std::vector<at::Tensor> tensors;
  if (!MismatchOf(args, &tensors).empty()) return py::none();
  // The storages the call reads, writes and returns.
  std::vector<c10::Storage> storages(storages_.size());
  std::vector<Buffer*> sbuf(storages_.size(), nullptr);
  for (size_t s = 0; s < storages_.size(); ++s) {
    const StorageRecipe& r = storages_[s];
    switch (r.kind) {
      case StorageRecipe::kInput: storages[s] = tensors[r.input].storage(); break;
      case StorageRecipe::kShared: storages[s] = r.shared; break;
      case StorageRecipe::kNew:
      case StorageRecipe::kFresh:
      case StorageRecipe::kCopy: storages[s] = NewStorage(device_, r.nbytes); break;
    }
    sbuf[s] = BufferOfStorage(storages[s]);
  }
  // Work the device's fused window holds on these buffers goes first (the window may read what
  // the program writes, or compute what it reads).
  Window& window = WindowFor(device_);
  {
    std::vector<Buffer*> used(bound_buffers_);
    for (size_t i = 0; i < tensors.size(); ++i)
      if (inputs_[i].kind == InputSig::kTensor) used.push_back(BufferOf(tensors[i]));
    if (window.UsesAny(used.data(), used.size())) window.Cut(CutReason::kCompiledGraph);
  }
  const bool first_replay = !replayed_;
  replayed_ = true;
  std::vector<Binding> params;
  params.reserve(params_.size());
  for (const ParamRecipe& p : params_) {
    switch (p.kind) {
      case ParamRecipe::kInput: {
        Buffer* b = BufferOf(tensors[p.input]);
        if (!b->materialized()) MaterializeOrThrow(b);
        params.emplace_back(b, p.byte_offset, p.dtype, p.dims, p.strides);
        break;
      }
      case ParamRecipe::kConstant: params.emplace_back(p.constant, p.byte_offset, p.dtype, p.dims, p.strides); break;
      case ParamRecipe::kScalar: params.push_back(Binding::Scalar(p.dtype, p.bytes, p.dims)); break;
      case ParamRecipe::kRng: {
        if (first_replay) {  // the capture reserved this draw already: the first call uses it
          params.push_back(Binding::Scalar(DType::kU64, p.bytes, {2}));
          break;
        }
        auto* g = static_cast<TpuGenerator*>(p.generator.get());
        std::pair<uint64_t, uint64_t> state;
        {
          std::lock_guard<std::mutex> lock(g->mutex_);
          state = g->Reserve(p.words);
        }
        const uint64_t words[2] = {state.first, state.second};
        params.push_back(Binding::Scalar(DType::kU64, words, {2}));
        break;
      }
    }
  }
  Queue& queue = DeviceFor(device_).queue();
  for (size_t s = 0; s < storages_.size(); ++s)
    if (storages_[s].kind == StorageRecipe::kCopy) {
      MaterializeOrThrow(sbuf[s]);
      queue.Copy(storages_[s].source, 0, sbuf[s], 0, storages_[s].nbytes, TaskContext("compiled graph constant"));
    }
  std::vector<Binding> results;
  results.reserve(results_.size());
  for (size_t r = 0; r < results_.size(); ++r) {
    Buffer* b = sbuf[results_[r]];
    if (!b->materialized()) MaterializeOrThrow(b);
    results.emplace_back(b, 0, result_types_[r].dtype, result_types_[r].dims);
  }
  TaskContext ctx("compiled graph");
  ctx.thread = ThreadId();
  ctx.origins = origins_;
  bool small = exe_->work() <= Flags().inline_work;
  uint64_t seq = queue.Launch(exe_, params.data(), params.size(), results.data(), results.size(), std::move(ctx), small);
  executions->Add();
  replays->Add();
  if (GetEagerMode() == EagerMode::kDebug) Check(queue.WaitFor(seq));  // debug mode: errors at the call
  py::list out;
  for (const OutputRecipe& o : outputs_) {
    switch (o.kind) {
      case OutputRecipe::kTensor:
        out.append(py::reinterpret_steal<py::object>(
            THPVariable_Wrap(TensorOn(storages[o.storage], o.dtype, o.storage_offset, o.sizes, o.strides))));
        break;
      case OutputRecipe::kOther: out.append(py::reinterpret_steal<py::object>(THPVariable_Wrap(o.other.clone()))); break;
      case OutputRecipe::kValue: out.append(o.value); break;
    }
  }
  return out;
}

std::shared_ptr<CapturedGraph> FinishCapture(CaptureScope& scope, const py::list& args, const py::list& outputs,
                                             const std::string& name) {
  static Counter* captures = GetCounter("compiled_graph_captures");
  scope.Deactivate();
  Window& w = scope.window();
  auto g = std::make_shared<CapturedGraph>();
  g->device_ = scope.device();
  g->name_ = name;
  auto fail = [&](const std::string& why) {
    scope.set_break_reason(why);
    w.Discard();
    TORCH_CHECK(false, "torch_tpu: this graph cannot be captured as one program: ", why);
  };
  // Inputs.
  std::unordered_map<const Buffer*, int> input_of;
  for (size_t i = 0; i < args.size(); ++i) {
    CapturedGraph::InputSig s;
    py::handle h = args[i];
    const at::Tensor* t = TensorArg(h);
    if (!t) {
      s.kind = CapturedGraph::InputSig::kValue;
      s.value = py::reinterpret_borrow<py::object>(h);
    } else {
      s.dtype = t->scalar_type();
      s.sizes.assign(t->sizes().begin(), t->sizes().end());
      s.strides.assign(t->strides().begin(), t->strides().end());
      if (IsTpu(*t)) {
        if (t->device().index() != g->device_)
          fail("argument " + std::to_string(i) + " is on " + t->device().str() + ", the graph on tpu:" +
               std::to_string(g->device_));
        s.kind = CapturedGraph::InputSig::kTensor;
        s.storage_offset = t->storage_offset();
        s.storage_nbytes = static_cast<int64_t>(t->storage().nbytes());
        auto [it, fresh] = input_of.emplace(BufferOf(*t), static_cast<int>(i));
        s.shares = fresh ? -1 : it->second;
      } else if (t->device().is_cpu()) {
        s.kind = CapturedGraph::InputSig::kCpuTensor;
        s.cpu_value = t->clone();
      } else {
        fail("argument " + std::to_string(i) + " is a " + t->device().str() + " tensor");
      }
    }
    g->inputs_.push_back(std::move(s));
  }
  // Storages: written inputs first (their new values are results), then the outputs'.
  std::vector<Window::Pending> pending = w.PendingValues();
  std::unordered_map<const Buffer*, size_t> pending_of;
  for (size_t p = 0; p < pending.size(); ++p) pending_of.emplace(pending[p].buffer, p);
  std::unordered_map<const Buffer*, int> storage_of;
  std::vector<int> result_values;
  auto add_result = [&](int storage, const Window::Pending& p) {
    g->results_.push_back(storage);
    g->result_types_.push_back(p.type);
    result_values.push_back(p.value);
  };
  for (const Window::Pending& p : pending) {
    auto in = input_of.find(p.buffer);
    if (in == input_of.end()) continue;
    CapturedGraph::StorageRecipe r;
    r.kind = CapturedGraph::StorageRecipe::kInput;
    r.input = in->second;
    int s = static_cast<int>(g->storages_.size());
    g->storages_.push_back(std::move(r));
    storage_of.emplace(p.buffer, s);
    add_result(s, p);
  }
  for (size_t o = 0; o < outputs.size(); ++o) {
    CapturedGraph::OutputRecipe out;
    py::handle h = outputs[o];
    const at::Tensor* t = TensorArg(h);
    if (!t || !t->defined()) {
      out.kind = CapturedGraph::OutputRecipe::kValue;
      out.value = py::reinterpret_borrow<py::object>(h);
    } else if (!IsTpu(*t)) {
      out.kind = CapturedGraph::OutputRecipe::kOther;
      out.other = t->detach().clone();
    } else {
      if (t->device().index() != g->device_) fail("output " + std::to_string(o) + " is on " + t->device().str());
      out.kind = CapturedGraph::OutputRecipe::kTensor;
      out.dtype = t->scalar_type();
      out.storage_offset = t->storage_offset();
      out.sizes.assign(t->sizes().begin(), t->sizes().end());
      out.strides.assign(t->strides().begin(), t->strides().end());
      Buffer* b = BufferOf(*t);
      auto known = storage_of.find(b);
      if (known != storage_of.end()) {
        out.storage = known->second;
      } else {
        CapturedGraph::StorageRecipe r;
        r.nbytes = static_cast<int64_t>(t->storage().nbytes());
        auto in = input_of.find(b);
        auto pend = pending_of.find(b);
        if (in != input_of.end()) {
          r.kind = CapturedGraph::StorageRecipe::kInput;
          r.input = in->second;
        } else if (pend != pending_of.end()) {
          r.kind = CapturedGraph::StorageRecipe::kNew;
        } else if (b && scope.Created(b)) {
          r.kind = b->materialized() ? CapturedGraph::StorageRecipe::kCopy : CapturedGraph::StorageRecipe::kFresh;
          if (r.kind == CapturedGraph::StorageRecipe::kCopy) {
            b->Retain();
            g->bound_buffers_.push_back(b);
            r.source = b;
          }
        } else {
          r.kind = CapturedGraph::StorageRecipe::kShared;
          r.shared = t->storage();
        }
        int s = static_cast<int>(g->storages_.size());
        g->storages_.push_back(std::move(r));
        storage_of.emplace(b, s);
        out.storage = s;
        if (pend != pending_of.end() && in == input_of.end()) add_result(s, pending[pend->second]);
      }
    }
    g->outputs_.push_back(std::move(out));
  }
  // What else the graph computed is dead, unless it wrote a storage it did not make.
  for (const Window::Pending& p : pending)
    if (!storage_of.count(p.buffer) && !scope.Created(p.buffer))
      fail("it writes a tensor that is neither one of its inputs nor one of its outputs (a global or a "
           "closure's tensor mutated in place)");
  // The program, and how each of its parameters is bound.
  StatusOr<Window::Program> taken = w.TakeProgram(result_values);
  if (!taken.ok()) fail("recording it failed: " + taken.status().message());
  Window::Program prog = std::move(taken).value();
  for (size_t k = 0; k < prog.params.size(); ++k) {
    Binding& b = prog.params[k];
    CapturedGraph::ParamRecipe r;
    r.byte_offset = b.byte_offset();
    r.dtype = b.dtype();
    r.dims = b.dims();
    r.strides = b.strides();
    if (Buffer* buf = b.buffer()) {
      auto in = input_of.find(buf);
      if (in != input_of.end()) {
        r.kind = CapturedGraph::ParamRecipe::kInput;
        r.input = in->second;
      } else {
        r.kind = CapturedGraph::ParamRecipe::kConstant;
        buf->Retain();
        g->bound_buffers_.push_back(buf);
        r.constant = buf;
      }
    } else {
      r.kind = CapturedGraph::ParamRecipe::kScalar;
      std::memcpy(r.bytes, b.inline_bytes(), sizeof(r.bytes));
      for (const RngDraw& d : prog.rng)
        if (d.param == static_cast<int>(k)) {
          r.kind = CapturedGraph::ParamRecipe::kRng;
          r.generator = d.generator;
          r.words = d.words;
        }
    }
    g->params_.push_back(std::move(r));
  }
  g->origins_ = prog.origins;
  CompileOptions options;
  options.name = "compiled graph";
  StatusOr<ExecutablePtr> exe = Internal("not compiled");
  {
    py::gil_scoped_release release;
    exe = CompileCache::Get().GetOrCompile(*prog.graph, prog.key, GetBackend(), options);
  }
  if (!exe.ok()) ThrowStatus(Internal("compiling the captured graph " + name + " failed: " + exe.status().message()));
  g->exe_ = std::move(exe).value();
  captures->Add();
  return g;
}

void RegisterCaptureBindings(py::module& m) {
  py::class_<CaptureScope> scope(m, "_CaptureScope");
  scope.def(py::init<int, bool>(), py::arg("device"), py::arg("dense") = false)
      .def("break_reason", &CaptureScope::break_reason)
      .def("ops", [](CaptureScope& s) { return s.window().ops(); })
      .def("dump", [](CaptureScope& s) { return s.window().Dump(); })
      .def("discard", [](CaptureScope& s) {
        s.Deactivate();
        s.window().Discard();
      })
      .def("finish", &FinishCapture, py::arg("args"), py::arg("outputs"), py::arg("name"));
  RegisterExportBindings(m, scope);
  py::class_<CapturedGraph, std::shared_ptr<CapturedGraph>>(m, "_CapturedGraph")
      .def("replay", &CapturedGraph::Replay, py::arg("args"))
      .def("mismatch", &CapturedGraph::Mismatch, py::arg("args"))
      .def("text", &CapturedGraph::Text)
      .def_property_readonly("name", &CapturedGraph::name)
      .def_property_readonly("num_params", &CapturedGraph::num_params)
      .def_property_readonly("num_results", &CapturedGraph::num_results)
      .def_property_readonly("num_ops", &CapturedGraph::num_ops);
}

}  // namespace tpu::torch_bridge
