"""nonzero / nonzero_static / argwhere / masked_select and boolean-mask indexing against PyTorch's
CPU kernels. nonzero and masked_select learn their result size from the device (one host sync);
nonzero_static needs none."""
import pytest
import torch
import torch_tpu

from conftest import check_same, to_tpu


def _mask(shape, seed=0, p=0.5):
    return torch.rand(shape, generator=torch.Generator().manual_seed(seed)) < p


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_nonzero_dtypes(mode, no_fallback, dtype):
    x = (torch.randn(4, 5, 3) * _mask((4, 5, 3))).to(dtype)
    check_same(torch.nonzero, x)
    check_same(torch.argwhere, x)
    check_same(lambda t: torch.nonzero(t, as_tuple=True), x)
    check_same(lambda t: torch.nonzero(t.transpose(0, 2)[1:]), x)


def test_nonzero_edge_cases(mode, no_fallback):
    nan = float("nan")
    check_same(torch.nonzero, torch.tensor([0.0, nan, -0.0, 2.0]))  # NaN is nonzero, -0.0 is not
    check_same(torch.nonzero, torch.tensor(3.0))
    check_same(torch.nonzero, torch.tensor(0.0))
    check_same(torch.nonzero, torch.zeros(3, 4))
    check_same(torch.nonzero, torch.empty(0, 4))
    check_same(torch.nonzero, torch.ones(1000, 7))
    check_same(lambda t: torch.nonzero(t, out=torch.empty(0, dtype=torch.long, device=t.device)), _mask((6, 2)))


def test_nonzero_syncs_once_and_nonzero_static_never(mode):
    x = to_tpu(_mask((50, 8)))
    x.sum().item()  # settle
    before = torch_tpu.metrics.counters().get("host_syncs", 0)
    r = torch.nonzero(x)
    assert torch_tpu.metrics.counters().get("host_syncs", 0) - before == 1
    before = torch_tpu.metrics.counters().get("host_syncs", 0)
    s = torch.nonzero_static(x, size=500, fill_value=-7)
    assert torch_tpu.metrics.counters().get("host_syncs", 0) == before
    torch.testing.assert_close(r.cpu(), torch.nonzero(x.cpu()))
    torch.testing.assert_close(s.cpu(), torch.nonzero_static(x.cpu(), size=500, fill_value=-7))


@pytest.mark.parametrize("size", [0, 3, 40])
def test_nonzero_static(mode, no_fallback, size):
    check_same(lambda t: torch.nonzero_static(t, size=size), _mask((4, 5), seed=1))
    check_same(lambda t: torch.nonzero_static(t, size=size, fill_value=9), torch.randn(20) * _mask(20))
    check_same(lambda t: torch.nonzero_static(t, size=size), torch.empty(0, 2))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_masked_select(mode, no_fallback, dtype):
    x = (torch.randn(4, 6) * 10).to(dtype)
    check_same(torch.masked_select, x, _mask((4, 6)))
    check_same(torch.masked_select, x, _mask((6,), seed=2))  # mask broadcasts
    check_same(torch.masked_select, x[:1], _mask((3, 6), seed=3))  # self broadcasts
    check_same(lambda t, m: torch.masked_select(t.t(), m.t()), x, _mask((4, 6), seed=4))
    check_same(lambda t, m: torch.masked_select(t, m, out=torch.empty(0, dtype=t.dtype, device=t.device)),
               x, _mask((4, 6), seed=5))
    check_same(torch.masked_select, x, torch.zeros(4, 6, dtype=torch.bool))


def test_boolean_mask_indexing(mode, no_fallback):
    x = torch.randn(5, 4, 3)
    m = _mask((5, 4))
    check_same(lambda t, mm: t[mm], x, m)
    check_same(lambda t, mm: t[:, mm[0]], x, m)
    check_same(lambda t, mm: t[t > 0], x, m)

    def setitem(t, mm):
        t = t.clone()
        t[mm] = 0.5
        t[t < -1] += 3
        return t
    check_same(setitem, x, m)


@pytest.mark.parametrize("fn", [
    lambda t: torch.masked_select(t, t > 0) * 2,
    lambda t: t[t.detach() < 0.5],
    lambda t: t[:, torch.tensor([True, False, True, True], device=t.device)],
])
def test_gradients(mode, no_fallback, fn):
    x = torch.randn(3, 4)
    xc, xt = x.clone().requires_grad_(), to_tpu(x).requires_grad_()
    out = fn(xc)
    g = torch.randn(out.shape)
    out.backward(g)
    fn(xt).backward(to_tpu(g))
    torch.testing.assert_close(xt.grad.cpu(), xc.grad)


def test_errors(mode):
    x = to_tpu(torch.randn(3, 4))
    with pytest.raises(RuntimeError, match="expected BoolTensor for mask"):
        torch.masked_select(x, x.long())
    with pytest.raises(RuntimeError, match="Expected out tensor to have scalar type Long"):
        torch.nonzero(x, out=torch.empty(0, device="tpu"))
    with pytest.raises(RuntimeError, match="must be an non-negative integer"):
        torch.nonzero_static(x, size=-1)
    with pytest.raises(RuntimeError, match="unsupported operation"):
        torch.masked_select(x, x > 0, out=x)
