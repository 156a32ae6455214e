"""sort / argsort / msort / topk / kthvalue / median / nanmedian against PyTorch's CPU kernels.

Inputs with ties are compared with stable=True (CPU's order of equal elements is otherwise its
algorithm's), or with values distinct; NaN sorts greatest, ascending and descending."""
import pytest
import torch

from conftest import check_same, to_tpu

NAN = float("nan")


def _with_nans(shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g)
    x[torch.rand(shape, generator=g) < 0.2] = NAN
    return x


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_stable_ties_and_nans(mode, no_fallback, dim, descending):
    x = torch.randint(-3, 3, (6, 9)).float()
    x[1, 2] = x[4, 4] = x[0, 0] = NAN
    x[2, 3] = -0.0
    check_same(lambda t: torch.sort(t, dim=dim, descending=descending, stable=True), x)
    check_same(lambda t: torch.argsort(t, dim=dim, descending=descending, stable=True), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int32, torch.uint8,
                                   torch.bool])
def test_sort_dtypes(mode, no_fallback, dtype):
    x = (torch.randperm(60).reshape(5, 12) - 20).to(dtype) if dtype != torch.bool else torch.rand(5, 12) > 0.5
    check_same(lambda t: torch.sort(t, stable=True), x)
    check_same(lambda t: torch.sort(t, dim=0, descending=True, stable=True), x)
    check_same(torch.msort, x)


def test_sort_unstable_distinct_large_and_noncontiguous(mode, no_fallback):
    # Rows long enough to spread over the thread pool; distinct values: any sort agrees.
    x = torch.randperm(64 * 300).float().reshape(64, 300)
    check_same(lambda t: torch.sort(t), x)
    check_same(lambda t: torch.sort(t.t()[::2], dim=0, descending=True), x)
    check_same(lambda t: torch.argsort(t[:, 1::3], dim=1), x)


def test_sort_scalar_empty_out(mode, no_fallback):
    check_same(lambda t: torch.sort(t), torch.tensor(2.5))
    check_same(lambda t: torch.sort(t, 0), torch.empty(0, 3))
    x = _with_nans((4, 7))

    def with_out(t):
        v, i = torch.empty(0, device=t.device), torch.empty(0, dtype=torch.long, device=t.device)
        r = torch.sort(t, dim=1, stable=True, out=(v, i))
        assert r[0] is v and r[1] is i
        return v, i
    check_same(with_out, x)
    # The outputs follow a dense non-contiguous input's strides, as on CPU.
    y = to_tpu(x).t()
    assert torch.sort(y, 0)[0].stride() == torch.sort(x.t(), 0)[0].stride()


@pytest.mark.parametrize("largest", [True, False])
def test_topk(mode, no_fallback, largest):
    x = torch.randn(4, 30)
    check_same(lambda t: torch.topk(t, 5, largest=largest), x)
    check_same(lambda t: torch.topk(t, 3, dim=0, largest=largest), x)
    check_same(lambda t: torch.topk(t.t(), 2, dim=1, largest=largest), x)
    n = _with_nans((3, 10), seed=1)
    check_same(lambda t: torch.topk(t, 4, largest=largest).values, n)
    check_same(lambda t: torch.topk(t, 0), x)
    i = torch.randperm(40).reshape(4, 10) - 20
    check_same(lambda t: torch.topk(t, 3, largest=largest), i)


def test_topk_errors(mode):
    x = to_tpu(torch.randn(3, 4))
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        torch.topk(x, 5)
    with pytest.raises(IndexError, match="Dimension out of range"):
        torch.topk(x, 1, dim=2)


@pytest.mark.parametrize("keepdim", [False, True])
def test_kthvalue_median(mode, no_fallback, keepdim):
    x = torch.randn(5, 7)
    check_same(lambda t: torch.kthvalue(t, 3, 1, keepdim), x)
    check_same(lambda t: torch.kthvalue(t, 5, 0, keepdim), x)
    check_same(lambda t: torch.median(t, 1, keepdim), x)
    check_same(lambda t: torch.median(t, 0, keepdim), x)
    check_same(lambda t: torch.nanmedian(t, 1, keepdim), x)
    n = torch.tensor([[NAN, NAN, NAN], [1.0, NAN, 2.0], [3.0, 1.0, 2.0], [NAN, 2.0, NAN]])
    check_same(lambda t: torch.median(t, 1, keepdim), n)
    check_same(lambda t: torch.nanmedian(t, 1, keepdim), n)
    check_same(lambda t: torch.kthvalue(t, 2, 1, keepdim), n[1:3])  # NaNs tie in the other rows


def test_median_all(mode, no_fallback):
    check_same(torch.median, torch.randn(6, 5))
    check_same(torch.median, torch.tensor([4, 1, 3, 2]))
    check_same(torch.median, _with_nans((20,)))
    check_same(torch.nanmedian, _with_nans((20,)))
    check_same(torch.nanmedian, torch.full((3,), NAN))
    check_same(torch.median, torch.empty(0))
    check_same(torch.median, torch.randn(9).bfloat16())


def test_kthvalue_errors(mode):
    x = to_tpu(torch.randn(3, 4))
    with pytest.raises(RuntimeError, match="selected number k out of range for dimension 1"):
        torch.kthvalue(x, 5, 1)
    with pytest.raises(IndexError, match="Expected reduction dim 0 to have non-zero size"):
        torch.median(to_tpu(torch.zeros(0, 3)), 0)
    t = to_tpu(torch.randn(10))
    with pytest.raises(RuntimeError, match="unsupported operation"):
        torch.kthvalue(t, 5, out=(t, torch.empty((), dtype=torch.long, device="tpu")))


@pytest.mark.parametrize("fn", [
    lambda t: torch.sort(t, 1)[0],
    lambda t: torch.sort(t, 0, descending=True)[0] * 2,
    lambda t: torch.topk(t, 3)[0],
    lambda t: torch.kthvalue(t, 2, 1)[0],
    lambda t: torch.median(t, 0)[0],
    lambda t: torch.median(t),
    lambda t: torch.msort(t),
])
def test_gradients(mode, no_fallback, fn):
    x = torch.randn(5, 8)
    xc, xt = x.clone().requires_grad_(), to_tpu(x).requires_grad_()
    g = torch.randn(fn(x).shape)
    fn(xc).backward(g)
    fn(xt).backward(to_tpu(g))
    torch.testing.assert_close(xt.grad.cpu(), xc.grad)
