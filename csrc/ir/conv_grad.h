// PyTorch's convolution and its two gradients as StableHLO convolutions (the formulation XLA's
// autodiff uses), built on a Builder. Layouts are PyTorch's: input [N, C, spatial...], weight
// [O, C/groups, kernel...], output [N, O, spatial...]; padding is symmetric per spatial dim.
//   forward:       conv(x, w) with the given strides/padding/dilation and feature groups;
//   input grad:    conv(grad_out dilated by the strides, w reversed with its feature dims swapped),
//                  padded by dilation*(k-1)-padding (the high side also by the rows the forward
//                  windows never reached); this is also the transposed convolution;
//   weight grad:   conv(x with batch and feature swapped, grad_out as the kernel), window strides
//                  = the dilation, rhs dilation = the strides; groups become batch groups.
#pragma once

#include "ir/builder.h"

namespace tpu {

struct ConvParams {
  Dims stride, padding, dilation;  // one entry per spatial dim
  int64_t groups = 1;
};

int ConvForward(Builder& b, int x, int w, const ConvParams& p, DType out);
// `in_spatial`: the spatial sizes of the result (the forward input's, or a transposed
// convolution's output, which includes its output_padding).
int ConvInputGrad(Builder& b, int grad_out, int w, const ConvParams& p, const Dims& in_spatial,
                  DType out);
// `kernel_spatial`: the kernel's spatial sizes.
int ConvWeightGrad(Builder& b, int x, int grad_out, const ConvParams& p, const Dims& kernel_spatial,
                   DType out);

}  // namespace tpu
