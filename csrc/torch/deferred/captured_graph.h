// CapturedGraph: a captured graph's program and the recipe that binds a call's arguments to it
// (Note [Capture] in capture.h).
#pragma once

#include <ATen/ATen.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <vector>

#include "torch/deferred/capture.h"

namespace tpu::torch_bridge {

class CapturedGraph;

// Turns the scope's recording into a CapturedGraph: `args` are the graph's inputs (the call's
// arguments, tensors or Python values), `outputs` what the graph returned (flat). Throws on a
// graph that cannot be replayed (the scope's break_reason says why); the scope is deactivated.
std::shared_ptr<CapturedGraph> FinishCapture(CaptureScope& scope, const pybind11::list& args,
                                             const pybind11::list& outputs, const std::string& name);

class CapturedGraph {
 public:
  // The outputs of one call, or None when `args` do not match the capture (no work done).
  pybind11::object Replay(const pybind11::list& args);
  // Why `args` do not match the capture ("" when they do).
  std::string Mismatch(const pybind11::list& args) const;
  std::string Text() const;  // the program as StableHLO text
  const std::string& name() const { return name_; }
  int num_params() const;
  int num_results() const;
  int64_t num_ops() const;

  struct InputSig;
  struct ParamRecipe;
  struct StorageRecipe;
  struct OutputRecipe;

 private:
  friend std::shared_ptr<CapturedGraph> FinishCapture(CaptureScope&, const pybind11::list&, const pybind11::list&,
                                                      const std::string&);
  std::string MismatchOf(const pybind11::list& args, std::vector<at::Tensor>* tensors) const;

  int device_ = 0;
  std::string name_;
  ExecutablePtr exe_;
  std::vector<InputSig> inputs_;
  std::vector<ParamRecipe> params_;
  std::vector<StorageRecipe> storages_;
  std::vector<int> results_;  // storage index written by each program result
  std::vector<TensorType> result_types_;
  std::vector<OutputRecipe> outputs_;
  std::vector<Buffer*> bound_buffers_;  // constants the launches bind (held)
  std::shared_ptr<std::vector<OpOrigin>> origins_;
  bool replayed_ = false;  // the first replay is the capture's own call

 public:
  CapturedGraph();
  ~CapturedGraph();
};

void RegisterCaptureBindings(pybind11::module& m);
// export.cc: the scope's bind_inputs() and export() (torch_tpu/export.py).
void RegisterExportBindings(pybind11::module& m, pybind11::class_<CaptureScope>& scope);

}  // namespace tpu::torch_bridge
