#include "ir/conv_grad.h"

namespace tpu {
namespace {

int SpatialRank(const ConvParams& p) { return static_cast<int>(p.stride.size()); }

}  // namespace

int ConvForward(Builder& b, int x, int w, const ConvParams& p, DType out) {
  ConvolutionSpec s = ConvolutionSpec::Nchw(SpatialRank(p));
  s.window_strides = p.stride;
  s.padding_low = s.padding_high = p.padding;
  s.rhs_dilation = p.dilation;
  s.feature_group_count = p.groups;
  return b.Convolution(x, w, s, out);
}

int ConvInputGrad(Builder& b, int grad_out, int w, const ConvParams& p, const Dims& in_spatial,
                  DType out) {
  int n = SpatialRank(p);
  const TensorType wt = b.TypeOf(w);  // copies: the builder's type table grows below
  const TensorType gt = b.TypeOf(grad_out);
  if (wt.rank() != n + 2 || gt.rank() != n + 2 || static_cast<int>(in_spatial.size()) != n)
    return b.Convolution(grad_out, w, ConvolutionSpec::Nchw(n), out);  // reports the misuse
  ConvolutionSpec s = ConvolutionSpec::Nchw(n);
  s.lhs_dilation = p.stride;
  s.rhs_dilation = p.dilation;
  for (int d = 0; d < n; ++d) {
    int64_t ext = p.dilation[d] * (wt.dims[2 + d] - 1);
    int64_t lo = ext - p.padding[d];
    int64_t dilated = (gt.dims[2 + d] - 1) * p.stride[d] + 1;
    s.padding_low[d] = lo;
    s.padding_high[d] = in_spatial[d] - dilated - lo + ext;
  }
  Dims spatial;
  for (int d = 0; d < n; ++d) spatial.push_back(2 + d);
  int kernel = w;
  if (p.groups == 1) {
    // The weight's input features are the result's features: swap the roles, no copy.
    s.dn.kernel_output_feature = 1;
    s.dn.kernel_input_feature = 0;
  } else {
    // [O, C/G, k] -> [G, O/G, C/G, k] -> [G, C/G, O/G, k] -> [C, O/G, k]
    int64_t g = p.groups, o = wt.dims[0], cg = wt.dims[1];
    Dims split{g, o / g, cg}, perm{0, 2, 1}, merged{g * cg, o / g};
    for (int d = 0; d < n; ++d) {
      split.push_back(wt.dims[2 + d]);
      merged.push_back(wt.dims[2 + d]);
      perm.push_back(3 + d);
    }
    kernel = b.Reshape(b.Transpose(b.Reshape(w, split), perm), merged);
    s.feature_group_count = g;
  }
  kernel = b.Reverse(kernel, spatial);
  return b.Convolution(grad_out, kernel, s, out);
}

int ConvWeightGrad(Builder& b, int x, int grad_out, const ConvParams& p, const Dims& kernel_spatial,
                   DType out) {
  int n = SpatialRank(p);
  const TensorType xt = b.TypeOf(x);
  const TensorType gt = b.TypeOf(grad_out);
  if (xt.rank() != n + 2 || gt.rank() != n + 2 || static_cast<int>(kernel_spatial.size()) != n)
    return b.Convolution(x, grad_out, ConvolutionSpec::Nchw(n), out);  // reports the misuse
  ConvolutionSpec s = ConvolutionSpec::Nchw(n);
  // x: batch is its feature dim C, features its batch N; grad_out: [N (in), O (out), spatial];
  // result [O, C/G, k]: batch (C/G) is dim 1, features (O) dim 0.
  s.dn.input_batch = 1;
  s.dn.input_feature = 0;
  s.dn.kernel_input_feature = 0;
  s.dn.kernel_output_feature = 1;
  s.dn.output_batch = 1;
  s.dn.output_feature = 0;
  s.window_strides = p.dilation;
  s.rhs_dilation = p.stride;
  s.batch_group_count = p.groups;
  for (int d = 0; d < n; ++d) {
    // Exactly kernel_spatial[d] window positions: the high padding drops input rows that no
    // forward window reached.
    int64_t reach = (gt.dims[2 + d] - 1) * p.stride[d] + 1;
    s.padding_low[d] = p.padding[d];
    s.padding_high[d] =
        (kernel_spatial[d] - 1) * p.dilation[d] + reach - xt.dims[2 + d] - p.padding[d];
  }
  return b.Convolution(x, grad_out, s, out);
}

}  // namespace tpu
