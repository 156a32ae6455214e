// Export (torch_tpu/export.py): an ExportedProgram's graph captured as one program (Note [Capture],
// in a dense window: whole tensors as arguments, views as ops) and printed as StableHLO text, with
// the inputs the caller names inlined as constants.
#include <pybind11/stl.h>
#include <torch/csrc/autograd/python_variable.h>

#include <string>
#include <unordered_map>
#include <vector>

#include "ir/printer.h"
#include "torch/deferred/captured_graph.h"
#include "torch/tensor_utils.h"

namespace py = pybind11;

namespace tpu::torch_bridge {
namespace {

const at::Tensor& TensorAt(const py::list& list, size_t i, const char* what) {
  py::handle h = list[i];
  TORCH_CHECK(THPVariable_Check(h.ptr()), "torch_tpu.export: ", what, " ", i, " is not a tensor");
  const at::Tensor& t = THPVariable_Unpack(h.ptr());
  TORCH_CHECK(t.defined() && t.device().type() == c10::DeviceType::PrivateUse1, "torch_tpu.export: ", what, " ", i,
              " is not a tpu tensor");
  return t;
}

std::string HostBytes(const at::Tensor& t) {
  at::Tensor host = ReadToHost(t).contiguous();
  return std::string(static_cast<const char*>(host.data_ptr()), host.numel() * host.element_size());
}

// Binds every input as a whole-tensor parameter, in order (each must own its storage densely).
void BindInputs(CaptureScope& scope, const py::list& inputs) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor& t = TensorAt(inputs, i, "input");
    TORCH_CHECK(CoversStorage(t), "torch_tpu.export: input ", i, " must cover its storage densely");
    if (!BufferOf(t)->materialized()) MaterializeOrThrow(BufferOf(t));
    int p = scope.window().BindWhole(BindingOf(t));
    TORCH_CHECK(p == static_cast<int>(i), "torch_tpu.export: input ", i, " shares a storage with another input");
  }
}

// The captured program's StableHLO text: the results are `outputs` (tensors), the arguments the
// inputs not in `inline_inputs`; inlined inputs, the scalars the ops took and tensors the graph
// made outside its ops become constants. Returns (text, argument -> input index).
std::pair<std::string, std::vector<int>> Export(CaptureScope& scope, const py::list& inputs, const py::list& outputs,
                                                const std::vector<bool>& inline_inputs, const std::string& name) {
  scope.Deactivate();
  Window& w = scope.window();
  TORCH_CHECK(inline_inputs.size() == inputs.size(), "torch_tpu.export: one inline flag per input");
  std::vector<int> results;
  for (size_t o = 0; o < outputs.size(); ++o) results.push_back(w.ReadValue(BindingOf(TensorAt(outputs, o, "output"))));
  std::unordered_map<const Buffer*, int> input_of;
  for (size_t i = 0; i < inputs.size(); ++i) input_of.emplace(BufferOf(TensorAt(inputs, i, "input")), static_cast<int>(i));
  StatusOr<Window::Program> taken = w.TakeProgram(results);
  if (!taken.ok()) ThrowStatus(Internal("torch_tpu.export: recording the program failed: " + taken.status().message()));
  Window::Program prog = std::move(taken).value();
  TORCH_CHECK(prog.rng.empty(), "torch_tpu.export: the program draws random numbers (a random op in eval mode?); "
              "an exported StableHLO program has no generator state to draw from");
  std::vector<ConstantParam> constants;
  std::vector<int> args;
  for (size_t k = 0; k < prog.params.size(); ++k) {
    const Binding& b = prog.params[k];
    if (!b.buffer()) {
      int64_t n = b.NumElements() * DTypeSize(b.dtype());
      constants.push_back(ConstantParam{static_cast<int>(k), std::string(static_cast<const char*>(b.inline_bytes()), n)});
      continue;
    }
    auto in = input_of.find(b.buffer());
    if (in != input_of.end() && !inline_inputs[in->second]) {
      args.push_back(in->second);
      continue;
    }
    if (in != input_of.end()) {
      constants.push_back(ConstantParam{static_cast<int>(k), HostBytes(TensorAt(inputs, in->second, "input"))});
      continue;
    }
    // A tensor the graph holds (a constant copied to the device while tracing): its bytes now.
    TORCH_CHECK(b.CoversBuffer(), "torch_tpu.export: internal error: a partial binding of a constant");
    std::string bytes(b.NumElements() * DTypeSize(b.dtype()), '\0');
    Check(DeviceFor(scope.device()).queue().Read(b.buffer(), 0, static_cast<int64_t>(bytes.size()), bytes.data()));
    constants.push_back(ConstantParam{static_cast<int>(k), std::move(bytes)});
  }
  StatusOr<std::string> text = PrintStableHlo(*prog.graph, name, constants);
  if (!text.ok()) ThrowStatus(Internal("torch_tpu.export: " + text.status().message()));
  return {std::move(text).value(), args};
}

}  // namespace

void RegisterExportBindings(py::module& m, py::class_<CaptureScope>& scope) {
  scope.def("bind_inputs", &BindInputs, py::arg("inputs"))
      .def("export", &Export, py::arg("inputs"), py::arg("outputs"), py::arg("inline_inputs"), py::arg("name"));
}

}  // namespace tpu::torch_bridge
