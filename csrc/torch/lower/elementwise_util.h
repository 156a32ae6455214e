// Shared machinery of the elementwise lowerings: TensorIterator-style type promotion and
// broadcasting, computation in "opmath" (float32 for bfloat16/float16, as PyTorch's CPU kernels
// do), and the functional / in-place / out= variants from one definition.
#pragma once

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/native/TypeProperties.h>

#include "torch/lower/context.h"
#include "torch/tensor_utils.h"

namespace tpu::torch_bridge {

enum class ResultKind {
  kCommon,  // result dtype = promoted dtype
  kBool,    // comparisons and predicates
  kFloat,   // integer inputs give the default float dtype (true division, exp, sqrt...)
};

inline at::ScalarType OpMath(at::ScalarType t) {
  return (t == at::kBFloat16 || t == at::kHalf) ? at::kFloat : t;
}

inline Dims ToDims(at::IntArrayRef s) { return Dims(s.begin(), s.end()); }

// A borrowed tensor argument. Copying an at::Tensor that Python owns is not free: the copy takes
// a reference to the Python object too, which needs the GIL. The eager path passes pointers.
struct TensorArg {
  TensorArg(const at::Tensor& t) : t(&t) {}  // NOLINT: implicit, so call sites read {self, other}
  const at::Tensor& get() const { return *t; }
  const at::Tensor* t;
};

// The IR values of an op's inputs (inline storage: no allocation on the eager path).
using ValueList = c10::SmallVector<int, 4>;

// A Python number as a wrapped-number tensor, so promotion treats it as PyTorch does.
inline at::Tensor WrapScalar(const at::Scalar& s) {
  at::Tensor t = at::scalar_to_tensor(s);
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

// Where a result goes: a new tensor, `self` (in-place), or an out= tensor.
struct OutArg {
  const at::Tensor* t = nullptr;
  bool inplace = false;
};
inline OutArg Functional() { return {}; }
inline OutArg Inplace(const at::Tensor& self) { return {&self, true}; }
inline OutArg Out(const at::Tensor& out) { return {&out, false}; }

// Validates/allocates the output of an elementwise op like TensorIterator: broadcast shape,
// can_cast(result, out dtype) for out=/in-place, and an in-place output that must not broadcast.
// An in-place/out= tensor comes back borrowed (see TensorArg for why copies cost).
// A new output takes `format` (Note [Memory formats], context.h; none: contiguous).
c10::MaybeOwned<at::Tensor> PrepareOut(const char* op, OutArg out, at::IntArrayRef shape, at::ScalarType result,
                      const at::Tensor& like, std::optional<at::MemoryFormat> format = std::nullopt);
// The layout TensorIterator gives an elementwise result: that of the first input of the full
// broadcast shape, when it is channels-last (Note [Memory formats]).
std::optional<at::MemoryFormat> ResultFormat(std::initializer_list<TensorArg> inputs, at::IntArrayRef shape);

at::ScalarType ResultDType(ResultKind kind, at::ScalarType common);

// TensorIterator's memory-overlap check for an in-place/out= result prepared by PrepareOut (which
// refuses one that writes an element twice): it must not partially overlap an input. Same
// messages as CPU.
void CheckOutOverlap(const at::Tensor& out, std::initializer_list<TensorArg> inputs);

// What LowerElementwise returns: the new tensor, or the in-place/out= tensor borrowed, which is
// copied only if the caller keeps it (the in-place and out= wrappers return their own reference).
class LoweredResult {
 public:
  explicit LoweredResult(c10::MaybeOwned<at::Tensor> t) : t_(std::move(t)) {}
  operator at::Tensor() && { return *std::move(t_); }  // NOLINT: implicit, so `return Lower...(...)` reads plainly

 private:
  c10::MaybeOwned<at::Tensor> t_;
};

// The complex path (Note [Complex tensors], complex.cc), taken when the promoted dtype is complex.
LoweredResult LowerComplexElementwise(const char* op, std::initializer_list<TensorArg> inputs, OutArg out,
                                      const at::Scalar* alpha);

// fn(Lowering&, const ValueList& inputs in compute dtype, DType compute) -> value (any dtype).
template <typename F>
LoweredResult LowerElementwise(const char* op, std::initializer_list<TensorArg> inputs, OutArg out,
                            ResultKind kind, F&& fn, std::optional<at::ScalarType> compute_override = {}) {
  const TensorArg* ins = inputs.begin();
  size_t n = inputs.size();
  const at::Tensor* device_like = nullptr;
  for (const TensorArg& a : inputs) {
    const at::Tensor& t = a.get();
    TORCH_CHECK(t.defined(), op, ": got an undefined tensor argument");
    if (t.device().type() == c10::DeviceType::PrivateUse1 && !device_like) device_like = &t;
  }
  if (!device_like && out.t) device_like = out.t;
  TORCH_CHECK(device_like, op, ": no tensor argument is on the tpu device");
  at::ScalarType common = ins[0].get().scalar_type();
  if (n == 2) common = at::result_type(ins[0].get(), ins[1].get());
  if (n >= 3) {
    // Fold pairwise through ResultTypeState semantics.
    at::native::ResultTypeState state = {};
    for (const TensorArg& a : inputs) state = at::native::update_result_type_state(a.get(), state);
    common = at::native::result_type(state);
  }
  if (C10_UNLIKELY(at::isComplexType(common))) return LowerComplexElementwise(op, inputs, out, nullptr);
  at::DimVector shape(ins[0].get().sizes());
  for (size_t i = 1; i < n; ++i) shape = at::infer_size_dimvector(shape, ins[i].get().sizes());
  at::ScalarType result = ResultDType(kind, common);
  c10::MaybeOwned<at::Tensor> result_t =
      PrepareOut(op, out, shape, result, *device_like, out.t ? std::nullopt : ResultFormat(inputs, shape));
  if (result_t->numel() == 0) return LoweredResult(std::move(result_t));
  if (out.t) CheckOutOverlap(*result_t, inputs);
  at::ScalarType compute = compute_override.value_or(
      kind == ResultKind::kFloat && !at::isFloatingType(common) ? result : common);
  compute = OpMath(compute);
  Lowering l(op);
  Dims dims = ToDims(shape);
  ValueList vals;
  for (const TensorArg& a : inputs) {
    const at::Tensor& t = a.get();
    int v = IsCpuScalar(t) ? l.Scalar(t.item(), compute) : l.Input(t, compute);
    vals.push_back(l.b().BroadcastTo(v, dims));
  }
  int r = fn(l, vals, ToDType(compute));
  l.OutputBorrowed(r, *result_t);
  l.Run();
  return LoweredResult(std::move(result_t));
}

}  // namespace tpu::torch_bridge
