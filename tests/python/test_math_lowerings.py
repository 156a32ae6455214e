"""Native lowerings composed from StableHLO ops (binary_math.cc, unary_math.cc, reduce_nan.cc,
shrink_glu.cc): values, special cases (NaN, infinities, zeros, the domain edges) and gradients
against PyTorch's CPU kernels in every eager mode, with no CPU fallback.

Tolerances: float32 at torch.testing's defaults (the lowerings evaluate in float64 and round once,
so they agree with the CPU's dedicated kernels to about an ulp); float64 at its defaults;
bfloat16 at its defaults (computed in float32, rounded once).
"""
import math

import pytest
import torch
import torch.nn.functional as F

from conftest import check_same

SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1e-30, -1e-30, 1e-8, 20.0, -20.0, 100.0, 800.0, -800.0,
           1e30, -1e30, math.inf, -math.inf, math.nan, 0.9999999, -0.9999999, 1.0000001]


def values(dtype=torch.float32, n=64, seed=0, scale=3.0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, generator=g, dtype=torch.float64) * scale
    return torch.cat([x, torch.tensor(SPECIAL, dtype=torch.float64)]).to(dtype)


UNARY = [torch.asin, torch.acos, torch.atan, torch.sinh, torch.cosh, torch.asinh, torch.acosh,
         torch.atanh, torch.sinc, torch.special.entr]


@pytest.mark.parametrize("fn", UNARY, ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_unary_math(mode, no_fallback, fn, dtype):
    x = values(dtype)
    check_same(fn, x)
    check_same(lambda t: fn(t.view(-1, 2).t()), x)  # strided input


@pytest.mark.parametrize("fn", [torch.asin, torch.sinh, torch.atanh, torch.sinc], ids=lambda f: f.__name__)
def test_unary_math_inplace_out_and_ints(mode, no_fallback, fn):
    x = values() / 4
    check_same(lambda t: getattr(t.clone(), fn.__name__ + "_")(), x)
    check_same(lambda t: fn(t, out=torch.empty_like(t)), x)
    check_same(fn, torch.arange(-3, 4))  # integers compute in the default float dtype


def test_unary_math_grad(mode, no_fallback):
    x = (values(torch.float64, n=32, scale=0.4)[:32]).requires_grad_()
    for fn in (torch.asin, torch.acos, torch.atan, torch.sinh, torch.cosh, torch.asinh, torch.atanh, torch.sinc):
        g_cpu, = torch.autograd.grad(fn(x).sum(), x)
        xd = x.detach().to("tpu").requires_grad_()
        g_dev, = torch.autograd.grad(fn(xd).sum(), xd)
        torch.testing.assert_close(g_dev.cpu(), g_cpu)


BINARY = [torch.hypot, torch.logaddexp, torch.logaddexp2, torch.fmax, torch.fmin, torch.special.xlog1py]


@pytest.mark.parametrize("fn", BINARY, ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_binary_math(mode, no_fallback, fn, dtype):
    a = values(dtype, seed=1)
    b = values(dtype, seed=2)
    check_same(fn, a, b)
    n = len(SPECIAL)  # every pair of special values
    sa = torch.tensor(SPECIAL, dtype=dtype).view(n, 1)
    sb = torch.tensor(SPECIAL, dtype=dtype).view(1, n)
    check_same(fn, sa, sb)
    check_same(lambda x, y: fn(x, y, out=torch.empty_like(x)), a, b)


def test_binary_math_integers_and_scalars(mode, no_fallback):
    torch.manual_seed(0)
    i = torch.arange(-4, 5)
    check_same(torch.fmax, i, i.flip(0))
    check_same(torch.fmin, i, torch.tensor(2))
    check_same(torch.hypot, torch.randn(3, 4), torch.tensor(2.0))
    check_same(torch.special.xlog1py, torch.tensor([0.0, 1.0, 2.0]), torch.tensor([-1.0, math.nan, 3.0]))
    with pytest.raises(RuntimeError, match="hypot_tpu"):
        torch.hypot(i.to("tpu"), i.to("tpu"))


def test_heaviside(mode, no_fallback):
    x = torch.tensor([-2.0, -0.0, 0.0, 3.0, math.nan, math.inf])
    check_same(torch.heaviside, x, torch.tensor([0.5]))
    check_same(torch.heaviside, x, torch.linspace(-1, 1, 6))
    check_same(torch.heaviside, torch.tensor([-1, 0, 2]), torch.tensor([7, 8, 9]))
    check_same(torch.heaviside, torch.tensor([True, False]), torch.tensor([False, True]))
    check_same(lambda a, b: a.clone().heaviside_(b), x, torch.tensor([0.25]))
    with pytest.raises(RuntimeError, match="different dtypes"):
        torch.heaviside(x.to("tpu"), torch.tensor([1], device="tpu"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int32, torch.bool])
def test_nansum_nanmean(mode, no_fallback, dtype):
    x = torch.randn(4, 5, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    if dtype.is_floating_point:
        x[x > 1.0] = math.nan
    x = x.to(dtype) if dtype.is_floating_point else (x * 4).to(dtype)
    sums = [torch.nansum, lambda t: torch.nansum(t, dim=1), lambda t: torch.nansum(t, dim=(0, 2), keepdim=True)]
    if dtype.is_floating_point:
        sums.append(lambda t: torch.nanmean(t, dim=2))
    for fn in sums:
        if dtype == torch.bfloat16:
            # The device sums bfloat16 in float32 and rounds once; the CPU's bfloat16 nansum rounds
            # more often, and where sums cancel it is off by several bfloat16 ulps. Judge against
            # the float64 sum of the same values, rounded to bfloat16.
            torch.testing.assert_close(fn(x.to("tpu")).cpu(), fn(x.double()).to(dtype), equal_nan=True)
        else:
            check_same(fn, x)
    check_same(lambda t: torch.nansum(t, 1, dtype=torch.float64), x)
    check_same(torch.nansum, torch.empty(0, 3, dtype=dtype))


def test_trace_and_equal(mode, no_fallback):
    torch.manual_seed(0)
    for a in (torch.randn(5, 5), torch.randn(3, 7), torch.arange(12).view(4, 3), torch.randn(7, 3).t(),
              torch.empty(0, 4)):
        check_same(torch.trace, a)
    with pytest.raises(RuntimeError, match="expected a matrix"):
        torch.trace(torch.ones(3, device="tpu"))
    a = torch.randn(4, 5)
    d = a.to("tpu")
    assert torch.equal(d, a.clone().to("tpu"))
    b = a.clone()
    b[2, 3] += 1
    assert not torch.equal(d, b.to("tpu"))
    assert not torch.equal(d, d[:, :4])
    n = torch.tensor([1.0, math.nan], device="tpu")
    assert not torch.equal(n, n)  # NaN != NaN
    assert torch.equal(torch.arange(6, device="tpu"), torch.arange(6, device="tpu"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_shrinks_log_sigmoid(mode, no_fallback, dtype):
    x = values(dtype)
    check_same(F.hardshrink, x)
    check_same(lambda t: F.hardshrink(t, 2.0), x)
    check_same(lambda t: F.softshrink(t, 0.75), x)
    check_same(F.logsigmoid, x)
    check_same(lambda t: torch.ops.aten.log_sigmoid_forward(t), x)


def test_activation_grads(mode, no_fallback):
    torch.manual_seed(0)
    x = torch.randn(6, 8, dtype=torch.float64)
    w = torch.tensor([0.25], dtype=torch.float64)
    w8 = torch.linspace(-1, 1, 8, dtype=torch.float64)
    cases = [
        (lambda t: F.hardshrink(t, 0.5), [x]),
        (lambda t: F.softshrink(t, 0.5), [x]),
        (F.logsigmoid, [x]),
        (lambda t: F.glu(t, dim=1), [x]),
        (lambda t: F.glu(t, dim=0), [x]),
        (F.prelu, [x, w]),
        (F.prelu, [x, w8]),
    ]
    for fn, args in cases:
        cpu_args = [a.clone().requires_grad_() for a in args]
        out = fn(*cpu_args)
        grad_out = torch.randn_like(out)
        expected = torch.autograd.grad(out, cpu_args, grad_out)
        dev_args = [a.to("tpu").requires_grad_() for a in args]
        out_d = fn(*dev_args)
        torch.testing.assert_close(out_d.detach().cpu(), out.detach())
        got = torch.autograd.grad(out_d, dev_args, grad_out.to("tpu"))
        for g, e in zip(got, expected):
            torch.testing.assert_close(g.cpu(), e)


def test_glu_and_prelu_values_and_errors(mode, no_fallback):
    torch.manual_seed(0)
    x = torch.randn(3, 4, 6)
    for dim in (0, 1, 2, -1):
        if x.shape[dim] % 2 == 0:
            check_same(lambda t: F.glu(t, dim), x)
    check_same(lambda t: F.glu(t.transpose(1, 2), 1), x)
    with pytest.raises(RuntimeError, match="even"):
        F.glu(torch.randn(3, 5, device="tpu"), 1)
    check_same(F.prelu, torch.randn(2, 3, 4), torch.tensor([0.1, -0.2, 0.3]))
    check_same(F.prelu, torch.randn(5), torch.tensor([0.1]))
    with pytest.raises(RuntimeError, match="softshrink_tpu|not implemented"):
        F.softshrink(torch.arange(3, device="tpu"))
    with pytest.raises(RuntimeError, match="lambda must be greater or equal to 0"):
        F.softshrink(torch.randn(3, device="tpu"), -1.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("exponent", [1, 2, 3, -0.5, -1, -2])
def test_pow_scalar_fast_exponents_match_cpu_bits(mode, no_fallback, dtype, exponent):
    # The CPU computes these exponents by multiplies, square roots and reciprocals rather than
    # pow; the lowering uses the same formulas, so every element (zeros, infinities and NaN
    # included) has the CPU's bits, in the functional, in-place and out= forms.
    x = values(dtype, n=256)
    want = x.pow(exponent)
    t = x.to("tpu")
    got = [t.pow(exponent).cpu(), t.clone().pow_(exponent).cpu()]
    out = torch.empty_like(t)
    torch.pow(t, exponent, out=out)
    got.append(out.cpu())
    for g in got:
        assert torch.equal(g.isnan(), want.isnan())
        assert torch.equal(g.nan_to_num(0.0), want.nan_to_num(0.0)), (g - want).abs().nan_to_num(0).max()
        assert torch.equal(g.signbit()[~g.isnan()], want.signbit()[~want.isnan()])


def test_pow_scalar_two_backward(mode, no_fallback):
    # pow(x, 2)'s backward takes pow(x, 1): a copy of x.
    x = values(torch.float32)
    check_same(lambda t: torch.autograd.grad(t.pow(2).sum(), t)[0], x.requires_grad_())
