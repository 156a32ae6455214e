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

template <class Meta>
class MetaOut final : public Meta {
 public:
  MetaOut() = default;
  explicit MetaOut(const at::Tensor& out) : out_(out) {}

  const at::Tensor& maybe_get_output(int64_t) override { return out_; }
  void set_output_raw_strided(int64_t, at::IntArrayRef sizes, at::IntArrayRef strides,
                              at::TensorOptions options) override {
    Set(sizes, strides, options);
  }
  void set_output_strided(int64_t, at::IntArrayRef sizes, at::IntArrayRef strides,
                          at::TensorOptions options) override {
    Set(sizes, strides, options);
  }
  at::Tensor& out() { return out_; }

 private:
  void Set(at::IntArrayRef sizes, at::IntArrayRef strides, at::TensorOptions options) {
    if (!out_.defined()) {
      out_ = strides.empty() ? at::empty(sizes, options) : at::empty_strided(sizes, strides, options);
      return;
    }
    TORCH_CHECK(options.dtype() == out_.dtype(), "Expected out tensor to have dtype ", options.dtype(),
                ", but got ", out_.dtype(), " instead");
    TORCH_CHECK(!options.has_device() || options.device() == out_.device(),
                "Expected out tensor to have device ", options.device(), ", but got ", out_.device(), " instead");
    bool resized = at::native::resize_output(out_, sizes);
    if (resized && !strides.empty()) out_.as_strided_(sizes, strides);
  }
  at::Tensor out_;
};

}  // namespace tpu::torch_bridge
