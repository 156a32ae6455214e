// Convolution: convolution_overrideable and convolution_backward_overrideable, the two ops ATen's
// convolution / convolution_backward hand a PrivateUse1 tensor to (after their own argument
// checks; 1-d convolutions arrive viewed as 2-d). Both lower to StableHLO convolutions
// (ir/conv_grad.h): the forward op, its input gradient (also the transposed convolution) and its
// weight gradient. bfloat16/float16 convolutions accumulate in float32 (the IR op's result type),
// add the bias there and round once, as oneDNN does for PyTorch's CPU kernels.
#include <torch/library.h>

#include <string>
#include <tuple>

#include "ir/conv_grad.h"
#include "torch/lower/nn_util.h"

namespace tpu::torch_bridge {
namespace {

// ATen passes one value per spatial dim, or a single value meant for all of them.
Dims PerDim(at::IntArrayRef v, int64_t n, const char* what) {
  TORCH_CHECK(static_cast<int64_t>(v.size()) == n || v.size() == 1, "expected ", what,
              " to be a single integer value or a list of ", n,
              " values to match the convolution dimensions, but got ", what, "=", v);
  Dims d;
  for (int64_t i = 0; i < n; ++i) d.push_back(v.size() == 1 ? v[0] : v[i]);
  return d;
}

struct Conv {
  ConvParams p;
  Dims output_padding;
  int64_t spatial;
};

Conv Params(const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride,
            at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
            at::IntArrayRef output_padding, int64_t groups) {
  int64_t n = input.dim() - 2;
  TORCH_CHECK(n >= 1 && n <= 3 && weight.dim() == input.dim(), "Expected ", weight.dim(),
              "-dimensional input for ", weight.dim(), "-dimensional weight ", weight.sizes(),
              ", but got ", input.dim(), "-dimensional input of size ", input.sizes(), " instead");
  TORCH_CHECK(groups > 0, "non-positive groups is not supported");
  Conv c;
  c.spatial = n;
  c.p = ConvParams{PerDim(stride, n, "stride"), PerDim(padding, n, "padding"),
                   PerDim(dilation, n, "dilation"), groups};
  c.output_padding = transposed ? PerDim(output_padding, n, "output_padding") : Dims(n, 0);
  for (int64_t i = 0; i < n; ++i) {
    TORCH_CHECK(c.p.stride[i] > 0, "non-positive stride is not supported");
    TORCH_CHECK(c.p.dilation[i] > 0, "dilation should be greater than zero");
    TORCH_CHECK(c.p.padding[i] >= 0, "negative padding is not supported");
    TORCH_CHECK(c.output_padding[i] >= 0, "negative output_padding is not supported");
  }
  int64_t in_ch = input.size(1);
  if (transposed) {
    TORCH_CHECK(weight.size(0) == in_ch, "Given transposed=1, weight of size ", weight.sizes(),
                ", expected input", input.sizes(), " to have ", weight.size(0),
                " channels, but got ", in_ch, " channels instead");
  } else {
    TORCH_CHECK(weight.size(0) % groups == 0 && weight.size(1) * groups == in_ch,
                "Given groups=", groups, ", weight of size ", weight.sizes(), ", expected input",
                input.sizes(), " to have ", weight.size(1) * groups, " channels, but got ", in_ch,
                " channels instead");
  }
  return c;
}

void CheckTypes(const at::Tensor& input, const at::Tensor& weight, const at::Tensor* bias) {
  TORCH_CHECK(input.scalar_type() == weight.scalar_type(), "Input type (", input.dtype(),
              ") and weight type (", weight.dtype(), ") should be the same");
  TORCH_CHECK(!bias || !bias->defined() || bias->scalar_type() == input.scalar_type(),
              "Input type (", input.dtype(), ") and bias type (", bias->dtype(),
              ") should be the same");
  TORCH_CHECK_NOT_IMPLEMENTED(
      input.scalar_type() != at::kBool && !at::isComplexType(input.scalar_type()),
      "\"convolution\" not implemented for '", input.scalar_type(), "'");
}

// Spatial sizes of the forward (or transposed) convolution's output.
Dims OutputSpatial(const at::Tensor& input, const at::Tensor& weight, const Conv& c,
                   bool transposed) {
  Dims out;
  bool positive = true;
  for (int64_t i = 0; i < c.spatial; ++i) {
    int64_t in = input.size(2 + i), k = weight.size(2 + i);
    int64_t ext = c.p.dilation[i] * (k - 1) + 1;
    // ATen checks a forward window fits before it calls us; a transposed output must not be
    // empty (CPU's transposed kernels refuse it with the message below).
    out.push_back(transposed
                      ? (in - 1) * c.p.stride[i] - 2 * c.p.padding[i] + ext + c.output_padding[i]
                      : (in + 2 * c.p.padding[i] - ext) / c.p.stride[i] + 1);
    positive &= out.back() > 0;
  }
  if (!positive) {
    auto join = [](at::IntArrayRef v) {
      std::string s;
      for (size_t i = 0; i < v.size(); ++i) s += (i ? " x " : "") + std::to_string(v[i]);
      return s;
    };
    TORCH_CHECK(false, "Given input size per channel: (", join(input.sizes().slice(2)),
                "). Calculated output size per channel: (",
                join(at::IntArrayRef(out.data(), out.size())), "). Output size is too small");
  }
  return out;
}

// Note [Memory formats]: a convolution's result and gradients are channels-last when its input
// or its weight is (PyTorch CPU's rule).
std::optional<at::MemoryFormat> ConvResultFormat(const at::Tensor& input, const at::Tensor& weight) {
  if (auto f = ChannelsLast(input)) return f;
  return input.dim() == weight.dim() ? ChannelsLast(weight) : std::nullopt;
}

// Accumulation type of the IR convolution.
DType AccType(at::ScalarType t) { return ToDType(OpMath(t)); }

at::Tensor convolution(const at::Tensor& input, const at::Tensor& weight,
                       const std::optional<at::Tensor>& bias_opt, at::IntArrayRef stride,
                       at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                       at::IntArrayRef output_padding, int64_t groups) {
  const at::Tensor bias = bias_opt.value_or(at::Tensor());
  CheckSameDevice("convolution", {&input, &weight, &bias});
  CheckTypes(input, weight, &bias);
  Conv c = Params(input, weight, stride, padding, dilation, transposed, output_padding, groups);
  Dims spatial = OutputSpatial(input, weight, c, transposed);
  int64_t out_ch = transposed ? weight.size(1) * groups : weight.size(0);
  TORCH_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == out_ch),
              "Given weight of size ", weight.sizes(), ", expected bias to be 1-dimensional with ",
              out_ch, " elements, but got bias of size ", bias.sizes(), " instead");
  Dims out_dims{input.size(0), out_ch};
  out_dims.insert(out_dims.end(), spatial.begin(), spatial.end());
  at::Tensor out = EmptyLike(at::IntArrayRef(out_dims.data(), out_dims.size()), input.scalar_type(), input,
                             ConvResultFormat(input, weight));
  if (out.numel() == 0) return out;
  Lowering l("aten::convolution");
  Builder& b = l.b();
  DType acc = AccType(input.scalar_type());
  int x = l.Input(input), w = l.Input(weight);
  int y = transposed ? ConvInputGrad(b, x, w, c.p, spatial, acc) : ConvForward(b, x, w, c.p, acc);
  if (bias.defined())
    y = b.Binary(OpCode::kAdd, y,
                 b.BroadcastInDim(l.Input(bias, OpMath(bias.scalar_type())), out_dims, {1}));
  l.Output(y, out);
  l.Run();
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
    at::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> mask) {
  CheckSameDevice("convolution_backward", {&grad_output, &input, &weight});
  CheckTypes(input, weight, nullptr);
  TORCH_CHECK(grad_output.scalar_type() == input.scalar_type(),
              "convolution_backward: grad_output type (", grad_output.scalar_type(),
              ") and input type (", input.scalar_type(), ") should be the same");
  Conv c = Params(input, weight, stride, padding, dilation, transposed, output_padding, groups);
  Dims spatial = OutputSpatial(input, weight, c, transposed);
  TORCH_CHECK(
      grad_output.dim() == input.dim() && grad_output.size(0) == input.size(0) &&
          grad_output.sizes().slice(2).equals(at::IntArrayRef(spatial.data(), spatial.size())),
      "convolution_backward: grad_output of size ", grad_output.sizes(),
      " does not match the convolution's output");
  at::Tensor gx, gw, gb;
  const std::optional<at::MemoryFormat> format = ConvResultFormat(input, weight);
  if (mask[0]) gx = EmptyLike(input.sizes(), input.scalar_type(), input, format);
  if (mask[1]) gw = EmptyLike(weight.sizes(), weight.scalar_type(), weight, format);
  if (mask[2]) gb = EmptyLike({grad_output.size(1)}, grad_output.scalar_type(), grad_output);
  if (grad_output.numel() == 0 || input.numel() == 0 || weight.numel() == 0) {
    // Nothing flows: the gradients that exist are zero.
    for (at::Tensor* t : {&gx, &gw, &gb})
      if (t->defined()) t->zero_();
    return {gx, gw, gb};
  }
  if (!mask[0] && !mask[1] && !mask[2]) return {gx, gw, gb};
  Lowering l("aten::convolution_backward");
  Builder& b = l.b();
  DType acc = AccType(input.scalar_type());
  int g = l.Input(grad_output);
  Dims in_spatial(input.sizes().begin() + 2, input.sizes().end());
  Dims k_spatial(weight.sizes().begin() + 2, weight.sizes().end());
  if (mask[0]) {
    int w = l.Input(weight);
    int r;
    if (transposed) {
      // The forward convolution of grad_output; an output_padding of at least the stride
      // (allowed below the dilation) adds windows past the input's rows: dropped.
      r = ConvForward(b, g, w, c.p, acc);
      Dims full = ToDims(input.sizes());
      if (b.TypeOf(r).dims != full)
        r = b.Slice(r, Dims(full.size(), int64_t{0}), full, Dims(full.size(), int64_t{1}));
    } else {
      r = ConvInputGrad(b, g, w, c.p, in_spatial, acc);
    }
    l.Output(r, gx);
  }
  if (mask[1]) {
    int x = l.Input(input);
    // A transposed convolution is the input gradient of the forward one from its output's shape
    // to its input's: its weight gradient swaps the roles of input and grad_output.
    l.Output(transposed ? ConvWeightGrad(b, g, x, c.p, k_spatial, acc)
                        : ConvWeightGrad(b, x, g, c.p, k_spatial, acc),
             gw);
  }
  if (mask[2]) {
    Dims dims{0};
    for (int64_t i = 0; i < c.spatial; ++i) dims.push_back(2 + i);
    l.Output(nn::Sum(b, b.ConvertIfNeeded(g, acc), dims), gb);
  }
  l.Run();
  return {gx, gw, gb};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", convolution);
  m.impl("convolution_backward_overrideable", convolution_backward);
}

}  // namespace tpu::torch_bridge
