// Shared machinery of the reduction lowerings (reduce.cc, reduce_stats.cc): output allocation
// through ATen's own meta functions, reduced axes, identities, and Reduce over IR values.
#pragma once

#include <ATen/ATen.h>
#include <ATen/TensorMeta.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/Resize.h>

#include <array>
#include <vector>

#include "torch/lower/elementwise_util.h"

namespace tpu::torch_bridge {

// Runs a structured op's meta function (ATen's checks, dtype and shape rules, verbatim) and
// holds its outputs: new tensors for the functional form, or the caller's out= tensors checked
// and resized as ATen's generated out= wrappers do.
//   StructuredOutputs<at::meta::structured_sum_dim_IntList> s({&out});
//   s.meta(self, dim, keepdim, dtype);  ... s.out(0)
template <typename Meta, int N = 1>
class StructuredOutputs final : public Meta {
 public:
  StructuredOutputs() = default;
  explicit StructuredOutputs(std::initializer_list<const at::Tensor*> outs) {
    int i = 0;
    for (const at::Tensor* t : outs) outs_[i++] = *t;
  }
  const at::Tensor& maybe_get_output(int64_t i) override { return outs_[i]; }
  void set_output_raw_strided(int64_t i, at::IntArrayRef sizes, at::IntArrayRef,
                              at::TensorOptions options) override {
    Set(i, sizes, options);
  }
  void set_output_strided(int64_t i, at::IntArrayRef sizes, at::IntArrayRef,
                          at::TensorOptions options) override {
    Set(i, sizes, options);
  }
  const at::Tensor& out(int i) const { return outs_[i]; }

 private:
  void Set(int64_t i, at::IntArrayRef sizes, const at::TensorOptions& options) {
    at::Tensor& out = outs_[i];
    if (!out.defined()) {
      out = at::empty(sizes, options);
      return;
    }
    TORCH_CHECK(options.dtype() == out.dtype(), "Expected out tensor to have dtype ", options.dtype(),
                ", but got ", out.dtype(), " instead");
    TORCH_CHECK(options.device() == out.device(), "Expected out tensor to have device ", options.device(),
                ", but got ", out.device(), " instead");
    at::native::resize_output(out, sizes);
  }
  std::array<at::Tensor, N> outs_;
};

// The axes a reduction runs over, wrapped and ascending (PyTorch's errors for bad or repeated
// dims). dim=None reduces every axis; so does dim=[] unless `empty_means_all` is false
// (any/all, where [] reduces nothing). A 0-dim tensor has no axes to reduce.
inline Dims ReduceAxes(const at::Tensor& self, at::OptionalIntArrayRef dim,
                                       bool empty_means_all = true) {
  int64_t n = self.dim();
  bool all = !dim.has_value() || (dim->empty() && empty_means_all);
  auto bits = at::dim_list_to_bitset(all ? at::OptionalIntArrayRef() : dim, n);
  Dims axes;
  for (int64_t d = 0; d < n; ++d)
    if (bits[d]) axes.push_back(d);
  return axes;
}

// The shape of a reduction's result (keepdim keeps the reduced axes with size 1).
inline std::vector<int64_t> ReducedShape(const at::Tensor& self, const Dims& axes, bool keepdim) {
  std::vector<int64_t> shape;
  size_t a = 0;
  for (int64_t d = 0; d < self.dim(); ++d) {
    bool reduced = a < axes.size() && axes[a] == d;
    if (reduced) ++a;
    if (!reduced) shape.push_back(self.size(d));
    else if (keepdim) shape.push_back(1);
  }
  return shape;
}

// Elements reduced into each output element.
inline int64_t ReducedCount(const at::Tensor& self, const Dims& axes) {
  int64_t n = 1;
  for (int64_t d : axes) n *= self.size(d);
  return n;
}

// reduce(x, axes) combined with `kind`, in x's dtype, starting from the kind's identity.
int ReduceAlong(Lowering& l, int x, const Dims& axes, ReduceKind kind);

// x broadcast back over the axes a reduction removed, to `dims` (the unreduced shape).
int Unreduce(Builder& b, int x, const Dims& dims, const Dims& axes);

// Binds a reduced value to `out`, whose shape may keep the reduced axes as size 1.
inline void OutputReduced(Lowering& l, int v, const at::Tensor& out) {
  Dims dims = ToDims(out.sizes());
  l.Output(l.b().TypeOf(v).dims == dims ? v : l.b().Reshape(v, dims), out);
}

}  // namespace tpu::torch_bridge
