#include "torch/lower/elementwise_util.h"

#include <ATen/EmptyTensor.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>

namespace tpu::torch_bridge {

void CheckOutOverlap(const at::Tensor& out, std::initializer_list<TensorArg> inputs) {
  // (PrepareOut has already refused an output that overlaps itself.)
  for (const TensorArg& a : inputs)
    if (!IsCpuScalar(a.get())) at::assert_no_partial_overlap(out, a.get());
}

at::ScalarType ResultDType(ResultKind kind, at::ScalarType common) {
  switch (kind) {
    case ResultKind::kCommon: return common;
    case ResultKind::kBool: return at::kBool;
    case ResultKind::kFloat:
      return at::isIntegralType(common, /*includeBool=*/true) ? at::typeMetaToScalarType(at::get_default_dtype())
                                                              : common;
  }
  return common;
}

std::optional<at::MemoryFormat> ResultFormat(std::initializer_list<TensorArg> inputs, at::IntArrayRef shape) {
  if (shape.size() != 4 && shape.size() != 5) return std::nullopt;
  for (const TensorArg& a : inputs) {
    const at::Tensor& t = a.get();
    if (IsCpuScalar(t) || t.sizes() != shape) continue;
    return ChannelsLast(t);  // the first full-size input decides, as in TensorIterator
  }
  return std::nullopt;
}

c10::MaybeOwned<at::Tensor> PrepareOut(const char* op, OutArg o, at::IntArrayRef shape, at::ScalarType result,
                      const at::Tensor& like, std::optional<at::MemoryFormat> format) {
  const at::Tensor* out = o.t;
  if (!out || !out->defined()) {
    // Straight to the allocator: this is what the empty() kernel does, minus a trip through the
    // dispatcher on every elementwise op.
    c10::DeviceGuard guard(like.device());
    return c10::MaybeOwned<at::Tensor>::owned(at::detail::empty_generic(
        shape, GetTpuAllocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), result, format));
  }
  TORCH_CHECK(out->device().type() == c10::DeviceType::PrivateUse1, op,
              ": expected the output on the tpu device, got ", out->device());
  TORCH_CHECK(at::canCast(result, out->scalar_type()), "result type ", result,
              " can't be cast to the desired output type ", out->scalar_type());
  // An output whose elements share memory (an expanded view) has no defined result: ATen refuses it.
  at::assert_no_internal_overlap(*out);
  if (out->sizes() != shape) {
    TORCH_CHECK(!o.inplace, "output with shape ", out->sizes(), " doesn't match the broadcast shape ", shape);
    at::native::resize_output(*out, shape);
  }
  return c10::MaybeOwned<at::Tensor>::borrowed(*out);
}

}  // namespace tpu::torch_bridge
