// Windowed ops: convolution and reduce_window, with StableHLO's attributes.
//
// They are stored in Attrs (so hashing, equality and the op table stay uniform) and decoded here:
//   convolution: a = window_strides, b = padding (low, high per spatial dim, interleaved),
//                c = lhs_dilation, d = rhs_dilation, e = dimension numbers (input batch, input
//                feature, input spatial..., kernel input feature, kernel output feature, kernel
//                spatial..., output batch, output feature, output spatial...),
//                i = feature_group_count, kind = batch_group_count
//   reduce_window / arg_reduce_window: a = window_dimensions, b = window_strides, c = padding
//                (low, high per dim, interleaved), d = base_dilations, e = window_dilations,
//                kind = ReduceKind (reduce_window)
#pragma once

#include <string>

#include "ir/graph.h"

namespace tpu {

struct ConvDimensionNumbers {
  int64_t input_batch = 0, input_feature = 1;
  Dims input_spatial;
  int64_t kernel_input_feature = 1, kernel_output_feature = 0;
  Dims kernel_spatial;
  int64_t output_batch = 0, output_feature = 1;
  Dims output_spatial;
};

struct ConvolutionSpec {
  Dims window_strides, padding_low, padding_high, lhs_dilation, rhs_dilation;
  ConvDimensionNumbers dn;
  int64_t feature_group_count = 1;
  int64_t batch_group_count = 1;

  int spatial_rank() const { return static_cast<int>(dn.input_spatial.size()); }
  // PyTorch's layout for `n` spatial dims: [b, f, 0, 1..]x[o, i, 0, 1..]->[b, f, 0, 1..], with
  // unit strides/dilations and no padding.
  static ConvolutionSpec Nchw(int n);
  Attrs ToAttrs() const;
  static ConvolutionSpec FromAttrs(const Attrs& a);
};

struct WindowSpec {
  Dims dimensions, strides, padding_low, padding_high, base_dilations, window_dilations;

  // A window of `dims` (one entry per operand dim), unit strides/dilations, no padding.
  static WindowSpec Of(const Dims& dims);
  Attrs ToAttrs() const;
  static WindowSpec FromAttrs(const Attrs& a);
};

// Output size of one windowed dimension (StableHLO's shape formula; 0 when the window does not
// fit). Dilations and strides must be >= 1.
int64_t WindowOutputSize(int64_t in, int64_t base_dilation, int64_t pad_low, int64_t pad_high,
                         int64_t window, int64_t window_dilation, int64_t stride);

// Result shapes, or an error message (empty on success) for invalid attributes.
std::string ConvolutionShape(const TensorType& lhs, const TensorType& rhs, const ConvolutionSpec& s,
                             Dims* out);
std::string ReduceWindowShape(const TensorType& x, const WindowSpec& w, Dims* out);

}  // namespace tpu
