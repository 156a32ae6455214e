"""cumsum, cumprod and isin on the device vs PyTorch's CPU kernels: dims, dtypes (and the dtype= argument),
out= and in-place forms, strided and 0-dim inputs, gradients; isin's tensor/scalar forms,
invert, mixed dtypes and empty test sets.

Tolerance: the device sums float32 prefixes in a tree order where the CPU kernel adds
sequentially in double, so float32 results differ by rounding (rtol 1e-5 over 1000 terms).
"""
import pytest
import torch

import torch_tpu  # noqa: F401
from conftest import check_same


def rand(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(*shape, generator=g).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    return torch.randint(-50, 50, shape, generator=g).to(dtype)


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("n", [1, 5, 8, 13])
def test_cumsum_dims_and_lengths(dim, n, mode, no_fallback):
    check_same(lambda x: torch.cumsum(x, dim), rand(n, n + 2, 3), rtol=1e-5, atol=1e-5)


def test_cumsum_long_float32(no_fallback):
    check_same(lambda x: x.cumsum(0), rand(1000), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float64, torch.int32, torch.int64, torch.uint8, torch.bool])
def test_cumsum_dtypes(dtype, no_fallback):
    check_same(lambda x: x.cumsum(1), rand(4, 9, dtype=dtype))


def test_cumsum_dtype_argument(no_fallback):
    check_same(lambda x: x.cumsum(0, dtype=torch.float64), rand(7, 3))
    check_same(lambda x: x.cumsum(0, dtype=torch.int32), rand(7, 3) * 10)  # converted first, then summed
    check_same(lambda x: x.cumsum(0, dtype=torch.float32), rand(7, dtype=torch.int64))


def test_cumsum_out_and_inplace(mode, no_fallback):
    def out_form(x):
        out = torch.empty(0, dtype=torch.float32, device=x.device)
        r = torch.cumsum(x, 1, out=out)
        assert r is out
        return out

    check_same(out_form, rand(3, 6))
    check_same(lambda x: x.clone().cumsum_(0), rand(6, 3))
    check_same(lambda x: x.clone().cumsum_(0), rand(6, dtype=torch.int32))  # stays int32


def test_cumsum_strided_and_0d(no_fallback):
    check_same(lambda x: x.t().cumsum(1), rand(5, 4))
    check_same(lambda x: x[::2, 1:].cumsum(0), rand(9, 4))
    check_same(lambda x: x.cumsum(0), torch.tensor(2.5))
    check_same(lambda x: x.cumsum(-1), torch.tensor(3))
    check_same(lambda x: x.cumsum(0), torch.empty(0, 3))


def test_cumsum_gradient(no_fallback):
    def f(x):
        x = x.clone().requires_grad_()
        (x.cumsum(1) * torch.linspace(-1, 1, 7, device=x.device)).sum().backward()
        return x.grad

    check_same(f, rand(3, 7), rtol=1e-5, atol=1e-6)


# ---- cumprod ---------------------------------------------------------------------------------------
def near_one(*shape, dtype=torch.float32, seed=0):
    """Factors around +-1, so long products neither vanish nor overflow; some exact zeros."""
    x = 1 + 0.2 * rand(*shape, seed=seed)
    x = torch.where(rand(*shape, seed=seed + 1) > 0, x, -x)
    x.view(-1)[::11] = 0.0
    return x.to(dtype)


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("n", [1, 5, 8, 13])
def test_cumprod_dims_and_lengths(dim, n, mode, no_fallback):
    check_same(lambda x: x.cumprod(dim), near_one(n, n + 2), rtol=1e-5, atol=1e-6)
    check_same(lambda x: x.cumprod(dim), near_one(n, n + 2, dtype=torch.bfloat16))


@pytest.mark.parametrize("dtype", [torch.float64, torch.int32, torch.int64, torch.uint8, torch.bool])
def test_cumprod_dtypes(dtype, no_fallback):
    x = rand(4, 6, dtype=dtype) if dtype.is_floating_point or dtype == torch.bool else rand(4, 6, dtype=dtype) % 4
    check_same(lambda x: x.cumprod(1), x)


def test_cumprod_forms(mode, no_fallback):
    def out_form(x):
        out = torch.empty(0, dtype=torch.float32, device=x.device)
        assert torch.cumprod(x, 1, out=out) is out
        return out

    check_same(out_form, near_one(3, 6))
    check_same(lambda x: x.clone().cumprod_(0), near_one(6, 3))
    check_same(lambda x: x.clone().cumprod_(0), rand(6, dtype=torch.int32) % 5)  # stays int32
    check_same(lambda x: x.cumprod(0, dtype=torch.float64), near_one(7, 3))
    check_same(lambda x: x.cumprod(0, dtype=torch.float32), rand(7, dtype=torch.int64) % 4)
    check_same(lambda x: x.t().cumprod(1), near_one(5, 4), rtol=1e-5, atol=1e-6)
    check_same(lambda x: x[::2, 1:].cumprod(0), near_one(9, 4), rtol=1e-5, atol=1e-6)
    check_same(lambda x: x.cumprod(0), torch.tensor(2.5))
    check_same(lambda x: x.cumprod(0), torch.empty(0, 3))


@pytest.mark.parametrize("zeros", [0, 1, 2])
def test_cumprod_gradient(zeros, mode, no_fallback):
    """ATen's backward has separate paths for inputs without zeros, with one zero and with more."""
    x = near_one(3, 7)
    x.view(-1)[:] = x.view(-1).where(x.view(-1) != 0, 1.1)
    for z in range(zeros):
        x[:, 2 + 2 * z] = 0.0

    def f(x):
        x = x.clone().requires_grad_()
        (x.cumprod(1) * torch.linspace(-1, 1, 7, device=x.device)).sum().backward()
        return x.grad

    check_same(f, x, rtol=1e-5, atol=1e-6)


def test_cumsum_errors():
    with pytest.raises(IndexError, match="Dimension out of range"):
        rand(3).to("tpu").cumsum(1)


@pytest.mark.parametrize("invert", [False, True])
def test_isin_tensor_tensor(invert, mode, no_fallback):
    elements = torch.tensor([[1, 5, 3], [7, 2, 2]])
    check_same(lambda e, t: torch.isin(e, t, invert=invert), elements, torch.tensor([2, 3, 9]))
    check_same(lambda e, t: torch.isin(e, t, invert=invert), elements, torch.tensor([[7], [1]]))


def test_isin_scalar_forms_and_dtypes(no_fallback):
    e = torch.tensor([0.5, 1.0, float("nan"), 3.0])
    check_same(lambda e: torch.isin(e, 1.0), e)
    check_same(lambda e: torch.isin(e, float("nan")), e)  # NaN is never a member
    check_same(lambda t: torch.isin(3, t), torch.tensor([1, 3]))
    check_same(lambda e, t: torch.isin(e, t), e, torch.tensor([1, 3]))  # float vs int: promoted
    check_same(lambda e, t: torch.isin(e, t), torch.tensor([1, 2]), torch.tensor([], dtype=torch.long))
    check_same(lambda e, t: torch.isin(e, t, invert=True), torch.tensor([1, 2]), torch.tensor([], dtype=torch.long))


def test_isin_out(no_fallback):
    def f(e, t):
        out = torch.empty(0, dtype=torch.bool, device=e.device)
        torch.isin(e, t, out=out)
        return out

    check_same(f, torch.tensor([4, 5, 6]), torch.tensor([6, 4]))
