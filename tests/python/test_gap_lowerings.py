"""Lowerings that made the OpInfo walk's closest-to-native entries native: logspace, cummax /
cummin, max_unpool2d / max_unpool3d, linalg.cross, narrow_copy's out=, cauchy_ / log_normal_ /
geometric_; and complex tensors through the data-movement ops the FFTs use (constant_pad_nd, cat,
flip, roll, repeat). Against PyTorch's CPU results in every eager mode.

Tolerances: exact (rtol=atol=0) where the device computes what the CPU kernel computes operation
for operation (data movement, scans of max/min, cross's products in the dtype); logspace's
float64 power rounded to float32 is exact too. Random draws are checked by their distributions
(6 standard errors: a false failure has probability ~1e-9 per check).
"""
import math

import pytest
import torch

import torch_tpu  # noqa: F401
from conftest import check_same

EXACT = dict(rtol=0, atol=0)


def rand(*shape, dtype=torch.float32, seed=0):
    torch.manual_seed(seed)
    return torch.testing.make_tensor(shape, dtype=dtype, device="cpu", low=-4, high=4)  # small range: ties


# ---- logspace --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64])
@pytest.mark.parametrize("args", [(0, 3, 7), (-2.5, 2.5, 10, 2.0), (1, 1, 1), (3, -1, 4, 0.5), (0, 5, 0)])
def test_logspace(mode, no_fallback, dtype, args):
    expected = torch.logspace(*args, dtype=dtype)
    actual = torch.logspace(*args, dtype=dtype, device="tpu").cpu()
    torch.testing.assert_close(actual, expected, **EXACT)
    out = torch.empty(0, dtype=dtype, device="tpu")
    torch.logspace(*args, out=out)
    torch.testing.assert_close(out.cpu(), expected, **EXACT)


def test_logspace_errors():
    with pytest.raises(RuntimeError, match="number of steps must be non-negative"):
        torch.logspace(0, 1, -1, device="tpu")


# ---- cummax / cummin -------------------------------------------------------------------------
@pytest.mark.parametrize("op", [torch.cummax, torch.cummin], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cummax_cummin_ties_take_the_latest_index(mode, no_fallback, op, dtype, dim):
    x = rand(9, 13, 3, dtype=dtype)
    if dtype.is_floating_point:
        x = x.round()  # ties
    check_same(lambda t: op(t, dim), x, **EXACT)


@pytest.mark.parametrize("op", [torch.cummax, torch.cummin], ids=lambda f: f.__name__)
def test_cummax_cummin_nan_sticks_with_the_latest_nan(mode, no_fallback, op):
    nan = float("nan")
    x = torch.tensor([[1.0, nan, 3.0, nan, -1.0], [2.0, 2.0, -0.0, 0.0, 5.0], [-math.inf, 0, math.inf, 0, nan]])
    check_same(lambda t: op(t, 1), x, **EXACT)
    check_same(lambda t: op(t, 0), x, **EXACT)
    check_same(lambda t: op(t, 0), torch.tensor(3.0), **EXACT)  # 0-dim
    check_same(lambda t: op(t, 1), torch.empty(2, 0), **EXACT)


def test_cummax_out_and_grad(mode):
    x = rand(4, 6, seed=3).round()
    values, indices = torch.empty(0, device="tpu"), torch.empty(0, dtype=torch.long, device="tpu")
    torch.cummax(x.to("tpu"), 1, out=(values, indices))
    ev, ei = torch.cummax(x, 1)
    torch.testing.assert_close(values.cpu(), ev, **EXACT)
    torch.testing.assert_close(indices.cpu(), ei, **EXACT)
    d = x.to("tpu").requires_grad_()
    torch.cummin(d, 0).values.sum().backward()
    c = x.clone().requires_grad_()
    torch.cummin(c, 0).values.sum().backward()
    torch.testing.assert_close(d.grad.cpu(), c.grad, **EXACT)


# ---- max_unpool ------------------------------------------------------------------------------
@pytest.mark.parametrize("batched", [True, False])
def test_max_unpool2d_inverts_max_pool(mode, no_fallback, batched):
    x = rand(2, 3, 8, 10, seed=4) if batched else rand(3, 8, 10, seed=4)
    pooled, idx = torch.nn.functional.max_pool2d(x, 2, return_indices=True)
    check_same(lambda p, i: torch.nn.functional.max_unpool2d(p, i, 2, output_size=x.shape[-2:]), pooled, idx, **EXACT)
    check_same(lambda p, i: torch.nn.functional.max_unpool2d(p, i, 2, output_size=(9, 11)), pooled, idx, **EXACT)


def test_max_unpool2d_channels_last_and_1d(mode, no_fallback):
    x = rand(2, 3, 8, 8, seed=5).to(memory_format=torch.channels_last)
    pooled, idx = torch.nn.functional.max_pool2d(x, 2, return_indices=True)
    r = check_same(lambda p, i: torch.nn.functional.max_unpool2d(p, i, 2), pooled, idx, **EXACT)
    expected = torch.nn.functional.max_unpool2d(pooled, idx, 2)
    assert r.stride() == expected.stride()
    x1 = rand(2, 3, 12, seed=6)
    p1, i1 = torch.nn.functional.max_pool1d(x1, 3, return_indices=True)
    check_same(lambda p, i: torch.nn.functional.max_unpool1d(p, i, 3), p1, i1, **EXACT)


def test_max_unpool3d(mode, no_fallback):
    x = rand(2, 2, 4, 6, 6, seed=7)
    pooled, idx = torch.nn.functional.max_pool3d(x, 2, return_indices=True)
    check_same(lambda p, i: torch.nn.functional.max_unpool3d(p, i, 2), pooled, idx, **EXACT)
    check_same(lambda p, i: torch.nn.functional.max_unpool3d(p, i, 2, output_size=(5, 7, 6)), pooled, idx, **EXACT)


def test_max_unpool_bad_arguments(mode):
    p = torch.ones(1, 1, 2, 2, device="tpu")
    with pytest.raises(RuntimeError, match="elements in indices should be type int64"):
        torch.nn.functional.max_unpool2d(p, torch.zeros(1, 1, 2, 2, dtype=torch.int32, device="tpu"), 2)
    with pytest.raises(RuntimeError, match="Expected shape of indices to be same"):
        torch.nn.functional.max_unpool2d(p, torch.zeros(1, 1, 2, 3, dtype=torch.long, device="tpu"), 2)
    # an index outside the output plane: an error when the program runs (IndexError naming the
    # index and the plane size; CPU's kernel raises RuntimeError "Found an invalid max index"), and
    # the device stays usable
    with pytest.raises(IndexError, match="index 99 is out of bounds for dimension 1 with size 16"):
        torch.nn.functional.max_unpool2d(p, torch.full((1, 1, 2, 2), 99, dtype=torch.long, device="tpu"), 2).cpu()
    assert (torch.ones(2, device="tpu") + 1).cpu().tolist() == [2.0, 2.0]


# ---- linalg.cross / narrow_copy ----------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_cross(mode, no_fallback, dtype):
    # float32: the CPU kernel's a*b - c*d is compiled to a fused multiply-add (one rounding less),
    # so results differ by an ulp: torch.testing's float32 defaults. bfloat16 (each step rounded)
    # and int64 are exact.
    tol = dict(rtol=1.3e-6, atol=1e-5) if dtype == torch.float32 else EXACT
    a, b = rand(4, 3, 5, dtype=dtype, seed=8), rand(4, 3, 5, dtype=dtype, seed=9)
    check_same(lambda x, y: torch.linalg.cross(x, y, dim=1), a, b, **tol)
    check_same(lambda x, y: torch.cross(x, y, dim=-2), a, b[:1], **tol)  # broadcast
    c, d = rand(6, 3, dtype=dtype, seed=10), rand(6, 3, dtype=dtype, seed=11)
    check_same(torch.linalg.cross, c, d, **tol)
    with pytest.raises(RuntimeError, match="must have length 3"):
        torch.linalg.cross(a.to("tpu"), b.to("tpu"))


def test_narrow_copy_out(mode, no_fallback):
    x = rand(5, 7, seed=12)
    out = torch.empty(0, device="tpu")
    torch.narrow_copy(x.to("tpu"), 1, -4, 3, out=out)
    torch.testing.assert_close(out.cpu(), torch.narrow_copy(x, 1, -4, 3), **EXACT)
    with pytest.raises(RuntimeError, match=r"start \(3\) \+ length \(5\) exceeds dimension size \(7\)"):
        torch.narrow_copy(x.to("tpu"), 1, 3, 5, out=out)


# ---- random: cauchy_, log_normal_, geometric_ ---------------------------------------------------
N = 200_000


def test_cauchy_quantiles(mode, no_fallback):
    torch.manual_seed(0)
    x = torch.empty(N, device="tpu").cauchy_(median=1.5, sigma=2.0).cpu().double()
    # the CDF at median +- sigma is 1/4 and 3/4: the fractions below them
    for q, p in ((1.5 - 2.0, 0.25), (1.5, 0.5), (1.5 + 2.0, 0.75)):
        frac = (x < q).double().mean().item()
        assert abs(frac - p) < 6 * math.sqrt(p * (1 - p) / N), (q, frac)
    with pytest.raises(RuntimeError, match="cauchy_ expects sigma > 0.0"):
        torch.empty(3, device="tpu").cauchy_(sigma=0)


def test_log_normal_moments(mode, no_fallback):
    torch.manual_seed(1)
    x = torch.empty(N, device="tpu").log_normal_(mean=0.5, std=0.25).cpu().double()
    assert (x > 0).all()
    logs = x.log()
    assert abs(logs.mean().item() - 0.5) < 6 * 0.25 / math.sqrt(N)
    assert abs(logs.std().item() - 0.25) < 6 * 0.25 / math.sqrt(2 * N)
    with pytest.raises(NotImplementedError, match="log_normal_cpu"):
        torch.empty(3, dtype=torch.long, device="tpu").log_normal_()


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_geometric_distribution(mode, no_fallback, dtype):
    torch.manual_seed(2)
    p = 0.3
    x = torch.empty(N, dtype=dtype, device="tpu").geometric_(p).cpu().double()
    assert x.min().item() >= 1 and (x == x.round()).all()
    mean, sd = 1 / p, math.sqrt(1 - p) / p
    assert abs(x.mean().item() - mean) < 6 * sd / math.sqrt(N)
    assert abs((x == 1).double().mean().item() - p) < 6 * math.sqrt(p * (1 - p) / N)
    with pytest.raises(RuntimeError, match=r"geometric_ expects p to be in \(0, 1\)"):
        torch.empty(3, device="tpu").geometric_(1.0)


# ---- complex tensors through data movement -----------------------------------------------------
def crand(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=torch.complex64, generator=g)


def test_complex_data_movement(mode, no_fallback):
    x = crand(3, 4, 5)
    check_same(lambda t: torch.nn.functional.pad(t, (1, 2, 0, 3)), x, **EXACT)
    check_same(lambda t: torch.nn.functional.pad(t, (-1, 2)), x, **EXACT)  # crops
    check_same(lambda t: torch.constant_pad_nd(t, (2, 1), 1.5 - 2j), x, **EXACT)
    check_same(lambda t: torch.cat([t, t.conj()], dim=-1), x, **EXACT)
    check_same(lambda t, r: torch.cat([t, r], dim=2), x, torch.randn(3, 4, 2), **EXACT)  # promotes the real one
    check_same(lambda t: torch.stack([t, t * 2]), x, **EXACT)
    check_same(lambda t: torch.flip(t, (0, -1)), x, **EXACT)
    check_same(lambda t: torch.roll(t, 2, -1), x, **EXACT)
    check_same(lambda t: torch.roll(t, (1, -2), (0, 2)), x, **EXACT)
    check_same(lambda t: torch.roll(t.transpose(0, 2), 3), x, **EXACT)  # flat, non-contiguous
    check_same(lambda t: t.repeat(2, 1, 3), x, **EXACT)
    check_same(lambda t: t.conj().flip(1), x, **EXACT)


# ---- FFTs on complex tensors (the transforms run through the CPU fallback) ---------------------
# Tolerance: the same pocketfft kernels run on both sides; only the fallback's copies differ, so
# the results are bitwise equal in practice. 1e-6 absolute leaves room for another transform order.
FFT_TOL = dict(rtol=1e-5, atol=1e-6)
FFTS = [
    (torch.fft.fft, dict(n=10)), (torch.fft.ifft, dict(n=5, norm="ortho")), (torch.fft.fft2, dict(s=(3, 10))),
    (torch.fft.ifft2, {}), (torch.fft.fftn, dict(s=(2, 7, 9), norm="forward")), (torch.fft.ifftn, dict(dim=(0, 2))),
    (torch.fft.irfft, dict(n=12)), (torch.fft.irfftn, dict(s=(4, 8))), (torch.fft.hfft, dict(n=9)),
    (torch.fft.hfft2, {}), (torch.fft.fftshift, {}), (torch.fft.ifftshift, dict(dim=1)),
]


@pytest.mark.parametrize("fn,kw", FFTS, ids=[f"{f.__name__}-{i}" for i, (f, _) in enumerate(FFTS)])
def test_fft_of_complex_tensors(mode, fn, kw):
    x = crand(4, 6, 8, seed=13)
    check_same(lambda t: fn(t, **kw), x, **FFT_TOL)
    check_same(lambda t: fn(t.transpose(0, 2), **kw), x, **FFT_TOL)


def test_fft_round_trip_and_counted_as_fallback(mode):
    x = crand(16, seed=14).to("tpu")
    torch_tpu.metrics.reset()
    back = torch.fft.ifft(torch.fft.fft(x))
    torch.testing.assert_close(back.cpu(), x.cpu(), rtol=1e-5, atol=1e-6)
    assert torch_tpu.metrics.fallback_ops().get("aten::_fft_c2c", 0) >= 2
