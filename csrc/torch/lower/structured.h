// Runs a structured ATen op's own meta function (its argument checks, PyTorch's messages, the
// output's shape and dtype) and allocates or resizes the output like ATen's generated wrappers:
//
//   MetaOut<at::meta::structured_gather> m(out);   // out undefined: allocate a new tensor
//   m.meta(self, dim, index, false);
//   at::Tensor& result = m.out();
#pragma once

#include <ATen/ATen.h>
#include <ATen/native/Resize.h>

namespace tpu::torch_bridge {

// The output behaviour of ATen's generated out= wrappers: allocate when undefined, else check the
// dtype and device and resize (restriding only a resized output).
inline void SetStructuredOut(at::Tensor& out, at::IntArrayRef sizes, at::IntArrayRef strides,
                             at::TensorOptions options) {
  if (!out.defined()) {
    out = strides.empty() ? at::empty(sizes, options) : at::empty_strided(sizes, strides, options);
    return;
  }
  TORCH_CHECK(options.dtype() == out.dtype(), "Expected out tensor to have dtype ", options.dtype(),
              ", but got ", out.dtype(), " instead");
  TORCH_CHECK(!options.has_device() || options.device() == out.device(),
              "Expected out tensor to have device ", options.device(), ", but got ", out.device(), " instead");
  bool resized = at::native::resize_output(out, sizes);
  if (resized && !strides.empty()) out.as_strided_(sizes, strides);
}

template <class Meta>
class MetaOut final : public Meta {
 public:
  MetaOut() = default;
  explicit MetaOut(const at::Tensor& out) : out_(out) {}

  const at::Tensor& maybe_get_output(int64_t) override { return out_; }
  void set_output_raw_strided(int64_t, at::IntArrayRef sizes, at::IntArrayRef strides,
                              at::TensorOptions options) override {
    SetStructuredOut(out_, sizes, strides, options);
  }
  void set_output_strided(int64_t, at::IntArrayRef sizes, at::IntArrayRef strides,
                          at::TensorOptions options) override {
    SetStructuredOut(out_, sizes, strides, options);
  }
  at::Tensor& out() { return out_; }

 private:
  at::Tensor out_;
};

// The same for an op with two outputs (values and indices).
template <class Meta>
class MetaOut2 final : public Meta {
 public:
  MetaOut2() = default;
  MetaOut2(const at::Tensor& a, const at::Tensor& b) : outs_{a, b} {}

  const at::Tensor& maybe_get_output(int64_t i) override { return outs_[i]; }
  void set_output_raw_strided(int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides,
                              at::TensorOptions options) override {
    SetStructuredOut(outs_[i], sizes, strides, options);
  }
  void set_output_strided(int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides,
                          at::TensorOptions options) override {
    SetStructuredOut(outs_[i], sizes, strides, options);
  }
  at::Tensor& out(int i) { return outs_[i]; }

 private:
  at::Tensor outs_[2];
};

// The functional (a new tensor) and out= forms of a kernel K(out, args...) that fills `out`, or a
// new tensor when `out` is undefined, and returns it:
//   m.impl("op", Forms<Op>::Functional);  m.impl("op.out", Forms<Op>::Out);
template <auto K, class Sig = decltype(K)>
struct Forms;
template <auto K, class... A>
struct Forms<K, at::Tensor (*)(const at::Tensor&, A...)> {
  static at::Tensor Functional(A... a) { return K(at::Tensor(), a...); }
  static at::Tensor& Out(A... a, at::Tensor& out) {
    K(out, a...);
    return out;
  }
};

}  // namespace tpu::torch_bridge
