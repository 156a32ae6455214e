// Shared by the convolution kernels: operands viewed in one canonical order, whatever the op's
// dimension numbers say (a permutation of a strided view, no copy).
//   lhs -> [batch, feature, spatial...]   rhs -> [output feature, input feature, spatial...]
//   out -> [batch, feature, spatial...]
#pragma once

#include <algorithm>
#include <vector>

#include "ir/window.h"
#include "runtime/host/kernels.h"

namespace tpu::host {

inline View Permuted(const View& v, int64_t first, int64_t second, const Dims& rest) {
  View r = v;
  r.dims.clear();
  r.strides.clear();
  auto take = [&](int64_t d) {
    r.dims.push_back(v.dims[d]);
    r.strides.push_back(v.strides[d]);
  };
  take(first);
  take(second);
  for (int64_t d : rest) take(d);
  return r;
}

inline View CanonicalLhs(const ConvolutionSpec& s, const View& v) {
  return Permuted(v, s.dn.input_batch, s.dn.input_feature, s.dn.input_spatial);
}
inline View CanonicalRhs(const ConvolutionSpec& s, const View& v) {
  return Permuted(v, s.dn.kernel_output_feature, s.dn.kernel_input_feature, s.dn.kernel_spatial);
}
inline View CanonicalOut(const ConvolutionSpec& s, const View& v) {
  return Permuted(v, s.dn.output_batch, s.dn.output_feature, s.dn.output_spatial);
}

// `v` copied contiguously (in its own order) in dtype `t`.
inline View Contiguous(const View& v, DType t, std::vector<char>& storage) {
  View dst{nullptr, t, v.dims, ContiguousStrides(v.dims)};
  storage.resize(std::max<int64_t>(1, v.NumElements()) * DTypeSize(t));
  dst.data = storage.data();
  (void)CopyView(v, dst);
  return dst;
}

// Per spatial dim d of a convolution: for (output coordinate y, window position k), at [y * k_size
// + k], the lhs coordinate it reads, or -1 (padding, or between the elements of a dilated lhs).
inline std::vector<int64_t> WindowCoordinates(const ConvolutionSpec& s, int d, int64_t in, int64_t out,
                                              int64_t k) {
  std::vector<int64_t> t(out * k, -1);
  for (int64_t y = 0; y < out; ++y)
    for (int64_t j = 0; j < k; ++j) {
      int64_t pos = y * s.window_strides[d] + j * s.rhs_dilation[d] - s.padding_low[d];
      int64_t ld = s.lhs_dilation[d];
      if (pos >= 0 && pos % ld == 0 && pos / ld < in) t[y * k + j] = pos / ld;
    }
  return t;
}

// StableHLO's convolution as plain loops (convolution_ref.cc).
Status ReferenceConvolution(const ConvolutionSpec& s, const View& lhs, const View& rhs,
                            const View& out);

}  // namespace tpu::host
