"""3-d max and average pooling on the device vs PyTorch's CPU: values, indices and gradients
(padding, dilation, ceil_mode, unbatched input, ties and NaN, integer and bfloat16 inputs -- CPU's
avg_pool3d has no bfloat16 kernel --, out= forms, CPU's error messages), both eager modes, no CPU fallback.

Tolerances as test_pooling_norm.py's: max pooling picks elements (exact); averages differ from
CPU by float32 summation order; bfloat16 rounds once from float32 on both sides.
"""
import pytest
import torch
import torch.nn.functional as F

from test_pooling_norm import BF16, EXACT, F32, check, randn


@pytest.mark.parametrize("kernel,stride,padding,dilation,ceil_mode", [
    (2, None, 0, 1, False),
    (3, 2, 1, 1, False),
    (3, 2, 1, 2, True),
    ((3, 2, 2), (2, 1, 2), (1, 0, 1), 1, True),
])
def test_max_pool3d(mode, no_fallback, kernel, stride, padding, dilation, ceil_mode):
    fn = lambda x: F.max_pool3d(x, kernel, stride, padding, dilation, ceil_mode, return_indices=True)  # noqa: E731
    check(fn, [randn(2, 3, 7, 6, 8)], EXACT, grad_tol=F32)
    check(fn, [randn(3, 6, 7, 5, seed=1)], EXACT, grad_tol=F32)  # unbatched


def test_max_pool3d_ties_nan_integers_bfloat16(mode, no_fallback):
    x = torch.randint(0, 3, (2, 2, 5, 5, 5), generator=torch.Generator().manual_seed(2)).float()
    x[0, 0, 2, 3, 1] = float("nan")
    check(lambda x: F.max_pool3d(x, 3, 2, 1, return_indices=True), [x], EXACT, grad_tol=F32)
    xi = torch.randint(-50, 50, (2, 3, 6, 6, 6), generator=torch.Generator().manual_seed(3))
    check(lambda x: F.max_pool3d(x, 3, 2, 1, return_indices=True), [xi], EXACT, grad=False)
    check(lambda x: F.max_pool3d(x, 2, return_indices=True), [randn(2, 3, 6, 6, 6, dtype=torch.bfloat16)],
          EXACT, grad_tol=BF16)


def test_max_pool3d_out_variants(mode, no_fallback):
    x, g = randn(2, 3, 6, 6, 6), randn(2, 3, 3, 3, 3, seed=1)
    args = ([2, 2, 2], [2, 2, 2], [0, 0, 0], [1, 1, 1], False)
    results = []
    for dev in ("cpu", "tpu"):
        out, idx = torch.empty(0, device=dev), torch.empty(0, dtype=torch.long, device=dev)
        torch.ops.aten.max_pool3d_with_indices.out(x.to(dev), *args, out=out, indices=idx)
        gi = torch.empty(0, device=dev)
        torch.ops.aten.max_pool3d_with_indices_backward.grad_input(g.to(dev), x.to(dev), *args, idx, grad_input=gi)
        results.append((out.cpu(), idx.cpu(), gi.cpu()))
    for a, b in zip(*results):
        torch.testing.assert_close(b, a, **EXACT)


@pytest.mark.parametrize("kernel,stride,padding,ceil_mode,count_include_pad,divisor", [
    (2, None, 0, False, True, None),
    (3, 2, 1, False, True, None),
    (3, 2, 1, True, False, None),
    (3, 2, 1, True, True, None),  # the last window runs past the padding
    ((3, 2, 2), (2, 3, 1), (1, 1, 0), False, True, 5),
])
def test_avg_pool3d(mode, no_fallback, kernel, stride, padding, ceil_mode, count_include_pad, divisor):
    fn = lambda x: F.avg_pool3d(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor)  # noqa: E731
    check(fn, [randn(2, 3, 7, 6, 8)], F32)
    check(fn, [randn(3, 6, 7, 5, seed=1)], F32)


def test_avg_pool3d_integers_bfloat16_and_out(mode, no_fallback):
    x = torch.randint(-50, 50, (2, 3, 6, 6, 6), generator=torch.Generator().manual_seed(4))
    check(lambda x: F.avg_pool3d(x, 3, 2, 1), [x], EXACT, grad=False)  # integer division
    g = torch.randint(-50, 50, (2, 3, 3, 3, 3), generator=torch.Generator().manual_seed(5))
    check(lambda x, g: torch.ops.aten.avg_pool3d_backward(g, x, [3, 3, 3], [2, 2, 2], [1, 1, 1], False, True, None),
          [x, g], EXACT, grad=False)
    check(lambda x: F.avg_pool3d(x, 3, 2, 1), [randn(2, 3, 6, 6, 6, dtype=torch.float64)], F32)
    x, g = randn(1, 2, 6, 6, 6), randn(1, 2, 3, 3, 3, seed=1)
    results = []
    for dev in ("cpu", "tpu"):
        out, gi = torch.empty(0, device=dev), torch.empty(0, device=dev)
        torch.ops.aten.avg_pool3d.out(x.to(dev), [2, 2, 2], [2, 2, 2], [0, 0, 0], out=out)
        torch.ops.aten.avg_pool3d_backward.grad_input(g.to(dev), x.to(dev), [2, 2, 2], [2, 2, 2], [0, 0, 0],
                                                      False, True, None, grad_input=gi)
        results.append((out.cpu(), gi.cpu()))
    for a, b in zip(*results):
        torch.testing.assert_close(b, a, **F32)


def test_pool3d_errors_match_cpu():
    x = randn(1, 1, 4, 4, 4)
    for fn, args, err in [(F.avg_pool3d, (x, 5), RuntimeError), (F.avg_pool3d, (x.int(), 2), NotImplementedError),
                          (F.avg_pool3d, (x.bfloat16(), 2), NotImplementedError),
                          (F.max_pool3d, (x, 2, 2, 2), RuntimeError), (F.max_pool3d, (x[0, 0, 0], 2), RuntimeError),
                          (torch.ops.aten.max_pool3d_with_indices, (x, [2, 2]), RuntimeError)]:
        with pytest.raises(err) as cpu_err:
            fn(*args)
        with pytest.raises(err) as dev_err:
            fn(args[0].to("tpu"), *args[1:])
        assert str(dev_err.value) == str(cpu_err.value)
