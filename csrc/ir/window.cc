#include "ir/window.h"

#include <algorithm>

namespace tpu {
namespace {

Dims Ones(int n) { return Dims(static_cast<size_t>(n), int64_t{1}); }

Dims Interleave(const Dims& lo, const Dims& hi) {
  Dims r;
  for (size_t i = 0; i < lo.size() && i < hi.size(); ++i) {
    r.push_back(lo[i]);
    r.push_back(hi[i]);
  }
  return r;
}

void Split(const Dims& p, Dims* lo, Dims* hi) {
  lo->clear();
  hi->clear();
  for (size_t i = 0; i + 1 < p.size(); i += 2) {
    lo->push_back(p[i]);
    hi->push_back(p[i + 1]);
  }
}

bool AllPositive(const Dims& v) {
  return std::all_of(v.begin(), v.end(), [](int64_t x) { return x >= 1; });
}

// Whether `dims` (plus the `extra` single dims) name each of [0, rank) exactly once.
bool IsPermutation(int rank, const Dims& dims, std::initializer_list<int64_t> extra) {
  std::vector<bool> seen(rank, false);
  auto use = [&](int64_t d) {
    if (d < 0 || d >= rank || seen[d]) return false;
    seen[d] = true;
    return true;
  };
  for (int64_t d : extra)
    if (!use(d)) return false;
  for (int64_t d : dims)
    if (!use(d)) return false;
  return static_cast<int>(dims.size() + extra.size()) == rank;
}

}  // namespace

ConvolutionSpec ConvolutionSpec::Nchw(int n) {
  ConvolutionSpec s;
  s.window_strides = s.lhs_dilation = s.rhs_dilation = Ones(n);
  s.padding_low = s.padding_high = Dims(static_cast<size_t>(n), int64_t{0});
  for (int i = 0; i < n; ++i) {
    s.dn.input_spatial.push_back(2 + i);
    s.dn.kernel_spatial.push_back(2 + i);
    s.dn.output_spatial.push_back(2 + i);
  }
  return s;
}

Attrs ConvolutionSpec::ToAttrs() const {
  Attrs a;
  a.a = window_strides;
  a.b = Interleave(padding_low, padding_high);
  a.c = lhs_dilation;
  a.d = rhs_dilation;
  a.e = {dn.input_batch, dn.input_feature};
  a.e.insert(a.e.end(), dn.input_spatial.begin(), dn.input_spatial.end());
  a.e.push_back(dn.kernel_input_feature);
  a.e.push_back(dn.kernel_output_feature);
  a.e.insert(a.e.end(), dn.kernel_spatial.begin(), dn.kernel_spatial.end());
  a.e.push_back(dn.output_batch);
  a.e.push_back(dn.output_feature);
  a.e.insert(a.e.end(), dn.output_spatial.begin(), dn.output_spatial.end());
  a.i = feature_group_count;
  a.kind = batch_group_count;
  return a;
}

ConvolutionSpec ConvolutionSpec::FromAttrs(const Attrs& a) {
  ConvolutionSpec s;
  s.window_strides = a.a;
  Split(a.b, &s.padding_low, &s.padding_high);
  s.lhs_dilation = a.c;
  s.rhs_dilation = a.d;
  int64_t n = static_cast<int64_t>(a.e.size()) / 3 - 2;
  if (n >= 0 && static_cast<int64_t>(a.e.size()) == 3 * (n + 2)) {
    const int64_t* e = a.e.data();
    s.dn.input_batch = e[0];
    s.dn.input_feature = e[1];
    s.dn.input_spatial.assign(e + 2, e + 2 + n);
    e += n + 2;
    s.dn.kernel_input_feature = e[0];
    s.dn.kernel_output_feature = e[1];
    s.dn.kernel_spatial.assign(e + 2, e + 2 + n);
    e += n + 2;
    s.dn.output_batch = e[0];
    s.dn.output_feature = e[1];
    s.dn.output_spatial.assign(e + 2, e + 2 + n);
  }
  s.feature_group_count = a.i;
  s.batch_group_count = a.kind;
  return s;
}

WindowSpec WindowSpec::Of(const Dims& dims) {
  WindowSpec w;
  int n = static_cast<int>(dims.size());
  w.dimensions = dims;
  w.strides = w.base_dilations = w.window_dilations = Ones(n);
  w.padding_low = w.padding_high = Dims(static_cast<size_t>(n), int64_t{0});
  return w;
}

Attrs WindowSpec::ToAttrs() const {
  Attrs a;
  a.a = dimensions;
  a.b = strides;
  a.c = Interleave(padding_low, padding_high);
  a.d = base_dilations;
  a.e = window_dilations;
  return a;
}

WindowSpec WindowSpec::FromAttrs(const Attrs& a) {
  WindowSpec w;
  w.dimensions = a.a;
  w.strides = a.b;
  Split(a.c, &w.padding_low, &w.padding_high);
  w.base_dilations = a.d;
  w.window_dilations = a.e;
  return w;
}

int64_t WindowOutputSize(int64_t in, int64_t base_dilation, int64_t pad_low, int64_t pad_high,
                         int64_t window, int64_t window_dilation, int64_t stride) {
  int64_t dilated = in == 0 ? 0 : (in - 1) * base_dilation + 1;
  int64_t padded = dilated + pad_low + pad_high;
  int64_t dilated_window = window == 0 ? 0 : (window - 1) * window_dilation + 1;
  if (padded < dilated_window || padded < 0) return 0;
  return (padded - dilated_window) / stride + 1;
}

std::string ConvolutionShape(const TensorType& lhs, const TensorType& rhs, const ConvolutionSpec& s,
                             Dims* out) {
  const ConvDimensionNumbers& dn = s.dn;
  int n = s.spatial_rank();
  int rank = n + 2;
  if (lhs.rank() != rank || rhs.rank() != rank) return "operand ranks != spatial rank + 2";
  if (dn.kernel_spatial.size() != dn.input_spatial.size() ||
      dn.output_spatial.size() != dn.input_spatial.size())
    return "dimension numbers name different spatial ranks";
  for (const Dims* v :
       {&s.window_strides, &s.padding_low, &s.padding_high, &s.lhs_dilation, &s.rhs_dilation})
    if (static_cast<int>(v->size()) != n) return "window attribute sizes != spatial rank";
  if (!AllPositive(s.window_strides) || !AllPositive(s.lhs_dilation) ||
      !AllPositive(s.rhs_dilation))
    return "strides and dilations must be >= 1";
  if (!IsPermutation(rank, dn.input_spatial, {dn.input_batch, dn.input_feature}) ||
      !IsPermutation(rank, dn.kernel_spatial,
                     {dn.kernel_input_feature, dn.kernel_output_feature}) ||
      !IsPermutation(rank, dn.output_spatial, {dn.output_batch, dn.output_feature}))
    return "dimension numbers are not a permutation";
  int64_t fgc = s.feature_group_count, bgc = s.batch_group_count;
  if (fgc < 1 || bgc < 1 || (fgc > 1 && bgc > 1)) return "invalid group counts";
  int64_t in_batch = lhs.dims[dn.input_batch], in_feat = lhs.dims[dn.input_feature];
  int64_t k_in = rhs.dims[dn.kernel_input_feature], k_out = rhs.dims[dn.kernel_output_feature];
  if (in_feat % fgc != 0 || in_feat / fgc != k_in)
    return "input features != kernel input features * groups";
  if (in_batch % bgc != 0 || k_out % bgc != 0 || k_out % fgc != 0)
    return "group count does not divide the batch or output features";
  out->assign(static_cast<size_t>(rank), int64_t{0});
  (*out)[dn.output_batch] = in_batch / bgc;
  (*out)[dn.output_feature] = k_out;
  for (int i = 0; i < n; ++i)
    (*out)[dn.output_spatial[i]] = WindowOutputSize(
        lhs.dims[dn.input_spatial[i]], s.lhs_dilation[i], s.padding_low[i], s.padding_high[i],
        rhs.dims[dn.kernel_spatial[i]], s.rhs_dilation[i], s.window_strides[i]);
  return "";
}

std::string ReduceWindowShape(const TensorType& x, const WindowSpec& w, Dims* out) {
  int rank = x.rank();
  for (const Dims* v : {&w.dimensions, &w.strides, &w.padding_low, &w.padding_high,
                        &w.base_dilations, &w.window_dilations})
    if (static_cast<int>(v->size()) != rank) return "window attribute sizes != rank";
  if (!AllPositive(w.dimensions) || !AllPositive(w.strides) || !AllPositive(w.base_dilations) ||
      !AllPositive(w.window_dilations))
    return "window sizes, strides and dilations must be >= 1";
  out->assign(static_cast<size_t>(rank), int64_t{0});
  for (int i = 0; i < rank; ++i)
    (*out)[i] =
        WindowOutputSize(x.dims[i], w.base_dilations[i], w.padding_low[i], w.padding_high[i],
                         w.dimensions[i], w.window_dilations[i], w.strides[i]);
  return "";
}

}  // namespace tpu
