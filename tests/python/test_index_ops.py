"""index_add / index_copy / index_fill / index_reduce / take / put_ / masked_scatter against
PyTorch's CPU kernels: dims, negative indices where PyTorch allows them, duplicates (for the
accumulating forms), non-contiguous operands, in-place and out= forms, gradients and errors."""
import pytest
import torch

from conftest import check_same, to_tpu

DTYPES = [torch.float32, torch.bfloat16, torch.int64]


def _t(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * 4
    return x.to(dtype) if dtype.is_floating_point else x.round().to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_add(mode, no_fallback, dtype, dim):
    x = _t((4, 5, 6), dtype)
    idx = torch.tensor([1, 0, 1, 3])  # a duplicate accumulates
    src_shape = list(x.shape)
    src_shape[dim] = 4
    src = _t(src_shape, dtype, seed=1)
    alpha = 2 if dtype == torch.int64 else 0.5
    # CPU adds duplicates in bfloat16 one at a time; we sum in float32 and round once.
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else {}
    check_same(lambda a, i, s: torch.index_add(a, dim, i, s, alpha=alpha), x, idx, src, **tol)
    check_same(lambda a, i, s: a.clone().index_add_(dim, i, s), x, idx, src, **tol)
    check_same(lambda a, i, s: torch.index_add(a, dim, i, s, out=torch.empty_like(a)), x, idx, src, **tol)


def test_index_add_noncontiguous_scalar_and_int32_index(mode, no_fallback):
    x = torch.randn(6, 5).t()  # [5, 6] transposed
    src = torch.randn(3, 5)[:, ::2]  # [3, 3] strided
    check_same(lambda a, s: a.index_add(1, torch.tensor([5, 0, 5], dtype=torch.int32, device=a.device), s),
               x[:3], src)
    check_same(lambda a, s: a.index_add(0, torch.tensor([0], device=a.device), s), torch.tensor(1.5),
               torch.tensor(2.0))


@pytest.mark.parametrize("dtype", DTYPES + [torch.bool])
def test_index_copy_and_fill(mode, no_fallback, dtype):
    x = _t((5, 4), dtype) if dtype != torch.bool else torch.rand(5, 4) > 0.5
    src = _t((5, 2), dtype, seed=2) if dtype != torch.bool else torch.rand(5, 2) > 0.5
    idx = torch.tensor([3, 0])
    check_same(lambda a, s: a.index_copy(1, idx.to(a.device), s), x, src)
    check_same(lambda a, s: a.clone().index_copy_(0, idx.to(a.device), s.t()[:, :4]), x, src)
    fill = True if dtype == torch.bool else 7
    check_same(lambda a: a.index_fill(1, torch.tensor([-1, 1], device=a.device), fill), x)
    check_same(lambda a: a.clone().index_fill_(0, torch.tensor(2, device=a.device), fill), x)
    v = torch.tensor(fill, dtype=dtype)
    check_same(lambda a, v: a.index_fill(0, torch.tensor([4, 0], device=a.device), v), x, v)
    check_same(lambda a: a.t().index_fill(0, torch.tensor([1], device=a.device), v), x)  # CPU scalar tensor


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce(mode, no_fallback, reduce, include_self):
    x = torch.randn(4, 6)
    src = torch.randn(4, 5)
    idx = torch.tensor([0, 5, 0, 2, 5])
    check_same(lambda a, s: a.index_reduce(1, idx.to(a.device), s, reduce, include_self=include_self), x, src)
    xi, si = (x * 5).long(), (src * 5).long()
    check_same(lambda a, s: a.index_reduce(1, idx.to(a.device), s, reduce, include_self=include_self), xi, si)


def test_take_put(mode, no_fallback):
    x = torch.randn(3, 4)
    idx = torch.tensor([[0, -1], [11, 5], [5, 3]])
    check_same(lambda a: torch.take(a, idx.to(a.device)), x)
    check_same(lambda a: torch.take(a.t(), idx.to(a.device)), x)
    check_same(lambda a: torch.take(a, idx.to(a.device), out=torch.empty(0, device=a.device)), x)
    src = torch.randn(3, 2)
    for accumulate in (False, True):
        uniq = torch.tensor([[0, -1], [10, 5], [4, 3]])
        check_same(lambda a, s: a.clone().put_(uniq.to(a.device), s, accumulate), x, src)
        check_same(lambda a, s: a.t().clone().put(uniq.to(a.device), s, accumulate), x, src)
    check_same(lambda a, s: a.clone().put_(idx.to(a.device), s, accumulate=True), x, src)  # duplicates add
    xi = torch.arange(12).reshape(3, 4)
    check_same(lambda a: a.put(torch.tensor([1, 1, 2], device=a.device),
                               torch.tensor([5, 6, 7], device=a.device), accumulate=True), xi)


@pytest.mark.parametrize("dtype", DTYPES + [torch.bool])
def test_masked_scatter(mode, no_fallback, dtype):
    x = _t((4, 5), dtype) if dtype != torch.bool else torch.rand(4, 5) > 0.5
    src = _t((30,), dtype, seed=3) if dtype != torch.bool else torch.rand(30) > 0.5
    mask = torch.rand(4, 5, generator=torch.Generator().manual_seed(4)) > 0.4
    check_same(lambda a, m, s: a.masked_scatter(m, s), x, mask, src)
    check_same(lambda a, m, s: a.clone().masked_scatter_(m[0], s.reshape(5, 6)), x, mask, src)  # broadcast mask
    check_same(lambda a, m, s: a.t().masked_scatter(m.t(), s[:20]), x, mask, src)
    check_same(lambda a, m, s: a.masked_scatter(m & False, s[:0]), x, mask, src)


@pytest.mark.parametrize("fn", [
    lambda a, s: a.index_add(1, torch.tensor([2, 0, 2], device=a.device), s, alpha=1.5),
    lambda a, s: a.index_copy(1, torch.tensor([2, 0, 1], device=a.device), s),
    lambda a, s: a.index_reduce(1, torch.tensor([2, 0, 2], device=a.device), s, "amax"),
    lambda a, s: a.masked_scatter(a > 0, torch.cat([s, s]).reshape(-1)),  # 24 >= 20 source elements
    lambda a, s: a.take(torch.tensor([3, 1, -2], device=a.device)) * s[0, 0],
    lambda a, s: a.put(torch.tensor([3, 1, 7], device=a.device), s[0], accumulate=True),
])
def test_gradients(mode, no_fallback, fn):
    g = torch.Generator().manual_seed(0)
    x, s = torch.randn(4, 5, generator=g), torch.randn(4, 3, generator=g)
    xc, sc = x.clone().requires_grad_(), s.clone().requires_grad_()
    xt, st = to_tpu(x).requires_grad_(), to_tpu(s).requires_grad_()
    out = fn(xc, sc)
    g = torch.randn(out.shape)
    out.backward(g)
    fn(xt, st).backward(to_tpu(g))
    torch.testing.assert_close(xt.grad.cpu(), xc.grad)
    torch.testing.assert_close(st.grad.cpu(), sc.grad)


def test_errors(mode):
    x = to_tpu(torch.randn(4, 5))
    with pytest.raises(IndexError, match="index 9 is out of bounds"):
        x.index_fill(0, torch.tensor([9], device="tpu"), 1.0).cpu()
    with pytest.raises(IndexError, match="Expected dtype int64 for index"):
        x.index_fill(0, torch.tensor([1], dtype=torch.int32, device="tpu"), 1.0)
    with pytest.raises(RuntimeError, match="only supports a 0-dimensional value tensor"):
        x.index_fill(0, torch.tensor([1], device="tpu"), torch.ones(2, device="tpu"))
    with pytest.raises(IndexError):
        x.index_add(0, torch.tensor([4], device="tpu"), torch.ones(1, 5, device="tpu")).cpu()
    with pytest.raises(RuntimeError, match="Expected a long tensor for index"):
        torch.take(x, torch.tensor([1], dtype=torch.int32, device="tpu"))
    with pytest.raises(RuntimeError, match="same number of elements"):
        x.put(torch.tensor([1, 2], device="tpu"), torch.ones(3, device="tpu"))
    with pytest.raises(RuntimeError, match="only supports boolean masks"):
        x.masked_scatter(torch.ones(4, 5, dtype=torch.uint8, device="tpu"), torch.ones(20, device="tpu"))
    with pytest.raises(RuntimeError, match="at least as many elements"):
        x.masked_scatter(x > -100, torch.ones(0, device="tpu"))
    assert x.index_add(0, torch.tensor([1], device="tpu"), torch.ones(1, 5, device="tpu")).sum().item() != 0
