// searchsorted and bucketize (every overload: a tensor or scalar value, right/side, sorter,
// out_int32, out=). Argument checks are ATen's own (BucketizationUtils.h); the search is CPU's
// binary search run for a fixed number of rounds (search_util.h), so positions agree with CPU's
// for any boundaries, NaN and unsorted ones included. Values and boundaries are compared in
// their promoted dtype, as on CPU.
#include <ATen/native/BucketizationUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "torch/lower/search_util.h"

namespace tpu::torch_bridge {
namespace {

at::ScalarType CommonType(const at::Tensor& boundaries, const at::Tensor& input) {
  at::native::ResultTypeState state = {};
  state = at::native::update_result_type_state(boundaries, state);
  state = at::native::update_result_type_state(input, state);
  return at::native::result_type(state);
}

at::Tensor& SearchsortedOut(const at::Tensor& boundaries, const at::Tensor& input, bool out_int32, bool right,
                            std::optional<c10::string_view> side, const std::optional<at::Tensor>& sorter_opt,
                            at::Tensor& result) {
  at::Tensor sorter = sorter_opt.has_value() ? *sorter_opt : at::Tensor();
  at::native::searchsorted_pre_check(boundaries, input, result, out_int32, right, side, sorter);
  at::native::resize_output(result, input.sizes());
  bool is_right = side.has_value() ? *side == "right" : right;
  if (input.numel() == 0) return result;
  c10::DeviceGuard guard(boundaries.device());

  at::ScalarType ct = CommonType(boundaries, input);
  TORCH_CHECK_NOT_IMPLEMENTED(ct != at::kBool && !at::isComplexType(ct), "\"searchsorted_out_cpu\" not implemented for '",
                              toString(ct), "'");
  at::ScalarType cmp = at::isFloatingType(ct) ? OpMath(ct) : ct;  // bf16/f16 compare exactly as f32
  int64_t n = boundaries.size(-1);
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < boundaries.dim(); ++d) rows *= boundaries.size(d);
  int64_t k = input.numel() / rows;
  Lowering l("aten::searchsorted");
  Builder& b = l.b();
  int values = b.Reshape(b.ConvertIfNeeded(TensorOrScalar(l, input, ct), ToDType(cmp)), {rows, k});
  int r;
  if (n == 0) {
    r = b.BroadcastTo(b.Constant(0, DType::kI64), {rows, k});
  } else {
    int seq = b.Reshape(b.ConvertIfNeeded(l.Input(boundaries, ct), ToDType(cmp)), {rows, n});
    if (sorter.defined()) seq = GatherAlongDim(b, seq, b.Reshape(l.Input(sorter), {rows, n}), 1, /*checked=*/false);
    // Lower bound goes right while !(seq >= value); upper bound while !(seq > value).
    CompareDirection dir = is_right ? CompareDirection::kGT : CompareDirection::kGE;
    r = BinarySearch(b, seq, values, [dir](Builder& b, int probe, int value) {
      return b.Unary(OpCode::kNot, b.Compare(dir, probe, value));
    });
  }
  l.Output(b.Reshape(r, ToDims(result.sizes())), result);
  l.Run();
  return result;
}

// The result at the values' size (growing an empty tensor would wait for the device queue).
at::Tensor NewResult(const at::Tensor& values, bool out_int32) {
  return at::empty(values.sizes(), values.options().dtype(out_int32 ? at::kInt : at::kLong));
}

at::Tensor searchsorted_tensor(const at::Tensor& boundaries, const at::Tensor& self, bool out_int32, bool right,
                               std::optional<c10::string_view> side, const std::optional<at::Tensor>& sorter) {
  at::Tensor result = NewResult(self, out_int32);
  return SearchsortedOut(boundaries, self, out_int32, right, side, sorter, result);
}
at::Tensor& searchsorted_tensor_out(const at::Tensor& boundaries, const at::Tensor& self, bool out_int32, bool right,
                                    std::optional<c10::string_view> side, const std::optional<at::Tensor>& sorter,
                                    at::Tensor& out) {
  return SearchsortedOut(boundaries, self, out_int32, right, side, sorter, out);
}
at::Tensor searchsorted_scalar(const at::Tensor& boundaries, const at::Scalar& self, bool out_int32, bool right,
                               std::optional<c10::string_view> side, const std::optional<at::Tensor>& sorter) {
  at::Tensor value = at::native::searchsorted_scalar_tensor(self, boundaries.device());
  at::Tensor result = NewResult(value, out_int32);
  return SearchsortedOut(boundaries, value, out_int32, right, side, sorter, result);
}
at::Tensor& searchsorted_scalar_out(const at::Tensor& boundaries, const at::Scalar& self, bool out_int32, bool right,
                                    std::optional<c10::string_view> side, const std::optional<at::Tensor>& sorter,
                                    at::Tensor& out) {
  at::Tensor value = at::native::searchsorted_scalar_tensor(self, boundaries.device());
  return SearchsortedOut(boundaries, value, out_int32, right, side, sorter, out);
}

void CheckBucketizeBoundaries(const at::Tensor& boundaries) {
  TORCH_CHECK(boundaries.dim() == 1, "boundaries tensor must be 1 dimension, but got dim(", boundaries.dim(), ")");
}
at::Tensor& bucketize_tensor_out(const at::Tensor& self, const at::Tensor& boundaries, bool out_int32, bool right,
                                 at::Tensor& out) {
  CheckBucketizeBoundaries(boundaries);
  return SearchsortedOut(boundaries, self, out_int32, right, std::nullopt, std::nullopt, out);
}
at::Tensor bucketize_tensor(const at::Tensor& self, const at::Tensor& boundaries, bool out_int32, bool right) {
  at::Tensor result = NewResult(self, out_int32);
  return bucketize_tensor_out(self, boundaries, out_int32, right, result);
}
at::Tensor bucketize_scalar(const at::Scalar& self, const at::Tensor& boundaries, bool out_int32, bool right) {
  return bucketize_tensor(at::native::searchsorted_scalar_tensor(self, boundaries.device()), boundaries, out_int32,
                          right);
}

at::Tensor& bucketize_scalar_out(const at::Scalar& self, const at::Tensor& boundaries, bool out_int32, bool right,
                                 at::Tensor& out) {
  return bucketize_tensor_out(at::native::searchsorted_scalar_tensor(self, boundaries.device()), boundaries, out_int32,
                              right, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("searchsorted.Tensor", searchsorted_tensor);
  m.impl("searchsorted.Tensor_out", searchsorted_tensor_out);
  m.impl("searchsorted.Scalar", searchsorted_scalar);
  m.impl("searchsorted.Scalar_out", searchsorted_scalar_out);
  m.impl("bucketize.Tensor", bucketize_tensor);
  m.impl("bucketize.Tensor_out", bucketize_tensor_out);
  m.impl("bucketize.Scalar", bucketize_scalar);
  m.impl("bucketize.Scalar_out", bucketize_scalar_out);
}

}  // namespace tpu::torch_bridge
