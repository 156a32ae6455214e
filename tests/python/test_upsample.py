"""upsample_nearest1d/2d/3d, upsample_linear1d, upsample_bilinear2d and upsample_trilinear3d
(F.interpolate) on the device vs PyTorch's CPU: sizes and scale factors up and down, align_corners, values and gradients, float32, float64, bfloat16
and (nearest) uint8, both eager modes, no CPU fallback. (The programs run on XLA in
test_conv_xla.py.)

Tolerances: indices and weights are computed with CPU's float formulas, so nearest is exact and
bilinear differs only by the rounding of its weighted sums (nearest's gradient when every dim doubles
is CPU's sum in CPU's order: exact): rtol=1e-5, atol=1e-6 (float64
rtol=1e-12); bfloat16 rounds once from float32 on both sides: one bfloat16 ulp, rtol=1.6e-2.
"""
import pytest
import torch
import torch.nn.functional as F

F32 = dict(rtol=1e-5, atol=1e-6)


def check(fn, x, tol, grad=True):
    """Values within `tol` (nearest: exact) and gradients within `tol`."""
    a, d = x.clone().requires_grad_(grad), x.to("tpu").requires_grad_(grad)
    ya, yd = fn(a), fn(d)
    torch.testing.assert_close(yd.cpu(), ya, **tol)
    if grad:
        g = torch.randn(ya.shape, generator=torch.Generator().manual_seed(3)).to(ya.dtype)
        ya.backward(g)
        yd.backward(g.to("tpu"))
        torch.testing.assert_close(d.grad.cpu(), a.grad, **tol)


SIZES = [dict(scale_factor=2), dict(size=(9, 11)), dict(scale_factor=(1.7, 0.6)), dict(size=(5, 7)),
         dict(size=(3, 2))]


@pytest.mark.parametrize("kw", SIZES)
def test_nearest(mode, no_fallback, kw):
    x = torch.randn(2, 3, 5, 7, generator=torch.Generator().manual_seed(0))
    check(lambda t: F.interpolate(t, mode="nearest", **kw), x, F32)
    with torch.no_grad():  # the values are copies: exact
        torch.testing.assert_close(F.interpolate(x.to("tpu"), mode="nearest", **kw).cpu(),
                                   F.interpolate(x, mode="nearest", **kw), rtol=0, atol=0)


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_nearest_doubled_gradient_is_cpus_sum(mode, no_fallback, dims):
    """Doubling every dim: each input's gradient is the sum of its 2, 4 or 8 output gradients, added
    in CPU's order (the output's row-major order), so the same bits."""
    g = torch.Generator().manual_seed(8)
    x = torch.randn((2, 3) + (3, 5, 4)[3 - dims:], generator=g)
    gy = torch.randn((2, 3) + tuple(2 * s for s in x.shape[2:]), generator=g)
    a, d = x.clone().requires_grad_(), x.to("tpu").requires_grad_()
    F.interpolate(a, scale_factor=2, mode="nearest").backward(gy)
    F.interpolate(d, scale_factor=2, mode="nearest").backward(gy.to("tpu"))
    torch.testing.assert_close(d.grad.cpu(), a.grad, rtol=0, atol=0)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("kw", SIZES)
def test_bilinear(mode, no_fallback, kw, align_corners):
    x = torch.randn(2, 3, 5, 7, generator=torch.Generator().manual_seed(1))
    check(lambda t: F.interpolate(t, mode="bilinear", align_corners=align_corners, **kw), x, F32)


def test_other_dtypes_and_layouts(mode, no_fallback):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 3, 5, 7, generator=g)
    check(lambda t: F.interpolate(t, scale_factor=1.3, mode="bilinear"), x.double(), dict(rtol=1e-12, atol=1e-12))
    check(lambda t: F.interpolate(t, scale_factor=1.5, mode="bilinear"), x.bfloat16(), dict(rtol=1.6e-2, atol=1e-2))
    check(lambda t: F.interpolate(t, size=(8, 9), mode="nearest"),
          torch.randint(0, 9, (1, 2, 4, 5), generator=g).to(torch.uint8), dict(rtol=0, atol=0), grad=False)
    check(lambda t: F.interpolate(t, scale_factor=2, mode="bilinear"), x.to(memory_format=torch.channels_last), F32)
    check(lambda t: F.interpolate(t[:, :, 1:, ::2], size=(6, 6), mode="nearest"), x, F32)


def test_unsupported_dtypes_raise_like_cpu():
    x = torch.ones(1, 1, 2, 2, dtype=torch.int32)
    with pytest.raises(NotImplementedError) as cpu_err:
        F.interpolate(x, scale_factor=2)
    with pytest.raises(NotImplementedError) as dev_err:
        F.interpolate(x.to("tpu"), scale_factor=2)
    assert str(dev_err.value) == str(cpu_err.value)


SIZES_1D = [dict(scale_factor=2), dict(size=9), dict(scale_factor=0.6), dict(size=7), dict(size=3)]
SIZES_3D = [dict(scale_factor=2), dict(size=(6, 9, 11)), dict(scale_factor=(1.7, 0.6, 1.2)), dict(size=(3, 5, 7)),
            dict(size=(2, 3, 2))]


@pytest.mark.parametrize("kw", SIZES_1D)
def test_nearest1d(mode, no_fallback, kw):
    x = torch.randn(2, 3, 7, generator=torch.Generator().manual_seed(4))
    check(lambda t: F.interpolate(t, mode="nearest", **kw), x, F32)


@pytest.mark.parametrize("kw", SIZES_3D)
def test_nearest3d(mode, no_fallback, kw):
    x = torch.randn(2, 3, 3, 5, 7, generator=torch.Generator().manual_seed(5))
    check(lambda t: F.interpolate(t, mode="nearest", **kw), x, F32)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("kw", SIZES_1D)
def test_linear1d(mode, no_fallback, kw, align_corners):
    x = torch.randn(2, 3, 7, generator=torch.Generator().manual_seed(6))
    check(lambda t: F.interpolate(t, mode="linear", align_corners=align_corners, **kw), x, F32)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("kw", SIZES_3D)
def test_trilinear3d(mode, no_fallback, kw, align_corners):
    x = torch.randn(2, 3, 3, 5, 7, generator=torch.Generator().manual_seed(7))
    check(lambda t: F.interpolate(t, mode="trilinear", align_corners=align_corners, **kw), x, F32)


def test_1d_3d_other_dtypes_layouts_and_out(mode, no_fallback):
    g = torch.Generator().manual_seed(8)
    x1, x3 = torch.randn(2, 3, 7, generator=g), torch.randn(1, 2, 3, 4, 5, generator=g)
    bf16 = dict(rtol=1.6e-2, atol=1e-2)
    check(lambda t: F.interpolate(t, scale_factor=1.5, mode="linear"), x1.bfloat16(), bf16)
    check(lambda t: F.interpolate(t, scale_factor=1.5, mode="trilinear"), x3.bfloat16(), bf16)
    check(lambda t: F.interpolate(t, scale_factor=1.3, mode="trilinear"), x3.double(), dict(rtol=1e-12, atol=1e-12))
    check(lambda t: F.interpolate(t, scale_factor=1.5, mode="nearest"), x3.bfloat16(), dict(rtol=0, atol=0))
    u8 = torch.randint(0, 9, (1, 2, 3, 4, 5), generator=g).to(torch.uint8)
    check(lambda t: F.interpolate(t, size=(4, 8, 9), mode="nearest"), u8, dict(rtol=0, atol=0), grad=False)
    check(lambda t: F.interpolate(t, size=11, mode="nearest"), u8[0, 0], dict(rtol=0, atol=0), grad=False)
    check(lambda t: F.interpolate(t, scale_factor=2, mode="trilinear"),
          x3.to(memory_format=torch.channels_last_3d), F32)
    check(lambda t: F.interpolate(t[:, :, 1:, ::2], size=(3, 3, 3), mode="nearest"), x3, F32)
    check(lambda t: F.interpolate(t.transpose(0, 1), size=10, mode="linear"), x1, F32)
    for op, args in [(torch.ops.aten.upsample_nearest1d.out, ([12], None)),
                     (torch.ops.aten.upsample_linear1d.out, ([12], False, None))]:
        outs = [torch.empty(0, device=dev) for dev in ("cpu", "tpu")]
        op(x1, *args, out=outs[0])
        op(x1.to("tpu"), *args, out=outs[1])
        torch.testing.assert_close(outs[1].cpu(), outs[0], **F32)


@pytest.mark.parametrize("mode_,x", [("nearest", torch.ones(1, 1, 4, dtype=torch.int32)),
                                     ("nearest", torch.ones(1, 1, 2, 2, 2, dtype=torch.int64)),
                                     ("linear", torch.ones(1, 1, 4, dtype=torch.uint8)),
                                     ("trilinear", torch.ones(1, 1, 2, 2, 2, dtype=torch.int32)),
                                     ("linear", torch.ones(1, 4))])
def test_1d_3d_errors_like_cpu(mode_, x):
    with pytest.raises(Exception) as cpu_err:
        F.interpolate(x, scale_factor=2, mode=mode_)
    with pytest.raises(type(cpu_err.value)) as dev_err:
        F.interpolate(x.to("tpu"), scale_factor=2, mode=mode_)
    assert str(dev_err.value) == str(cpu_err.value)
