// Lowering: how an ATen kernel turns one op into IR and hands it to the execution policy.
//
//   Lowering l("aten::add.out");
//   int a = l.Input(self), b = l.Input(other);
//   l.Output(l.b().Binary(OpCode::kAdd, a, b), out);
//   l.Run();
//
// Input() binds a device tensor's strided view as a parameter; Scalar() passes a number as a
// rank-0 parameter (never a constant, so a changing learning rate does not recompile); Output()
// binds a result to a tensor's view (converting to its dtype). Run() fingerprints the graph,
// gets an Executable from the compile cache and applies the eager mode: strict enqueues and
// returns, debug runs it synchronously and raises at the user's line.
#pragma once

#include <optional>

#include <ATen/ATen.h>
#include <c10/util/MaybeOwned.h>
#include <c10/util/SmallVector.h>

#include <vector>

#include "ir/builder.h"
#include "runtime/device.h"
#include "torch/deferred/window.h"

namespace tpu::torch_bridge {

enum class EagerMode : int { kStrict = 0, kDebug = 1, kFused = 2 };
EagerMode GetEagerMode();
void SetEagerMode(EagerMode mode);

class Lowering {
 public:
  // `op` must outlive the process (a string literal).
  explicit Lowering(const char* op);
  ~Lowering();
  Lowering(const Lowering&) = delete;
  Lowering& operator=(const Lowering&) = delete;
  Builder& b() { return builder_; }

  int Input(const at::Tensor& t);
  // `t` converted to `dtype` (a no-op when it already is).
  int Input(const at::Tensor& t, at::ScalarType dtype);
  int Scalar(const at::Scalar& s, at::ScalarType dtype);
  int ScalarU64Pair(uint64_t a, uint64_t b);  // ui64[2] parameter (rng state)
  // A random op's ui64[2] {seed, offset} parameter, reserved from `gen` for `words` values (the
  // caller holds gen's lock); a compiled graph reserves it again at each replay (capture.h).
  int RngState(c10::GeneratorImpl* gen, std::pair<uint64_t, uint64_t> state, int64_t words);
  void Output(int value, const at::Tensor& out);
  // As Output, without taking a reference: `out` must outlive Run(). (Copying a tensor Python
  // owns takes the GIL; the elementwise path writes into `self` without a copy.)
  void OutputBorrowed(int value, const at::Tensor& out);
  // Record the user's source line now (ops whose errors only show when the program runs).
  void CaptureLocation();
  // Whether value v is a number the host passed (Scalar()), possibly broadcast or converted:
  // its value was known, and checked, when the op was called.
  bool IsHostScalar(int v) const;
  // b().Check(x, ok, kind), with the user's line captured for its error (Note [Check op]).
  int Checked(int x, int ok, CheckKind kind, const std::string& message = {});
  // The outputs are computed for the op's effect (a check) and nobody may read them: a fused
  // window keeps them as its results until it is cut, where it would drop an unheld value
  // (Window::KeepUntilCut).
  void ForEffect() { for_effect_ = true; }
  void Run();

 private:
  int AddParam(const TensorType& type, Binding binding);
  void RunInWindow(const Graph& graph);
  void AddOutput(int value, c10::MaybeOwned<at::Tensor> out);
  const char* op_;
  Builder& builder_;  // from a per-thread pool: reused across ops, so building costs no allocation
  // Inline storage: a typical op binds a few tensors, and the eager path must not allocate.
  c10::SmallVector<Binding, 4> params_;
  c10::SmallVector<std::pair<int, c10::MaybeOwned<at::Tensor>>, 2> outputs_;
  c10::SmallVector<RngDraw, 1> rng_;
  int device_ = -1;
  bool for_effect_ = false;
  std::string location_;
};

// Result helpers for kernels.
at::Tensor EmptyLike(at::IntArrayRef sizes, at::ScalarType dtype, const at::Tensor& like,
                     std::optional<at::MemoryFormat> format = std::nullopt);
// Note [Memory formats]: PyTorch's CPU kernels give a result the channels-last layout of the
// input it follows (TensorIterator: the first full-size input; convolution: the input or the
// weight; batch norm: the input), and models rely on it staying so from layer to layer
// (`model.to(memory_format=torch.channels_last)`). ChannelsLast(t): that format when `t` (4-d
// or 5-d) suggests it, else none (the default, contiguous).
std::optional<at::MemoryFormat> ChannelsLast(const at::Tensor& t);
// Resizes an out= tensor as ATen does (warning-free when empty) and checks its device.
void ResizeOut(const at::Tensor& out, at::IntArrayRef sizes);
void CheckSameDevice(const char* op, std::initializer_list<const at::Tensor*> tensors);
// Whether `t` is a CPU 0-dim tensor that ATen lets stand in for a scalar.
inline bool IsCpuScalar(const at::Tensor& t) { return t.defined() && t.device().is_cpu() && t.dim() == 0; }
// A tensor argument on the device or a CPU scalar tensor, as an IR value of `dtype`.
int TensorOrScalar(Lowering& l, const at::Tensor& t, at::ScalarType dtype);

}  // namespace tpu::torch_bridge
