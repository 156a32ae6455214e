// The N-d upsampling lowerings (upsample.cc), shared by the 1-d, 2-d and 3-d ops: the spatial
// dims are the last scales.size() dims of the input; the result tensor is already sized (by the
// op's meta function). Each scale is the op's optional scales_* argument for that dim.
#pragma once

#include <ATen/ATen.h>

#include <optional>

namespace tpu::torch_bridge {

using UpsampleScales = c10::SmallVector<std::optional<double>, 3>;

void UpsampleNearestInto(const char* op, const at::Tensor& self, at::IntArrayRef output_size,
                         const UpsampleScales& scales, const at::Tensor& result);
void UpsampleNearestBackwardInto(const char* op, const at::Tensor& grad,
                                 at::IntArrayRef output_size, at::IntArrayRef input_size,
                                 const UpsampleScales& scales, const at::Tensor& result);
// Linear, bilinear and trilinear (align_corners as PyTorch's).
void UpsampleLinearInto(const char* op, const at::Tensor& self, at::IntArrayRef output_size,
                        bool align_corners, const UpsampleScales& scales, const at::Tensor& result);
void UpsampleLinearBackwardInto(const char* op, const at::Tensor& grad, at::IntArrayRef output_size,
                                at::IntArrayRef input_size, bool align_corners,
                                const UpsampleScales& scales, const at::Tensor& result);

}  // namespace tpu::torch_bridge
