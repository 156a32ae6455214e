"""unique / unique_consecutive / unique_dim, bincount, histc, searchsorted / bucketize, cdist and
linalg.vector_norm on the device against PyTorch's CPU results, in both eager modes, with zero
CPU-fallback ops; errors as on CPU.

Exact comparisons, except: bincount with float weights sums in another order than CPU (float
tolerances); cdist's reductions likewise (rtol/atol 1e-5), and its gradients at rtol 1e-4 (a
division by the distance raised to p - 1 amplifies the forward's rounding); vector norms at
float32 defaults and their gradients at rtol 1e-4 for the same reason.
"""
import pytest
import torch

import torch_tpu
from conftest import check_same


def _run_both(fn, *args):
    expected = fn(*args)
    actual = fn(*[a.to("tpu") if isinstance(a, torch.Tensor) else a for a in args])
    return expected, actual


def assert_equal_results(fn, *args, **close):
    expected, actual = _run_both(fn, *args)
    expected = expected if isinstance(expected, tuple) else (expected,)
    actual = actual if isinstance(actual, tuple) else (actual,)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.device.type == "tpu"
        assert a.dtype == e.dtype and a.shape == e.shape, (a.dtype, e.dtype, a.shape, e.shape)
        torch.testing.assert_close(a.cpu(), e, equal_nan=True, **(close or dict(rtol=0, atol=0)))


def assert_same_error(fn, *args):
    with pytest.raises(Exception) as cpu:
        fn(*args)
    with pytest.raises(Exception) as tpu:
        fn(*[a.to("tpu") if isinstance(a, torch.Tensor) else a for a in args])
    assert type(tpu.value) is type(cpu.value)
    # The sign of a NaN printed in a message is not meaningful (CPU's reductions give -nan).
    first = lambda e: str(e.value).splitlines()[0].replace("-nan", "nan")  # noqa: E731
    assert first(tpu) == first(cpu)


# ---- unique ------------------------------------------------------------------------------------
UNIQUE_INPUTS = {
    "ints": torch.randint(0, 6, (5, 7), generator=torch.Generator().manual_seed(0)),
    "floats_nan_signed_zero": torch.tensor([1.0, float("nan"), 2.0, float("nan"), 1.0, -0.0, 0.0, -3.5]),
    "bool": torch.tensor([True, False, True, True]),
    "bfloat16": torch.tensor([0.5, 0.25, 0.5, 3.0]).bfloat16(),
    "scalar": torch.tensor(4),
    "single": torch.tensor([7]),
    "empty": torch.zeros(0, 3),
}


@pytest.mark.parametrize("name", sorted(UNIQUE_INPUTS))
@pytest.mark.parametrize("inverse, counts", [(False, False), (True, False), (True, True), (False, True)])
def test_unique_flat(name, inverse, counts, mode, no_fallback):
    x = UNIQUE_INPUTS[name]
    assert_equal_results(lambda t: torch._unique2(t, sorted=True, return_inverse=inverse, return_counts=counts), x)
    assert_equal_results(lambda t: torch.unique_consecutive(t, return_inverse=inverse, return_counts=counts), x)
    assert_equal_results(lambda t: torch._unique(t, sorted=False, return_inverse=inverse), x)
    # torch.unique's public form.
    assert_equal_results(lambda t: torch.unique(t, sorted=True, return_inverse=inverse, return_counts=counts), x)


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_unique_dim(dim, mode, no_fallback):
    x = torch.randint(0, 2, (6, 3, 2), generator=torch.Generator().manual_seed(1))
    x[3] = x[0]  # a repeated slice along dim 0
    assert_equal_results(lambda t: torch.unique(t, dim=dim, return_inverse=True, return_counts=True), x)
    assert_equal_results(lambda t: torch.ops.aten.unique_dim(t, dim, True, False, False), x)
    assert_equal_results(lambda t: torch.ops.aten.unique_dim_consecutive(t, dim, True, True), x)
    assert_equal_results(lambda t: torch.unique_consecutive(t, return_counts=True, dim=dim), x)


def test_unique_dim_edges(no_fallback):
    assert_equal_results(lambda t: torch.ops.aten.unique_dim(t, 0, True, True, True), torch.zeros(0, 3))
    assert_equal_results(lambda t: torch.ops.aten.unique_dim(t, 1, True, True, True), torch.zeros(2, 0))
    assert_equal_results(lambda t: torch.unique(t, dim=1), torch.tensor([[1.0, 2.0, 1.0], [3.0, 4.0, 3.0]]))
    assert_same_error(lambda t: torch.ops.aten.unique_dim(t, 0, True, True, True), torch.zeros(2, 0))
    assert_same_error(lambda t: torch.ops.aten.unique_dim(t, 0, True, True, True), torch.tensor(5))
    assert_same_error(lambda t: torch.unique(t, dim=3), torch.zeros(2, 2))


# ---- bincount ----------------------------------------------------------------------------------
@pytest.mark.parametrize("weights", [None, torch.float32, torch.float64, torch.int64, torch.bfloat16])
@pytest.mark.parametrize("minlength", [0, 3, 20])
def test_bincount(weights, minlength, mode, no_fallback):
    g = torch.Generator().manual_seed(2)
    x = torch.randint(0, 9, (50,), generator=g)
    if weights is None:
        assert_equal_results(lambda t: torch.bincount(t, minlength=minlength), x)
    else:
        w = (torch.rand(50, generator=g) * 10).to(weights)
        assert_equal_results(lambda t, u: torch.bincount(t, u, minlength=minlength), x, w, rtol=1e-6, atol=1e-5)
    assert_equal_results(lambda t: torch.bincount(t, minlength=minlength), x.int())
    assert_equal_results(lambda t: torch.bincount(t, minlength=minlength), torch.zeros(0, dtype=torch.long))


@pytest.mark.parametrize("args", [
    (torch.tensor([1, -1, 2]),), (torch.ones(2, 2, dtype=torch.long),), (torch.ones(3),),
    (torch.tensor([1, 2]), torch.ones(3)), (torch.tensor([True, False]),)])
def test_bincount_errors(args):
    assert_same_error(lambda *a: torch.bincount(*a), *args)
    assert_same_error(lambda t: torch.bincount(t, minlength=-1), torch.tensor([1]))


# ---- histc -------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("bins, lo, hi", [(10, 0, 0), (7, -1.0, 1.5), (1, -2, 2), (33, 0.25, 0.75)])
def test_histc(dtype, bins, lo, hi, mode, no_fallback):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(300, generator=g).to(dtype)
    if lo != hi:
        x[:3] = torch.tensor([float("nan"), hi, lo]).to(dtype)  # NaN skipped; the edges are inside
    assert_equal_results(lambda t: torch.histc(t, bins=bins, min=lo, max=hi), x)


def test_histc_edge_cases(no_fallback):
    assert_equal_results(lambda t: torch.histc(t, bins=4), torch.full((5,), 3.0))  # all equal: widened range
    assert_equal_results(lambda t: torch.histc(t, bins=4), torch.zeros(0))
    assert_same_error(lambda t: torch.histc(t, bins=4), torch.tensor([1.0, float("nan")]))  # data range NaN
    assert_equal_results(lambda t: torch.histc(t, bins=3, min=1, max=1), torch.tensor([1.0, 2.0]))
    out = torch.empty(0, device="tpu")
    torch.histc(torch.arange(10.0, device="tpu"), bins=5, out=out)
    assert torch.equal(out.cpu(), torch.histc(torch.arange(10.0), bins=5))


@pytest.mark.parametrize("args", [
    (torch.ones(3), 0, 0, 0), (torch.ones(3), 5, 2, 1), (torch.tensor([1.0, float("inf")]), 5, 0, 0),
    (torch.ones(3, dtype=torch.long), 5, 0, 1)])
def test_histc_errors(args):
    x, bins, lo, hi = args
    assert_same_error(lambda t: torch.histc(t, bins=bins, min=lo, max=hi), x)


# ---- searchsorted / bucketize ------------------------------------------------------------------
def _sorted(*shape, seed=4, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).sort(-1).values.to(dtype)


@pytest.mark.parametrize("right", [False, True])
@pytest.mark.parametrize("out_int32", [False, True])
def test_searchsorted_1d_and_nd(right, out_int32, mode, no_fallback):
    bd = _sorted(9)
    bd[4] = bd[5]  # a repeated boundary (left and right differ there)
    values = torch.cat([bd[[0, 4, 8]], torch.randn(9, generator=torch.Generator().manual_seed(5)),
                        torch.tensor([float("nan"), float("inf"), -float("inf")])]).reshape(3, 5)
    kw = dict(right=right, out_int32=out_int32)
    assert_equal_results(lambda b, v: torch.searchsorted(b, v, **kw), bd, values)
    assert_equal_results(lambda b, v: torch.bucketize(v, b, **kw), bd, values)
    assert_equal_results(lambda b: torch.searchsorted(b, 0.1, **kw), bd)
    assert_equal_results(lambda b: torch.bucketize(0.1, b, **kw), bd)
    nd = _sorted(3, 6)
    assert_equal_results(lambda b, v: torch.searchsorted(b, v, side="right" if right else "left", out_int32=out_int32),
                         nd, values)
    # Non-contiguous values and an int boundary tensor against float values (promotion).
    assert_equal_results(lambda b, v: torch.searchsorted(b, v.t(), **kw), torch.arange(-3, 4), values.t().contiguous())


def test_searchsorted_sorter_and_nan_boundaries(mode, no_fallback):
    g = torch.Generator().manual_seed(6)
    unsorted = torch.randn(2, 8, generator=g)
    sorter = unsorted.argsort(-1)
    values = torch.randn(2, 5, generator=g)
    assert_equal_results(lambda b, v, s: torch.searchsorted(b, v, sorter=s), unsorted, values, sorter)
    assert_equal_results(lambda b, v, s: torch.searchsorted(b, v, side="right", sorter=s), unsorted, values, sorter)
    # Unsorted boundaries and NaN in them: CPU's binary search, comparison for comparison.
    with_nan = torch.tensor([0.0, float("nan"), 1.0, -2.0, 3.0])
    assert_equal_results(lambda b, v: torch.searchsorted(b, v), with_nan, torch.linspace(-3, 4, 15))
    assert_equal_results(lambda b, v: torch.searchsorted(b, v), torch.zeros(0), torch.ones(3))


def test_searchsorted_out_and_errors(no_fallback):
    bd, v = _sorted(5).to("tpu"), torch.randn(4).to("tpu")
    out = torch.empty(4, dtype=torch.long, device="tpu")
    torch.searchsorted(bd, v, out=out)
    assert torch.equal(out.cpu(), torch.searchsorted(bd.cpu(), v.cpu()))
    assert_same_error(lambda b, x: torch.searchsorted(b, x, side="middle"), _sorted(5), torch.ones(2))
    assert_same_error(lambda b, x: torch.searchsorted(b, x, right=True, side="left"), _sorted(5), torch.ones(2))
    assert_same_error(lambda b, x: torch.searchsorted(b, x), _sorted(2, 5), torch.ones(3, 2))
    assert_same_error(lambda b, x, s: torch.searchsorted(b, x, sorter=s), _sorted(5), torch.ones(2),
                      torch.tensor([0, 1, 2, 3, 9]))
    assert_same_error(lambda x, b: torch.bucketize(x, b), torch.ones(2), _sorted(2, 5))
    assert_same_error(lambda b, x: torch.searchsorted(b, x), torch.tensor([False, True]), torch.tensor([True]))


# ---- cdist -------------------------------------------------------------------------------------
@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, float("inf"), 0.5, 1.5, 3.0])
@pytest.mark.parametrize("shapes", [((4, 3), (5, 3)), ((2, 4, 3), (1, 6, 3)), ((30, 2), (7, 2))])
def test_cdist_forward_backward(p, shapes, mode, no_fallback):
    g = torch.Generator().manual_seed(7)
    x1_, x2_ = (torch.randn(*s, generator=g) for s in shapes)
    r1, r2 = shapes[0][-2], shapes[1][-2]
    for mode_ in (None, 1, 2):
        x1, x2 = x1_, x2_.clone()
        matmul_form = p == 2 and (mode_ == 1 or (mode_ is None and (r1 > 25 or r2 > 25)))
        if not matmul_form:
            # A zero distance, the gradients' special case. (Not for the matrix-multiply form:
            # there a zero distance comes out as the sqrt of rounding noise, on CPU too.)
            x2[..., 0, :] = x1.reshape(-1, x1.shape[-1])[0]
        expected_grads, actual_grads = [], []
        for dev, grads in (("cpu", expected_grads), ("tpu", actual_grads)):
            a = x1.to(dev, copy=True).requires_grad_()
            b = x2.to(dev, copy=True).requires_grad_()
            d = torch.cdist(a, b, p=p, compute_mode=("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                                                     "donot_use_mm_for_euclid_dist")[mode_ or 0])
            (d * torch.arange(d.numel(), dtype=d.dtype, device=dev).reshape(d.shape).cos()).sum().backward()
            grads.extend([d.detach().cpu(), a.grad.cpu(), b.grad.cpu()])
        torch.testing.assert_close(actual_grads[0], expected_grads[0], rtol=1e-5, atol=1e-5)
        for a, e in zip(actual_grads[1:], expected_grads[1:]):
            torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-5, equal_nan=True)


def test_cdist_double_and_errors(no_fallback):
    check_same(lambda a, b: torch.cdist(a, b, p=1.5), torch.randn(3, 4).double(), torch.randn(2, 4).double())
    check_same(lambda a, b: torch.cdist(a, b), torch.randn(0, 4), torch.randn(2, 4))
    check_same(lambda a, b: torch.cdist(a, b), torch.randn(3, 0), torch.randn(2, 0))
    assert_same_error(lambda a, b: torch.cdist(a, b), torch.randn(3, 4), torch.randn(2, 5))
    assert_same_error(lambda a, b: torch.cdist(a, b, p=-1), torch.randn(3, 4), torch.randn(2, 4))
    assert_same_error(lambda a, b: torch.cdist(a, b, p=1), torch.randn(3, 4).bfloat16(), torch.randn(2, 4).bfloat16())
    assert_same_error(lambda a, b: torch.cdist(a, b), torch.randn(4), torch.randn(2, 4))


# ---- linalg.vector_norm ------------------------------------------------------------------------
@pytest.mark.parametrize("ord", [0, 1, 2, float("inf"), -float("inf"), 0.5, 3, -1.5])
@pytest.mark.parametrize("dim, keepdim", [(None, False), (1, True), ((0, 2), False), (-1, True)])
@pytest.mark.parametrize("dtype", [None, torch.float64])
def test_vector_norm_forward_backward(ord, dim, keepdim, dtype, no_fallback):
    x = torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(8))
    x[0, 0, 0] = 0.0
    results = []
    for dev in ("cpu", "tpu"):
        a = x.to(dev, copy=True).requires_grad_()
        n = torch.linalg.vector_norm(a, ord, dim, keepdim, dtype=dtype)
        n.sum().backward()
        results.append((n.detach().cpu(), None if a.grad is None else a.grad.cpu()))
    (e, eg), (t, tg) = results
    assert t.dtype == e.dtype and t.shape == e.shape
    torch.testing.assert_close(t, e, rtol=1e-5, atol=1e-6)
    assert (tg is None) == (eg is None)  # ord=0 has no gradient
    if eg is not None:
        torch.testing.assert_close(tg, eg, rtol=1e-4, atol=1e-5, equal_nan=True)
