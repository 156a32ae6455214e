"""Reflection and replication padding (1d/2d/3d), forward and backward, against PyTorch's CPU
kernels: batched and unbatched inputs, asymmetric and negative (cropping) padding, bfloat16 and
integer inputs, non-contiguous inputs, and CPU's errors for padding too large for the input."""
import pytest
import torch
import torch.nn.functional as F

from conftest import check_same, to_tpu

CASES = [
    ((2, 3, 7), (2, 3)),
    ((3, 6), (1, 5)),  # unbatched
    ((2, 3, 5, 6), (1, 2, 3, 0)),
    ((3, 5, 6), (4, 1, 0, 2)),
    ((1, 2, 4, 5, 6), (1, 2, 0, 3, 2, 1)),
    ((2, 4, 5, 6), (-1, 2, 2, -2)),  # negative padding crops
]


@pytest.mark.parametrize("shape,pad", CASES)
@pytest.mark.parametrize("pad_mode", ["reflect", "replicate"])
def test_pad_forward_backward(mode, no_fallback, shape, pad, pad_mode):
    x = torch.randn(shape)
    check_same(lambda t: F.pad(t, pad, mode=pad_mode), x)
    xn = torch.randn(shape[:-2] + (shape[-1], shape[-2])).transpose(-1, -2)  # non-contiguous
    check_same(lambda t: F.pad(t, pad, mode=pad_mode), xn)
    xc, xt = x.clone().requires_grad_(), to_tpu(x).requires_grad_()
    out = F.pad(xc, pad, mode=pad_mode)
    g = torch.randn(out.shape)
    out.backward(g)
    F.pad(xt, pad, mode=pad_mode).backward(to_tpu(g))
    torch.testing.assert_close(xt.grad.cpu(), xc.grad)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.int64])
def test_pad_dtypes(mode, no_fallback, dtype):
    x = (torch.randn(2, 3, 6, 5) * 10).to(dtype)
    check_same(lambda t: F.pad(t, (2, 1, 3, 2), mode="reflect"), x)
    check_same(lambda t: F.pad(t, (2, 4, 0, 1), mode="replicate"), x)


def test_pad_out_and_errors(mode, no_fallback):
    x = torch.randn(2, 3, 5)
    check_same(lambda t: torch.ops.aten.reflection_pad1d.out(t, [2, 2], out=torch.empty(0, device=t.device)), x)
    check_same(lambda t: torch.ops.aten.reflection_pad2d.out(t, [1, 2, 0, 1], out=torch.empty(0, device=t.device)), x)
    for fn in (lambda t: F.pad(t, (5, 0), mode="reflect"), lambda t: F.pad(t, (1, 1, 3, 0), mode="reflect"),
               lambda t: F.pad(t, (-3, -3), mode="replicate")):
        with pytest.raises(RuntimeError) as cpu_err:
            fn(x)
        with pytest.raises(RuntimeError) as dev_err:
            fn(to_tpu(x))
        assert str(dev_err.value).split("\n")[0] == str(cpu_err.value).split("\n")[0]
