"""The programs of convolution, pooling and upsampling are StableHLO with our meaning: each one's
logged text runs on XLA (jaxlib, CPU) and must match the host executor and PyTorch's CPU
(xla_check.check_xla). Covers stablehlo.convolution (forward, input and weight gradients as
convolutions with lhs dilation, reversed kernels and batch groups; transposed; dilated; 3-d),
reduce_window (max, add, base dilation; 2-d and 3-d), the variadic reduce_window of max-pool
indices, and the gathers/scatters of adaptive pooling and upsampling (1-d, 2-d, 3-d). Skipped when
jax is not installed.

Parameters are listed in program order: a lowering's Input()/Scalar() calls (csrc/torch/lower).
Tolerances: float32 rtol=1e-5, atol=1e-5 for convolutions (XLA's and oneDNN's summation orders
differ on sums of up to ~100 products), xla_check's defaults (rtol=1e-5, atol=1e-6) otherwise.
"""
import pytest
import torch
import torch.nn.functional as F

from xla_check import check_xla, randn, xla_client

CONV = dict(rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def xla():
    return xla_client()


def f32(v):
    return torch.tensor(v, dtype=torch.float32)


def test_convolution_forward(xla):
    x, w, b = randn(2, 4, 9, 8), randn(6, 2, 3, 3, seed=1), randn(6, seed=2)
    check_xla(xla, "aten::convolution", lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1, groups=2),
              (x, w, b), [x, w, b], **CONV)
    x2, w2 = randn(2, 3, 11, 6), randn(4, 3, 3, 2, seed=1)
    check_xla(xla, "aten::convolution", lambda x, w: F.conv2d(x, w, dilation=(2, 3), padding=(0, 2)), (x2, w2),
              [x2, w2], **CONV)
    x3, w3 = randn(1, 2, 4, 5, 3), randn(3, 2, 2, 3, 2, seed=1)
    check_xla(xla, "aten::convolution", lambda x, w: F.conv3d(x, w, padding=1, stride=(1, 2, 1)), (x3, w3),
              [x3, w3], **CONV)


@pytest.mark.parametrize("groups", [1, 2])
def test_convolution_backward(xla, groups):
    x, w, gy = randn(2, 4, 9, 8), randn(6, 4 // groups, 3, 3, seed=1), randn(2, 6, 5, 4, seed=2)

    def fn(gy, x, w):
        return torch.ops.aten.convolution_backward(gy, x, w, [0], [2, 2], [1, 1], [1, 1], False, [0, 0],
                                                   groups, [True, True, True])

    # parameters: grad_output, weight (input gradient), input (weight gradient)
    text = check_xla(xla, "aten::convolution_backward", fn, (gy, x, w), [gy, w, x], **CONV)
    assert "stablehlo.reverse" in text and "lhs_dilation = array<i64: 2, 2>" in text
    assert f"batch_group_count = {groups} : i64" in text


def test_transposed_convolution(xla):
    x, w = randn(2, 6, 4, 4), randn(6, 2, 3, 3, seed=1)
    fn = lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=0, output_padding=1, groups=3)  # noqa: E731
    check_xla(xla, "aten::convolution", fn, (x, w), [x, w], **CONV)


def test_max_pool_values_indices_and_backward(xla):
    x = torch.randint(0, 3, (2, 3, 9, 8), generator=torch.Generator().manual_seed(6)).float()
    x[0, 0, 1, 1] = float("nan")  # ties everywhere and a NaN: first maximum, NaN wins
    fn = lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True, return_indices=True)  # noqa: E731
    text = check_xla(xla, "aten::max_pool2d_with_indices", fn, (x,), [x], rtol=0, atol=0)
    assert ":2 = \"stablehlo.reduce_window\"" in text
    xi = torch.randint(-9, 9, (2, 3, 6, 6), generator=torch.Generator().manual_seed(7))
    check_xla(xla, "aten::max_pool2d_with_indices", lambda x: F.max_pool2d(x, 2, return_indices=True), (xi,),
              [xi], rtol=0, atol=0)
    y, idx = F.max_pool2d(x, 3, 2, 1, ceil_mode=True, return_indices=True)
    g = randn(*y.shape, seed=8)
    fn = lambda g, x, i: torch.ops.aten.max_pool2d_with_indices_backward(  # noqa: E731
        g, x, [3, 3], [2, 2], [1, 1], [1, 1], True, i)
    check_xla(xla, "aten::max_pool2d_with_indices_backward", fn, (g, x, idx), [idx, g])


def test_avg_pool_and_backward(xla):
    x = randn(2, 3, 9, 8)
    fn = lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False)  # noqa: E731
    check_xla(xla, "aten::avg_pool2d", fn, (x,), [x])
    check_xla(xla, "aten::avg_pool2d", lambda x: F.avg_pool2d(x, 2, divisor_override=3), (x,), [x, f32(3)])
    g = randn(2, 3, 5, 5, seed=1)
    fn = lambda g, x: torch.ops.aten.avg_pool2d_backward(g, x, [3, 3], [2, 2], [1, 1], True, True, None)  # noqa: E731
    text = check_xla(xla, "aten::avg_pool2d_backward", fn, (g, x), [g])
    assert "base_dilations = array<i64: 1, 1, 2, 2>" in text


def test_adaptive_avg_pool(xla):
    x = randn(2, 3, 9, 8)
    check_xla(xla, "aten::_adaptive_avg_pool2d", lambda x: F.adaptive_avg_pool2d(x, (4, 3)), (x,), [x])
    check_xla(xla, "aten::_adaptive_avg_pool2d", lambda x: F.adaptive_avg_pool2d(x, (3, 4)), (x,), [x])
    g = randn(2, 3, 4, 3, seed=1)
    check_xla(xla, "aten::_adaptive_avg_pool2d_backward", torch.ops.aten._adaptive_avg_pool2d_backward, (g, x), [g])


def test_upsample(xla):
    x = randn(2, 3, 5, 7)
    # Parameters after the input: each dim's source-index scale (in / out for a size,
    # 1 / scale_factor for a scale factor), a float32 runtime scalar.
    check_xla(xla, "aten::upsample_nearest2d", lambda x: F.interpolate(x, size=(9, 4), mode="nearest"), (x,),
              [x, f32(5) / f32(9), f32(7) / f32(4)], rtol=0, atol=0)
    fn = lambda x: F.interpolate(x, scale_factor=1.5, mode="bilinear")  # noqa: E731
    check_xla(xla, "aten::upsample_bilinear2d", fn, (x,), [x, f32(1 / 1.5), f32(1 / 1.5)])
    g = randn(2, 3, 7, 10, seed=1)
    fn = lambda g: torch.ops.aten.upsample_bilinear2d_backward(g, [7, 10], [2, 3, 5, 7], False, 1.5, 1.5)  # noqa: E731
    check_xla(xla, "aten::upsample_bilinear2d_backward", fn, (g,), [g, f32(1 / 1.5), f32(1 / 1.5)])


def test_pool3d(xla):
    x = torch.randint(0, 3, (1, 2, 5, 6, 4), generator=torch.Generator().manual_seed(9)).float()
    x[0, 0, 1, 1, 1] = float("nan")
    fn = lambda x: F.max_pool3d(x, 3, 2, 1, ceil_mode=True, return_indices=True)  # noqa: E731
    check_xla(xla, "aten::max_pool3d_with_indices", fn, (x,), [x], rtol=0, atol=0)
    y, idx = fn(x)
    g = randn(*y.shape, seed=10)
    fn = lambda g, x, i: torch.ops.aten.max_pool3d_with_indices_backward(  # noqa: E731
        g, x, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1], True, i)
    check_xla(xla, "aten::max_pool3d_with_indices_backward", fn, (g, x, idx), [idx, g])
    x = randn(1, 2, 5, 6, 4)
    fn = lambda x: F.avg_pool3d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False)  # noqa: E731
    check_xla(xla, "aten::avg_pool3d", fn, (x,), [x])
    g = randn(*fn(x).shape, seed=11)
    fn = lambda g, x: torch.ops.aten.avg_pool3d_backward(g, x, [3, 3, 3], [2, 2, 2], [1, 1, 1], True, True, None)  # noqa: E731
    check_xla(xla, "aten::avg_pool3d_backward", fn, (g, x), [g])


def test_adaptive_max_pool(xla):
    x = torch.randint(0, 3, (2, 3, 9, 8), generator=torch.Generator().manual_seed(12)).float()
    x[0, 0, 1, 1] = x[0, 0, 2, 0] = float("nan")  # ties and NaNs: CPU's first maximum, last NaN
    fn = lambda x: F.adaptive_max_pool2d(x, (4, 3), return_indices=True)  # noqa: E731
    check_xla(xla, "aten::adaptive_max_pool2d", fn, (x,), [x], rtol=0, atol=0)
    y, idx = fn(x)
    g = randn(*y.shape, seed=13)
    check_xla(xla, "aten::adaptive_max_pool2d_backward", torch.ops.aten.adaptive_max_pool2d_backward,
              (g, x, idx), [idx, g])


def test_upsample_1d_3d(xla):
    x1, x3 = randn(2, 3, 7), randn(1, 2, 2, 5, 7, seed=1)
    check_xla(xla, "aten::upsample_linear1d", lambda x: F.interpolate(x, scale_factor=1.5, mode="linear"), (x1,),
              [x1, f32(1 / 1.5)])
    check_xla(xla, "aten::upsample_nearest3d", lambda x: F.interpolate(x, size=(3, 9, 4), mode="nearest"), (x3,),
              [x3, f32(2) / f32(3), f32(5) / f32(9), f32(7) / f32(4)], rtol=0, atol=0)
    fn = lambda x: F.interpolate(x, scale_factor=1.5, mode="trilinear")  # noqa: E731
    check_xla(xla, "aten::upsample_trilinear3d", fn, (x3,), [x3, f32(1 / 1.5), f32(1 / 1.5), f32(1 / 1.5)])
    g = randn(1, 2, 3, 7, 10, seed=2)
    fn = lambda g: torch.ops.aten.upsample_trilinear3d_backward(g, [3, 7, 10], [1, 2, 2, 5, 7], False,  # noqa: E731
                                                                1.5, 1.5, 1.5)
    check_xla(xla, "aten::upsample_trilinear3d_backward", fn, (g,), [g, f32(1 / 1.5), f32(1 / 1.5), f32(1 / 1.5)])
